#include "quant_formats/fp8_e4m3.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace tsr::quant {

namespace {

constexpr int kBias = 7;
constexpr float kMinNormal = 0x1p-6f;
constexpr float kSubnormalStep = 0x1p-9f;  // 2^(1 - bias - 3 mantissa bits)

}  // namespace

uint8_t f32_to_e4m3(float v) {
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const float a = std::min(std::fabs(v), kFp8E4m3Max);
  if (a < kMinNormal) {  // subnormal: a multiple of 2^-9; 8 steps round up to the smallest normal
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(std::nearbyint(a / kSubnormalStep)));
  }
  int e = 0;
  const float frac = std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  auto m = static_cast<int>(std::nearbyint((frac * 2.0f - 1.0f) * 8.0f));  // ties to even
  int exp = e - 1 + kBias;
  if (m == 8) {
    m = 0;
    ++exp;
  }
  return static_cast<uint8_t>(sign | (exp << 3) | m);  // 448 = exp 15, m 6: never NaN
}

float e4m3_to_f32(uint8_t b) {
  const int exp = (b >> 3) & 0x0f, m = b & 0x07;
  if (exp == 0x0f && m == 0x07) return std::numeric_limits<float>::quiet_NaN();
  const float a = exp == 0 ? float(m) * kSubnormalStep : std::ldexp(1.0f + float(m) / 8.0f, exp - kBias);
  return (b & 0x80) ? -a : a;
}

void quantize_row_fp8_e4m3(const float* x, uint8_t* row, int64_t k) {
  float amax = 0.0f;
  for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float s = amax / kFp8E4m3Max;
  const float is = s != 0.0f ? 1.0f / s : 0.0f;
  std::memcpy(row, &s, sizeof s);
  for (int64_t j = 0; j < k; ++j) row[4 + j] = f32_to_e4m3(x[j] * is);
}

void dequantize_row_fp8_e4m3(const uint8_t* row, float* y, int64_t k) {
  // Decoding through a table keeps this on the matmul kernels' hot path cheap.
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = e4m3_to_f32(static_cast<uint8_t>(b));
    return t;
  }();
  float s;
  std::memcpy(&s, row, sizeof s);
  for (int64_t j = 0; j < k; ++j) y[j] = table[row[4 + j]] * s;
}

}  // namespace tsr::quant
