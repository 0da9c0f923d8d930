#include "quant_formats/int4_g128.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "quant_formats/float_convert.h"

namespace tsr::quant {

namespace {

// NaN (a group with non-finite weights) goes to 0: a float-to-int conversion of it would be undefined.
uint8_t clamp_nibble(float v) { return v > 0.0f ? static_cast<uint8_t>(std::min(std::nearbyint(v), 15.0f)) : 0; }

}  // namespace

void quantize_row_int4_g128(const float* x, GroupInt4* y, int64_t k) {
  constexpr int64_t half = kGroupInt4 / 2;
  for (int64_t g = 0; g < k / kGroupInt4; ++g, x += kGroupInt4) {
    // A group with a NaN or an infinity dequantizes to NaN (as Q8_0/Q4_0 blocks do).
    if (!std::all_of(x, x + kGroupInt4, [](float v) { return std::isfinite(v); })) {
      y[g] = GroupInt4{};
      y[g].d = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    float lo = 0.0f, hi = 0.0f;
    for (int64_t j = 0; j < kGroupInt4; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    y[g].d = f32_to_f16((hi - lo) / 15.0f);
    const float d = f16_to_f32(y[g].d);  // quantize against the scale the reader sees
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[g].z = clamp_nibble(-lo * id);
    y[g].pad = 0;
    for (int64_t j = 0; j < half; ++j) {
      const uint8_t q0 = clamp_nibble(x[j] * id + y[g].z);
      const uint8_t q1 = clamp_nibble(x[half + j] * id + y[g].z);
      y[g].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_row_int4_g128(const GroupInt4* x, float* y, int64_t k) {
  constexpr int64_t half = kGroupInt4 / 2;
  for (int64_t g = 0; g < k / kGroupInt4; ++g, y += kGroupInt4) {
    const float d = f16_to_f32(x[g].d);
    const int z = x[g].z;
    for (int64_t j = 0; j < half; ++j) {
      y[j] = static_cast<float>((x[g].qs[j] & 0x0f) - z) * d;
      y[half + j] = static_cast<float>((x[g].qs[j] >> 4) - z) * d;
    }
  }
}

}  // namespace tsr::quant
