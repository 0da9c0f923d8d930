#include "quant_formats/iq4.h"

#include <algorithm>
#include <cmath>

#include "quant_formats/float_convert.h"
#include "quant_formats/kquant_search.h"

namespace tsr::quant {

namespace {

constexpr int kTries = 7;  // scale candidates either side of the first guess (ggml's ntry)
constexpr float kGroupMaxEps = 1e-15f;

// The index of the table level nearest to v (ties to the lower level only when strictly
// nearer, as ggml's best_index_int8).
int nearest_level(float v) {
  const int8_t* t = kIQ4Values;
  if (v <= t[0]) return 0;
  if (v >= t[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < t[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - t[hi - 1] < t[hi] - v ? hi - 1 : hi;
}

// The weighted least-squares scale of 32 values over 2 * kTries + 1 candidate grids;
// `weights` null: x². Zero for an all-zero block.
float best_scale(const float* x, const float* weights) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0;
  const auto fit = [&](float id, float& sumqx, float& sumq2) {
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = kIQ4Values[nearest_level(id * x[j])];
      const float w = weights ? weights[j] : x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
  };
  float sumqx, sumq2;
  fit(1 / (-max / kIQ4Values[0]), sumqx, sumq2);
  float d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int itry = -kTries; itry <= kTries; ++itry) {
    fit((itry + kIQ4Values[0]) / max, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// 32 indices at scale 1 / id into IQ4's nibble order.
void pack_indices(const float* x, float id, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>(nearest_level(id * x[j]) | (nearest_level(id * x[j + 16]) << 4));
  }
}

// ggml's σ² of a super-block: twice its mean square (quantize_row_iq4_nl_impl).
float twice_mean_square(const float* x, int n) { return detail::sum_squares(x, n) * (2.f / n); }

void quantize_iq4_nl_blocks(const float* x, BlockIQ4_NL* y, int64_t k, const float* qw) {
  for (int64_t i = 0; i < k / kBlockIQ4_NL; ++i, x += kBlockIQ4_NL) {
    float w[kBlockIQ4_NL];
    if (qw) detail::importance_weights(x, qw + kBlockIQ4_NL * i, twice_mean_square(x, kBlockIQ4_NL), kBlockIQ4_NL, w);
    const float d = best_scale(x, qw ? w : nullptr);
    y[i].d = f32_to_f16(d);
    pack_indices(x, d ? 1 / d : 0, y[i].qs);
  }
}

void quantize_iq4_xs_blocks(const float* x, BlockIQ4_XS* y, int64_t k, const float* qw) {
  for (int64_t i = 0; i < k / 256; ++i, x += 256) {
    float scales[8];
    float max_scale = 0, amax_scale = 0;
    const float sigma2 = qw ? twice_mean_square(x, 256) : 0.f;
    for (int ib = 0; ib < 8; ++ib) {
      float w[32];
      if (qw) detail::importance_weights(x + 32 * ib, qw + 256 * i + 32 * ib, sigma2, 32, w);
      scales[ib] = best_scale(x + 32 * ib, qw ? w : nullptr);
      if (std::fabs(scales[ib]) > amax_scale) {
        amax_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    BlockIQ4_XS& b = y[i];
    const float d = -max_scale / 32;
    b.d = f32_to_f16(d);
    b.scales_h = 0;
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < 8; ++ib) {
      // The sub-block's indices come from its scale as stored (before the f16 rounding of d).
      int l = std::max(-32, std::min(31, static_cast<int>(std::nearbyint(id * scales[ib]))));
      const float dl = d * l;
      pack_indices(x + 32 * ib, dl ? 1 / dl : 0.f, b.qs + 16 * ib);
      l += 32;
      if (ib % 2 == 0) {
        b.scales_l[ib / 2] = static_cast<uint8_t>(l & 0xf);
      } else {
        b.scales_l[ib / 2] |= static_cast<uint8_t>((l & 0xf) << 4);
      }
      b.scales_h = static_cast<uint16_t>(b.scales_h | ((l >> 4) << 2 * ib));
    }
  }
}

}  // namespace

void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t k) { quantize_iq4_nl_blocks(x, y, k, nullptr); }
void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t k) { quantize_iq4_xs_blocks(x, y, k, nullptr); }
void quantize_row_iq4_nl_imatrix(const float* x, BlockIQ4_NL* y, int64_t n_per_row, const float* qw) {
  quantize_iq4_nl_blocks(x, y, n_per_row, qw);
}
void quantize_row_iq4_xs_imatrix(const float* x, BlockIQ4_XS* y, int64_t n_per_row, const float* qw) {
  quantize_iq4_xs_blocks(x, y, n_per_row, qw);
}

void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockIQ4_NL; ++i, y += kBlockIQ4_NL) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIQ4Values[x[i].qs[j] & 0xf];
      y[j + 16] = d * kIQ4Values[x[i].qs[j] >> 4];
    }
  }
}

void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / 256; ++i) {
    const float d = f16_to_f32(x[i].d);
    for (int ib = 0; ib < 8; ++ib, y += 32) {
      const float dl = d * iq4_xs_scale(x[i], ib);
      const uint8_t* qs = x[i].qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIQ4Values[qs[j] & 0xf];
        y[j + 16] = dl * kIQ4Values[qs[j] >> 4];
      }
    }
  }
}

}  // namespace tsr::quant
