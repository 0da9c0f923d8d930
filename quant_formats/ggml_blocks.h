// GGUF's Q8_0 and Q4_0 block layouts and their reference codecs. The quantizers follow
// ggml-quants.c's reference code operation for operation (same float expressions in the
// same order): any reordering could change a rounding and break byte equality with
// llama.cpp's files.
#pragma once

#include <cstdint>

namespace tsr::quant {

inline constexpr int64_t kBlockQ8_0 = 32;
inline constexpr int64_t kBlockQ4_0 = 32;

struct BlockQ8_0 {
  uint16_t d;  // scale, f16
  int8_t qs[kBlockQ8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "GGUF Q8_0 block layout");

struct BlockQ4_0 {
  uint16_t d;  // scale, f16
  uint8_t qs[kBlockQ4_0 / 2];  // element j in the low nibble of qs[j], j + 16 in the high one
};
static_assert(sizeof(BlockQ4_0) == 18, "GGUF Q4_0 block layout");

// `k` is the element count, a multiple of the block size.
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t k);
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t k);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t k);
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t k);

}  // namespace tsr::quant
