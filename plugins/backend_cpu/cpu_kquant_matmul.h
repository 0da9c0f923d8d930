// Matmul against K-quant (Q2_K ... Q6_K) and IQ4_XS weights as llama.cpp computes it: each
// row of x quantized to Q8_K (one f32 scale per 256 values, ggml's reference quantizer, so
// the activations round as llama.cpp's do) and integer dot products per sub-block of 16,
// scaled by the weights' sub-block scales. AVX-512 VNNI or AVX2 where the CPU has them, a
// portable integer path elsewhere; all sum the same integers.
#pragma once

#include "cpu_tensor.h"

namespace tsr::cpu {

struct OpContext;

bool kquant_matmul_supported(tsr_dtype w);
void kquant_matmul(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix& w);

}  // namespace tsr::cpu
