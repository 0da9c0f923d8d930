// GGUF's blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) and their reference codecs. The quantizers follow
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

struct BlockQ4_1 {
  uint16_t d, m;   // f16 scale and min: element = q * d + m
  uint8_t qs[16];  // nibbles, as Q4_0's
};
static_assert(sizeof(BlockQ4_1) == 20, "GGUF Q4_1 block layout");

struct BlockQ5_0 {
  uint16_t d;       // f16 scale: element = (q - 16) * d
  uint8_t qh[4];    // fifth bit of element j in bit j (little-endian u32)
  uint8_t qs[16];   // low nibbles, as Q4_0's
};
static_assert(sizeof(BlockQ5_0) == 22, "GGUF Q5_0 block layout");

struct BlockQ5_1 {
  uint16_t d, m;    // element = q * d + m
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24, "GGUF Q5_1 block layout");

// The 5-bit value of element j of a Q5_0/Q5_1 block.
inline int q5_value(const uint8_t* qs, const uint8_t* qh, int j) {
  const uint32_t bits = uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
  const int low = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
  return low | int((bits >> j) & 1) << 4;
}

// `k` is the element count, a multiple of the block size. Q4_1, Q5_0 and Q5_1 take finite
// input (see kquants.h).
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t k);
void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t k);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t k);
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t k);
void quantize_row_q4_1_ref(const float* x, BlockQ4_1* y, int64_t k);
void quantize_row_q5_0_ref(const float* x, BlockQ5_0* y, int64_t k);
void quantize_row_q5_1_ref(const float* x, BlockQ5_1* y, int64_t k);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t k);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t k);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t k);

// The quantizers under an importance matrix, as llama-quantize --imatrix runs them
// (ggml-quants.c's quantize_row_q*_impl): one row of `n_per_row` elements (a multiple of
// 32) with `qw` its n_per_row importances (non-negative, finite). Each block's scale (and
// min) is searched to minimize the error weighted by qw·sqrt(σ² + x²), σ² the row's mean
// square. (Q8_0 has no weighted form: llama-quantize ignores the matrix for it.)
void quantize_row_q4_0_imatrix(const float* x, BlockQ4_0* y, int64_t n_per_row, const float* qw);
void quantize_row_q4_1_imatrix(const float* x, BlockQ4_1* y, int64_t n_per_row, const float* qw);
void quantize_row_q5_0_imatrix(const float* x, BlockQ5_0* y, int64_t n_per_row, const float* qw);
void quantize_row_q5_1_imatrix(const float* x, BlockQ5_1* y, int64_t n_per_row, const float* qw);

}  // namespace tsr::quant
