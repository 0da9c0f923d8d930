// Weight rows decoded for the prefill GEMM (cpu_matmul.cpp's gemm_decoded), 16 lanes at a
// time on AVX-512: Q4_K and Q6_K rows (what Q4_K_M files are made of) to f32, and f32 to
// bf16 with rounding to nearest even. Each is bit-equal to its scalar reference
// (row_to_f32, the scalar rounding below) on every CPU: the decoders multiply and subtract
// in the reference's order, without fusing.
#pragma once

#include <cstdint>

#include "tessera/abi.h"

namespace tsr::cpu {

// Writes row_to_f32's floats for a Q4_K or Q6_K row of n elements on an AVX-512 CPU and
// returns true; false (nothing written) for other dtypes or CPUs.
bool decode_row_avx512(tsr_dtype dtype, const void* src, float* dst, int64_t n);

// bf16 of each float, rounded to nearest even (finite inputs; NaN is not preserved).
void f32_to_bf16_rne(const float* src, uint16_t* dst, int64_t n);

}  // namespace tsr::cpu
