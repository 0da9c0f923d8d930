// The CPU backend's per-row reductions of ABI 2.0: layer norm (with optional bias),
// softmax, top-k (MoE routing) and the MoE combine. Sums accumulate in double, as rms_norm's do.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu_ops.h"
#include "cpu_tensor.h"
#include "tessera/sdk/op_checks.hpp"
#include "tessera/sdk/status.hpp"

namespace tsr::cpu {

using sdk::require;

namespace {

constexpr int64_t kParallelMin = 1 << 15;

void require_rows_like(const Matrix& out, const Matrix& x, const char* what) {
  require(out.rows == x.rows && out.cols == x.cols, std::string(what) + ": out and x shapes differ");
}

// A [d] f32 vector, or NULL when `t` is NULL and `optional`.
const float* vector_of(const tsr_tensor* t, int64_t d, bool optional, const char* what) {
  if (t == nullptr && optional) return nullptr;
  const Matrix v = as_matrix(t, TSR_DTYPE_F32, what);
  require(v.rows * v.cols == d, std::string(what) + " length differs from the row length");
  return v.row<float>(0);
}

}  // namespace

void op_layer_norm(OpContext& ctx, const tsr_layer_norm_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "layer_norm out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "layer_norm x");
  require_rows_like(out, x, "layer_norm");
  const float* w = vector_of(p.weight, x.cols, false, "layer_norm weight");
  const float* b = vector_of(p.bias, x.cols, true, "layer_norm bias");
  sdk::check_layer_norm_scalars(p);
#pragma omp parallel for num_threads(ctx.n_threads) if (x.rows * x.cols >= kParallelMin)
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* in = x.row<float>(r);
    double sum = 0, sq = 0;
    for (int64_t c = 0; c < x.cols; ++c) sum += in[c];
    const double mean = sum / double(x.cols);
    for (int64_t c = 0; c < x.cols; ++c) sq += (in[c] - mean) * (in[c] - mean);
    const double inv = 1.0 / std::sqrt(sq / double(x.cols) + p.eps);
    float* o = out.row<float>(r);
    for (int64_t c = 0; c < x.cols; ++c) {
      o[c] = static_cast<float>((in[c] - mean) * inv * w[c] + (b != nullptr ? b[c] : 0.0f));
    }
  }
}

void op_softmax(OpContext& ctx, const tsr_softmax_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "softmax out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "softmax x");
  require_rows_like(out, x, "softmax");
  sdk::check_softmax_scalars(p);
#pragma omp parallel for num_threads(ctx.n_threads) if (x.rows * x.cols >= kParallelMin)
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* in = x.row<float>(r);
    float* o = out.row<float>(r);
    float mx = -INFINITY;
    for (int64_t c = 0; c < x.cols; ++c) mx = std::max(mx, in[c] * p.scale);
    double sum = 0;
    for (int64_t c = 0; c < x.cols; ++c) {
      o[c] = std::exp(in[c] * p.scale - mx);
      sum += o[c];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < x.cols; ++c) o[c] *= inv;
  }
}

void op_top_k(OpContext& ctx, const tsr_top_k_params& p) {
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "top_k x");
  const Matrix ids = as_matrix(p.ids, TSR_DTYPE_I32, "top_k ids");
  const Matrix values = as_matrix(p.values, TSR_DTYPE_F32, "top_k values");
  sdk::check_top_k_scalars(p, x.cols);
  require(ids.rows == x.rows && ids.cols == p.k && values.rows == x.rows && values.cols == p.k,
          "top_k: ids and values must be [n, k]");
  const int64_t k = p.k;
#pragma omp parallel for num_threads(ctx.n_threads) if (x.rows * x.cols >= kParallelMin)
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* in = x.row<float>(r);
    std::vector<int32_t> order(static_cast<size_t>(x.cols));
    std::iota(order.begin(), order.end(), 0);
    // NaN sorts last, so that it is never routed to while a number is left.
    const auto before = [in](int32_t a, int32_t b) {
      const bool na = std::isnan(in[a]), nb = std::isnan(in[b]);
      if (na != nb) return nb;
      return in[a] > in[b] || (!(in[b] > in[a]) && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    for (int64_t j = 0; j < k; ++j) {
      ids.row<int32_t>(r)[j] = order[static_cast<size_t>(j)];
      values.row<float>(r)[j] = in[order[static_cast<size_t>(j)]];
    }
  }
}

// Each token's expert outputs, weighted and added in slot order, with ggml's rounding: the
// weights' sum in double (ggml_vec_sum_f32), then each product rounded to f32 before it is
// added (ggml_mul, then ggml_add of the slot views).
void op_moe_combine(OpContext& ctx, const tsr_moe_combine_params& p) {
  sdk::check_moe_combine_layout(p);
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "moe_combine out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "moe_combine x");
  const Matrix w = as_matrix(p.weights, TSR_DTYPE_F32, "moe_combine weights");
  const int64_t n_used = p.x->shape[1], d = p.x->shape[2];
  require(n_used > 0, "moe_combine: n_used must be > 0");
#pragma omp parallel for num_threads(ctx.n_threads) if (x.rows * x.cols >= kParallelMin)
  for (int64_t r = 0; r < x.rows; ++r) {
    std::vector<float> weight(w.row<float>(r), w.row<float>(r) + n_used);
    if (p.normalize != 0) {
      double sum = 0;
      for (const float v : weight) sum += v;
      for (float& v : weight) v /= static_cast<float>(sum);
    }
    if (p.scale != 0) {
      for (float& v : weight) v *= p.scale;
    }
    const float* in = x.row<float>(r);
    float* o = out.row<float>(r);
    for (int64_t c = 0; c < d; ++c) o[c] = in[c] * weight[0];
    for (int64_t s = 1; s < n_used; ++s) {
      const float* xs = in + s * d;
      for (int64_t c = 0; c < d; ++c) {
        const float product = xs[c] * weight[size_t(s)];
        o[c] += product;
      }
    }
  }
}

}  // namespace tsr::cpu
