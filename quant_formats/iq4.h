// GGUF's IQ4_NL and IQ4_XS: 4-bit indices into a fixed non-linear table of 16 levels
// (kvalues_iq4nl, denser near zero, where weights cluster), with an f16 scale per block of
// 32 (IQ4_NL) or 6-bit scales per 32 under an f16 super-scale per 256 (IQ4_XS). Layouts
// as ggml-common.h's; the quantizers search the scale as ggml's quantize_iq4_nl /
// quantize_iq4_xs do without an importance matrix (what llama-quantize runs), operation for
// operation, so the bytes are llama.cpp's. Inputs are finite (see kquants.h).
#pragma once

#include <cstdint>

namespace tsr::quant {

inline constexpr int64_t kBlockIQ4_NL = 32;
inline constexpr int8_t kIQ4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

struct BlockIQ4_NL {
  uint16_t d;       // f16 scale
  uint8_t qs[16];   // element j in the low nibble of qs[j], j + 16 in the high one
};
static_assert(sizeof(BlockIQ4_NL) == 18, "GGUF IQ4_NL block layout");

struct BlockIQ4_XS {
  uint16_t d;            // f16 super-scale
  uint16_t scales_h;     // high 2 bits of the eight 6-bit scales (biased by 32)
  uint8_t scales_l[4];   // their low 4 bits, two per byte
  uint8_t qs[128];       // sub-block b's 32 indices in qs[16b ...], as IQ4_NL's
};
static_assert(sizeof(BlockIQ4_XS) == 136, "GGUF IQ4_XS block layout");

// The signed scale (-32..31) of sub-block ib (0..7) of an IQ4_XS block.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int ib) {
  return (((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b.scales_h >> 2 * ib) & 3) << 4)) - 32;
}

// `k` is the element count: a multiple of 32 (IQ4_NL) or 256 (IQ4_XS).
void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t k);
void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t k);
// Under an importance matrix (llama-quantize --imatrix): one row of n_per_row elements, `qw`
// its n_per_row importances; the scale search weighs errors by qw·sqrt(σ² + x²).
void quantize_row_iq4_nl_imatrix(const float* x, BlockIQ4_NL* y, int64_t n_per_row, const float* qw);
void quantize_row_iq4_xs_imatrix(const float* x, BlockIQ4_XS* y, int64_t n_per_row, const float* qw);
void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t k);
void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t k);

}  // namespace tsr::quant
