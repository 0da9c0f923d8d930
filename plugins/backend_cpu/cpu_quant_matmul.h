// Matmul against Q8_0 / Q4_0 / Q5_0 / IQ4_NL / MXFP4 (and Q4_1 / Q5_1) weights with int8 arithmetic: the activations are quantized
// to Q8_0-style blocks (32 int8 and a scale, as llama.cpp does) and each weight block is
// read once per step for every row of x. AVX-512 VNNI where the CPU has it (chosen at run
// time), a portable integer path elsewhere; both give the same result up to float
// summation order.
#pragma once

#include "cpu_tensor.h"

namespace tsr::cpu {

struct OpContext;

bool quant_matmul_supported(tsr_dtype w);
void quant_matmul(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix& w);

// F16 weights: converted with F16C in registers, multiplied in f32 (exact products).
void f16_matmul(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix& w);

}  // namespace tsr::cpu
