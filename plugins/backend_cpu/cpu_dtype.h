// Element formats the CPU backend reads: f16/bf16 conversion and GGUF quant blocks.
#pragma once

#include <cstdint>
#include <cstring>

#include "tessera/abi.h"

namespace tsr::cpu {

inline float f16_to_f32(uint16_t h) {
  // Exact conversion including subnormals, infinities and NaN.
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

constexpr int kQBlock = 32;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQBlock];
};
static_assert(sizeof(BlockQ8_0) == 34, "GGUF Q8_0 block layout");

struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQBlock / 2];  // element j in the low nibble of qs[j], j+16 in the high nibble
};
static_assert(sizeof(BlockQ4_0) == 18, "GGUF Q4_0 block layout");

// Bytes of a row of n elements of dtype (n a multiple of the block size).
int64_t row_bytes(tsr_dtype dtype, int64_t n);
bool is_weight_dtype(tsr_dtype dtype);
// Converts one row of n elements to f32.
void row_to_f32(tsr_dtype dtype, const void* src, float* dst, int64_t n);

}  // namespace tsr::cpu
