// The CPU backend's elementwise ops of ABI 2.0: mul, scale, GELU (tanh form) and GeGLU,
// bias add, tanh softcapping, and casts between F32, F16 and BF16. Reference loops: the
// compiler vectorizes them, and none is on a Llama step's critical path.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu_ops.h"
#include "cpu_tensor.h"
#include "quant_formats/float_convert.h"
#include "tessera/sdk/op_checks.hpp"
#include "tessera/sdk/status.hpp"

namespace tsr::cpu {

using sdk::require;

namespace {

constexpr int64_t kParallelMin = 1 << 15;

// out[r, c] = f(x[r, c], y[r, c]) over rows of f32; y may be NULL (unary).
template <class F>
void map_rows(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix* y, F f) {
#pragma omp parallel for num_threads(ctx.n_threads) if (out.rows * out.cols >= kParallelMin)
  for (int64_t r = 0; r < out.rows; ++r) {
    const float* a = x.row<float>(r);
    const float* b = y != nullptr ? y->row<float>(r) : nullptr;
    float* o = out.row<float>(r);
    for (int64_t c = 0; c < out.cols; ++c) o[c] = f(a[c], b != nullptr ? b[c] : 0.0f);
  }
}

// GELU at llama.cpp's CPU precision (ggml's GGML_GELU_FP16, on unconditionally): x is
// rounded to f16 and looked up in a table of the tanh form, itself rounded to f16;
// beyond +-10 GELU is 0 or x. Gemma's logits move by ~1e-3 between this and the exact
// form, as much as the oracle's tolerance: matching it keeps Gemma token for token.
float gelu_f16(float x) {
  static const std::vector<float> table = [] {
    std::vector<float> t(1 << 16);
    for (size_t i = 0; i < t.size(); ++i) {
      const float v = f16_to_f32(static_cast<uint16_t>(i));
      constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
      const float g = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * v * (1.0f + 0.044715f * v * v)));
      t[i] = f16_to_f32(f32_to_f16(g));
    }
    return t;
  }();
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return table[f32_to_f16(x)];
}

}  // namespace

void op_mul(OpContext& ctx, const tsr_mul_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "mul out");
  const Matrix a = as_matrix(p.a, TSR_DTYPE_F32, "mul a");
  const Matrix b = as_matrix(p.b, TSR_DTYPE_F32, "mul b");
  require_same_shape(out, a, "mul");
  require_same_shape(out, b, "mul");
  map_rows(ctx, out, a, &b, [](float u, float v) { return u * v; });
}

void op_scale(OpContext& ctx, const tsr_scale_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "scale out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "scale x");
  require_same_shape(out, x, "scale");
  sdk::check_scale_scalars(p);
  const float s = p.scale;
  map_rows(ctx, out, x, nullptr, [s](float u, float) { return u * s; });
}

void op_gelu(OpContext& ctx, const tsr_gelu_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "gelu out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "gelu x");
  require_same_shape(out, x, "gelu");
  map_rows(ctx, out, x, nullptr, [](float u, float) { return gelu_f16(u); });
}

void op_gelu_mul(OpContext& ctx, const tsr_gelu_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "gelu_mul out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "gelu_mul x");
  const Matrix up = as_matrix(p.up, TSR_DTYPE_F32, "gelu_mul up");
  require_same_shape(out, x, "gelu_mul");
  require_same_shape(out, up, "gelu_mul");
  map_rows(ctx, out, x, &up, [](float g, float u) { return gelu_f16(g) * u; });
}

// As ggml_swiglu_oai's CPU kernel, operation for operation, so that gpt-oss's experts
// round as llama.cpp's do.
void op_swiglu_oai(OpContext& ctx, const tsr_swiglu_oai_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "swiglu_oai out");
  const Matrix gate = as_matrix(p.gate, TSR_DTYPE_F32, "swiglu_oai gate");
  const Matrix up = as_matrix(p.up, TSR_DTYPE_F32, "swiglu_oai up");
  require_same_shape(out, gate, "swiglu_oai");
  require_same_shape(out, up, "swiglu_oai");
  sdk::check_swiglu_oai_scalars(p);
  const float alpha = p.alpha, limit = p.limit;
  map_rows(ctx, out, gate, &up, [alpha, limit](float g, float u) {
    const float x = std::min(g, limit);
    const float y = std::clamp(u, -limit, limit);
    return x / (1.0f + std::exp(alpha * -x)) * (y + 1.0f);
  });
}

void op_bias_add(OpContext& ctx, const tsr_bias_add_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "bias_add out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "bias_add x");
  const Matrix bias = as_matrix(p.bias, TSR_DTYPE_F32, "bias_add bias");
  require_same_shape(out, x, "bias_add");
  require(bias.rows * bias.cols == x.cols, "bias_add: bias length differs from the row length");
  const float* b = bias.row<float>(0);
#pragma omp parallel for num_threads(ctx.n_threads) if (out.rows * out.cols >= kParallelMin)
  for (int64_t r = 0; r < out.rows; ++r) {
    const float* in = x.row<float>(r);
    float* o = out.row<float>(r);
    for (int64_t c = 0; c < out.cols; ++c) o[c] = in[c] + b[c];
  }
}

void op_softcap(OpContext& ctx, const tsr_softcap_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "softcap out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "softcap x");
  require_same_shape(out, x, "softcap");
  sdk::check_softcap_scalars(p);
  const float cap = p.cap;
  map_rows(ctx, out, x, nullptr, [cap](float u, float) { return cap * std::tanh(u / cap); });
}

namespace {

bool is_float_dtype(tsr_dtype d) { return d == TSR_DTYPE_F32 || d == TSR_DTYPE_F16 || d == TSR_DTYPE_BF16; }

float load(tsr_dtype d, const uint8_t* row, int64_t c) {
  uint16_t h;
  switch (d) {
    case TSR_DTYPE_F16: std::memcpy(&h, row + 2 * c, 2); return f16_to_f32(h);
    case TSR_DTYPE_BF16: std::memcpy(&h, row + 2 * c, 2); return bf16_to_f32(h);
    default: {
      float f;
      std::memcpy(&f, row + 4 * c, 4);
      return f;
    }
  }
}

void store(tsr_dtype d, uint8_t* row, int64_t c, float v) {
  uint16_t h;
  switch (d) {
    case TSR_DTYPE_F16: h = f32_to_f16(v); std::memcpy(row + 2 * c, &h, 2); return;
    case TSR_DTYPE_BF16: h = f32_to_bf16(v); std::memcpy(row + 2 * c, &h, 2); return;
    default: std::memcpy(row + 4 * c, &v, 4); return;
  }
}

}  // namespace

bool cast_supports(tsr_dtype from, tsr_dtype to) { return is_float_dtype(from) && is_float_dtype(to); }

void op_cast(OpContext& ctx, const tsr_cast_params& p) {
  const Matrix out = as_matrix(p.out, "cast out");
  const Matrix x = as_matrix(p.x, "cast x");
  require(cast_supports(x.dtype, out.dtype), "cast: only F32, F16 and BF16 convert");
  require(p.x->ndim == p.out->ndim && x.rows == out.rows && x.cols == out.cols, "cast: shapes differ");
  for (int i = 0; i < p.x->ndim; ++i) require(p.x->shape[i] == p.out->shape[i], "cast: shapes differ");
#pragma omp parallel for num_threads(ctx.n_threads) if (out.rows * out.cols >= kParallelMin)
  for (int64_t r = 0; r < out.rows; ++r) {
    const uint8_t* in = x.row<uint8_t>(r);
    uint8_t* o = out.row<uint8_t>(r);
    for (int64_t c = 0; c < out.cols; ++c) store(out.dtype, o, c, load(x.dtype, in, c));
  }
}

}  // namespace tsr::cpu
