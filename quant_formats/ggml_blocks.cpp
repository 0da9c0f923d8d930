#include "quant_formats/ggml_blocks.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "quant_formats/float_convert.h"
#include "quant_formats/kquant_search.h"

namespace tsr::quant {

namespace {

// A block holding a NaN or an infinity is stored with a NaN scale and zero quants (the
// zero point for Q4_0): it dequantizes to NaN, where a float-to-int conversion of its
// values would be undefined. ggml leaves such blocks undefined; finite blocks are as
// ggml's, but for a scale so small that 1/d overflows (subnormal; ggml: undefined),
// whose block is stored as zeros.
bool all_finite(const float* x, int64_t n) {
  return std::all_of(x, x + n, [](float v) { return std::isfinite(v); });
}

}  // namespace

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockQ8_0; ++i, x += kBlockQ8_0) {
    if (!all_finite(x, kBlockQ8_0)) {
      y[i].d = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
      std::fill(std::begin(y[i].qs), std::end(y[i].qs), int8_t{0});
      continue;
    }
    float amax = 0.0f;
    for (int64_t j = 0; j < kBlockQ8_0; ++j) {
      const float a = std::fabs(x[j]);
      amax = amax > a ? amax : a;  // ggml's MAX(), whose NaN behaviour std::max does not share
    }
    const float d = amax / ((1 << 7) - 1);
    const float id = std::fabs(d) >= std::numeric_limits<float>::min() ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int64_t j = 0; j < kBlockQ8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t k) {
  constexpr int64_t half = kBlockQ4_0 / 2;
  for (int64_t i = 0; i < k / kBlockQ4_0; ++i, x += kBlockQ4_0) {
    if (!all_finite(x, kBlockQ4_0)) {
      y[i].d = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
      std::fill(std::begin(y[i].qs), std::end(y[i].qs), uint8_t{0x88});
      continue;
    }
    float amax = 0.0f, max = 0.0f;  // the signed value of largest magnitude, first one wins
    for (int64_t j = 0; j < kBlockQ4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = std::fabs(d) >= std::numeric_limits<float>::min() ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int64_t j = 0; j < half; ++j) {
      // ggml truncates through int8_t; x * id lies in [-8, 8], so the cast is in range.
      const auto q0 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x[j] * id + 8.5f)));
      const auto q1 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x[half + j] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockQ8_0; ++i, y += kBlockQ8_0) {
    const float d = f16_to_f32(x[i].d);
    for (int64_t j = 0; j < kBlockQ8_0; ++j) y[j] = x[i].qs[j] * d;
  }
}

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t k) {
  constexpr int64_t half = kBlockQ4_0 / 2;
  for (int64_t i = 0; i < k / kBlockQ4_0; ++i, y += kBlockQ4_0) {
    const float d = f16_to_f32(x[i].d);
    for (int64_t j = 0; j < half; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0x0f) - 8) * d;
      y[half + j] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

namespace {

// The min and the max of a block (ggml starts them at ±FLT_MAX).
void min_max(const float* x, float& min, float& max) {
  min = std::numeric_limits<float>::max();
  max = -std::numeric_limits<float>::max();
  for (int64_t j = 0; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

void store_q5(const uint8_t* q, uint8_t* qs, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
    bits |= uint32_t((q[j] & 0x10u) >> 4) << j;
    bits |= uint32_t((q[j + 16] & 0x10u) >> 4) << (j + 16);
  }
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(bits >> (8 * b));
}

}  // namespace

// The three quantizers round as ggml's: + 0.5 (or + 16.5) and truncation through an integer.
void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; ++i, x += 32) {
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(min);
    for (int j = 0; j < 16; ++j) {
      const auto q0 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>((x[j] - min) * id + 0.5f)));
      const auto q1 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>((x[j + 16] - min) * id + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; ++i, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(std::min<int8_t>(31, static_cast<int8_t>(x[j] * id + 16.5f)));
    store_q5(q, y[i].qs, y[i].qh);
  }
}

void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; ++i, x += 32) {
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    y[i].m = f32_to_f16(min);
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
    store_q5(q, y[i].qs, y[i].qh);
  }
}

void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; ++i, y += 32) {
    const float d = f16_to_f32(x[i].d), m = f16_to_f32(x[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = (x[i].qs[j] & 0x0F) * d + m;
      y[j + 16] = (x[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; ++i, y += 32) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < 32; ++j) y[j] = (q5_value(x[i].qs, x[i].qh, j) - 16) * d;
  }
}

void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / 32; ++i, y += 32) {
    const float d = f16_to_f32(x[i].d), m = f16_to_f32(x[i].m);
    for (int j = 0; j < 32; ++j) y[j] = q5_value(x[i].qs, x[i].qh, j) * d + m;
  }
}

namespace {

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

}  // namespace

namespace {

// Each block of 32 of a row under importance weights qw·sqrt(σ² + x²), σ² the row's mean
// square (ggml's quantize_row_q*_impl). Symmetric grids (Q4_0, Q5_0): make_qx_quants, codes
// biased by nmax.
template <class Block, class Store>
void weighted_symmetric(const float* x, Block* y, int64_t n_per_row, const float* qw, int nmax, Store store) {
  const float sigma2 = detail::sum_squares(x, n_per_row) / n_per_row;
  for (int64_t i = 0; i < n_per_row / 32; ++i, x += 32, qw += 32) {
    float w[32];
    int8_t L[32];
    detail::importance_weights(x, qw, sigma2, 32, w);
    y[i].d = f32_to_f16(detail::make_qx_quants(32, nmax, x, L, w));
    store(reinterpret_cast<const uint8_t*>(L), y[i]);
  }
}

// Grids with a min (Q4_1, Q5_1): make_qkx3_quants' search.
template <class Block, class Store>
void weighted_asymmetric(const float* x, Block* y, int64_t n_per_row, const float* qw, int nmax, Store store) {
  const float sigma2 = detail::sum_squares(x, n_per_row) / n_per_row;
  for (int64_t i = 0; i < n_per_row / 32; ++i, x += 32, qw += 32) {
    float w[32], min;
    uint8_t L[32], Laux[32];
    detail::importance_weights(x, qw, sigma2, 32, w);
    y[i].d = f32_to_f16(detail::make_qkx_quants(32, nmax, x, w, L, &min, Laux, detail::kWeightedQkx));
    y[i].m = f32_to_f16(-min);
    store(L, y[i]);
  }
}

}  // namespace

void quantize_row_q4_0_imatrix(const float* x, BlockQ4_0* y, int64_t n_per_row, const float* qw) {
  weighted_symmetric(x, y, n_per_row, qw, 8, [](const uint8_t* L, BlockQ4_0& b) { pack_nibbles(L, b.qs); });
}

void quantize_row_q4_1_imatrix(const float* x, BlockQ4_1* y, int64_t n_per_row, const float* qw) {
  weighted_asymmetric(x, y, n_per_row, qw, 15, [](const uint8_t* L, BlockQ4_1& b) { pack_nibbles(L, b.qs); });
}

void quantize_row_q5_0_imatrix(const float* x, BlockQ5_0* y, int64_t n_per_row, const float* qw) {
  weighted_symmetric(x, y, n_per_row, qw, 16, [](const uint8_t* L, BlockQ5_0& b) { store_q5(L, b.qs, b.qh); });
}

void quantize_row_q5_1_imatrix(const float* x, BlockQ5_1* y, int64_t n_per_row, const float* qw) {
  weighted_asymmetric(x, y, n_per_row, qw, 31, [](const uint8_t* L, BlockQ5_1& b) { store_q5(L, b.qs, b.qh); });
}

}  // namespace tsr::quant
