#include "quant_formats/float_convert.h"

namespace tsr {

uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // result is subnormal or zero: round mant * 2^24
    const float scaled = std::bit_cast<float>(abs) * 0x1p24f;
    // Adding 2^23 makes the FPU round to an integer with ties to even.
    const uint32_t q = std::bit_cast<uint32_t>(scaled + 0x1p23f) - 0x4b000000u;
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t mant_rounded = abs + 0x0fffu + ((abs >> 13) & 1u);  // ties to even
  return static_cast<uint16_t>(sign | ((mant_rounded - 0x38000000u) >> 13));
}

uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace tsr
