// GGUF's K-quants: super-blocks of 256 elements (QK_K) split into sub-blocks of 16 or 32
// with quantized per-sub-block scales (and minimums), byte for byte as ggml-common.h lays
// them out, and their reference codecs. Dequantization evaluates ggml's expressions, so the
// floats are ggml's; the quantizers follow ggml-quants.c's reference quantizers
// (quantize_row_q*_K_ref, what llama-quantize runs without an importance matrix, and
// quantize_row_q*_K_impl, what it runs with one) operation for operation, so a file written
// here holds llama.cpp's bytes. Inputs are finite: the
// callers refuse NaN and infinity first (core/quant/quant.cpp), as llama-quantize's
// validation of its output does.
#pragma once

#include <cstdint>

namespace tsr::quant {

inline constexpr int64_t kQK_K = 256;

struct BlockQ2_K {
  uint8_t scales[16];  // sub-block of 16: scale in the low nibble, min in the high one
  uint8_t qs[64];      // 2-bit quants, four per byte
  uint16_t d;          // f16 super-scale of the scales
  uint16_t dmin;       // f16 super-scale of the mins
};
static_assert(sizeof(BlockQ2_K) == 84, "GGUF Q2_K block layout");

struct BlockQ3_K {
  uint8_t hmask[32];   // third bit of each quant
  uint8_t qs[64];      // low 2 bits
  uint8_t scales[12];  // sixteen 6-bit scales, biased by 32
  uint16_t d;          // f16 super-scale
};
static_assert(sizeof(BlockQ3_K) == 110, "GGUF Q3_K block layout");

struct BlockQ4_K {
  uint16_t d, dmin;    // f16 super-scales of the scales and of the mins
  uint8_t scales[12];  // eight 6-bit scales and eight 6-bit mins (get_scale_min)
  uint8_t qs[128];     // nibbles: chunk c of 64 holds element 64c + l low, 64c + 32 + l high
};
static_assert(sizeof(BlockQ4_K) == 144, "GGUF Q4_K block layout");

struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];      // fifth bits: bit 2c of qh[l] for element 64c + l, bit 2c+1 for +32
  uint8_t qs[128];     // low nibbles, as Q4_K's
};
static_assert(sizeof(BlockQ5_K) == 176, "GGUF Q5_K block layout");

struct BlockQ6_K {
  uint8_t ql[128];     // low 4 bits
  uint8_t qh[64];      // high 2 bits
  int8_t scales[16];   // one per sub-block of 16
  uint16_t d;          // f16 super-scale
};
static_assert(sizeof(BlockQ6_K) == 210, "GGUF Q6_K block layout");

// The activation format the K-quant dot products take: one f32 scale per 256 values.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sums of each 16 consecutive quants
};
static_assert(sizeof(BlockQ8_K) == 292, "GGUF Q8_K block layout");

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block.
inline void kquant_scale_min(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The sixteen signed scales (-32..31) of a Q3_K block.
void q3_k_scales(const BlockQ3_K& b, int8_t out[16]);

// `k` is the element count, a multiple of 256.
void quantize_row_q2_k_ref(const float* x, BlockQ2_K* y, int64_t k);
void quantize_row_q3_k_ref(const float* x, BlockQ3_K* y, int64_t k);
void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t k);
void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t k);
void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t k);
void quantize_row_q8_k_ref(const float* x, BlockQ8_K* y, int64_t k);
// The same bytes, in AVX-512 vectors where the CPU has them (activations of every prefill).
void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t k);

// The quantizers under an importance matrix, as llama-quantize --imatrix runs them
// (ggml-quants.c's quantize_row_q*_K_impl): one row of `n_per_row` elements (a multiple of
// 256) with `qw` its n_per_row importances (llama-imatrix's mean x² of each input column,
// non-negative and finite).
void quantize_row_q2_k_imatrix(const float* x, BlockQ2_K* y, int64_t n_per_row, const float* qw);
void quantize_row_q3_k_imatrix(const float* x, BlockQ3_K* y, int64_t n_per_row, const float* qw);
void quantize_row_q4_k_imatrix(const float* x, BlockQ4_K* y, int64_t n_per_row, const float* qw);
void quantize_row_q5_k_imatrix(const float* x, BlockQ5_K* y, int64_t n_per_row, const float* qw);
void quantize_row_q6_k_imatrix(const float* x, BlockQ6_K* y, int64_t n_per_row, const float* qw);

void dequantize_row_q2_k(const BlockQ2_K* x, float* y, int64_t k);
void dequantize_row_q3_k(const BlockQ3_K* x, float* y, int64_t k);
void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t k);
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t k);
void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t k);
void dequantize_row_q8_k(const BlockQ8_K* x, float* y, int64_t k);

}  // namespace tsr::quant
