// OCP MXFP4 as GGUF stores it (gpt-oss's experts): blocks of 32 E2M1 values under one
// E8M0 shared exponent. Layout as ggml-common.h's block_mxfp4; the levels are kept doubled
// as int8 (ggml's kvalues_mxfp4), so the exponent decodes to half its power of two
// (ggml_e8m0_to_fp32_half) and a block is an integer dot product away from Q8_0
// activations. The quantizer is ggml's quantize_row_mxfp4_ref, operation for operation.
#pragma once

#include <cstdint>

namespace tsr::quant {

inline constexpr int64_t kBlockMXFP4 = 32;
inline constexpr int8_t kMXFP4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

struct BlockMXFP4 {
  uint8_t e;       // E8M0 exponent: the block's scale is 2^(e - 127), applied to the halved levels
  uint8_t qs[16];  // element j in the low nibble of qs[j], j + 16 in the high one
};
static_assert(sizeof(BlockMXFP4) == 17, "GGUF MXFP4 block layout");

// 2^(e - 128): the scale of the doubled levels (e = 0 and 1 are denormals).
inline float e8m0_to_f32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

// `k` is a multiple of 32; inputs are finite.
void quantize_row_mxfp4(const float* x, BlockMXFP4* y, int64_t k);
void dequantize_row_mxfp4(const BlockMXFP4* x, float* y, int64_t k);

}  // namespace tsr::quant
