// The scale searches ggml's quantizers share (ggml-quants.c's make_*_quants), private to
// quant_formats/: the K-quants, the weighted 32-blocks and IQ4 call them. Each evaluates
// ggml's float expressions in ggml's order, so a quantizer built on them writes ggml's bytes.
// `weights` are per-element error weights: the caller's choice of x², |x|, or an importance
// matrix entry (llama-imatrix's mean x² of the input column) times sqrt(σ² + x²).
#pragma once

#include <cmath>
#include <cstdint>

namespace tsr::quant::detail {

// A group whose largest magnitude is below this is all zeros (ggml's GROUP_MAX_EPS).
inline constexpr float kGroupMaxEps = 1e-15f;

// Round half to even, as ggml's nearest_int (its magic-number addition) for |v| < 2^22,
// the range every caller stays in.
inline int nearest_int(float v) { return static_cast<int>(std::nearbyint(v)); }

// The value of largest magnitude, the first of equals, as ggml's scans keep it.
float signed_max(const float* v, int n);

// Symmetric quants in [-nmax, nmax) of n values, stored biased by nmax, and their scale:
// the scale minimizing the weighted error over 19 candidate grids around nmax / max
// (ggml's make_qx_quants with rmse_type 1). `weights` null: x².
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, const float* weights);

// Symmetric 3-bit-style quants refined one value at a time to maximize (Σwxl)²/Σwl²
// (ggml's make_q3_quants with do_rmse): L holds l + nmax on return.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L);

// Asymmetric quants in [0, nmax] with a min: scale and min fitted by weighted least
// squares over nstep + 1 candidate grids (ggml's make_qkx2_quants, and make_qkx3_quants
// with weights). Returns the scale and stores the negated min in *the_min.
struct QkxSearch {
  float rmin, rdelta;
  int nstep;
  bool use_mad;  // absolute instead of squared errors
};
float make_qkx_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                      uint8_t* Laux, const QkxSearch& s);
// The search the weighted quantizers use (make_qkx3_quants' arguments -0.9, 0.05, 36).
inline constexpr QkxSearch kWeightedQkx{-0.9f, 0.05f, 36, false};

// Non-negative quants in [0, nmax] of the sub-block scales (or mins) of a super-block,
// weighted by each sub-block's total weight (ggml's make_qp_quants): 9 candidate grids,
// then up to five rounds of single-value refinement. Returns the super-scale.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* weights);

// The importance weights of n elements: qw[j] * sqrt(sigma2 + x[j]²).
inline void importance_weights(const float* x, const float* qw, float sigma2, int n, float* w) {
  for (int j = 0; j < n; ++j) w[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// Σ x² over n values, summed in order.
inline float sum_squares(const float* x, int64_t n) {
  float s = 0;
  for (int64_t j = 0; j < n; ++j) s += x[j] * x[j];
  return s;
}

}  // namespace tsr::quant::detail
