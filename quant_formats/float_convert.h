// Scalar conversions of the 16-bit float formats GGUF stores (exact, incl. subnormals).
#pragma once

#include <bit>
#include <cstdint>

namespace tsr {

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  const uint32_t bits = exp == 0x1f ? sign | 0x7f800000u | (mant << 13)
                                    : sign | ((exp + 112u) << 23) | (mant << 13);
  return std::bit_cast<float>(bits);
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays NaN.
uint16_t f32_to_f16(float f);
uint16_t f32_to_bf16(float f);

}  // namespace tsr
