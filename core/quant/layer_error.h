// What quantizing one weight matrix costs on calibration inputs: the squared error of its
// outputs summed over the tokens, sum_t |(W - Q) x_t|^2 = sum_r d_r H d_r^T with d_r a row of
// W - Q and H = sum_t x_t x_t^T (what calibration accumulates). GPTQ minimizes it column by
// column; AWQ's scale search compares candidates by it.
#pragma once

#include <cstdint>
#include <span>

namespace tsr::quant {

// `w` and `q` are [rows, cols] row-major, `hessian` [cols, cols].
double layer_output_error(std::span<const float> w, std::span<const float> q, int64_t rows, int64_t cols,
                          std::span<const float> hessian);

// C[m, n] = alpha * op(A) * op(B) + beta * C, row-major (oneDNN's sgemm; 'N' or 'T').
void sgemm(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace tsr::quant
