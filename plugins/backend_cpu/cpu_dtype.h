// Element formats the CPU backend reads: f16/bf16 conversion and GGUF quant blocks.
#pragma once

#include <cstdint>
#include <cstring>

#include "tessera/abi.h"
#include "tessera/sdk/tensor.hpp"

namespace tsr::cpu {

// The SDK's exact conversions (subnormals, infinities and NaN included).
using sdk::bf16_to_f32;
using sdk::f16_to_f32;

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
