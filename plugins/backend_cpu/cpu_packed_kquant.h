// Q4_K and Q6_K weights in the CPU backend's packed layout (cpu_packed_matmul.h: rows
// interleaved sixteen at a time), for AVX-512 VNNI and, eight rows per vector, AVX2. Each super-block of 256 columns of a
// group of sixteen rows keeps the rows' scales unpacked to bytes, sub-block by sub-block,
// and their quants as vectors whose bytes 4r..4r+3 are row r's: one vpdpbusd multiplies
// four weights of each of sixteen rows by four activations, and one widening load gives
// the sixteen rows' scales of a sub-block. Activations are Q8_K, as llama.cpp's: the
// integer sums are the in-place kernels' (cpu_kquant_matmul.cpp), so packing changes
// float summation order only, and every batch size sums a row in the same order.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu_ops.h"
#include "cpu_tensor.h"

namespace tsr::cpu {

// Whether dtype is one of these (Q4_K, Q6_K); the caller checks the CPU (AVX2).
bool is_packed_kquant(tsr_dtype dtype);
// Bytes of one group of sixteen rows of `cols` columns (a multiple of 256).
int64_t kquant_group_bytes(tsr_dtype dtype, int64_t cols);
// Writes rows 16g .. 16g + 15 of w in the packed layout at dst.
void pack_kquant_group(const Matrix& w, int64_t g, uint8_t* dst);

// x's rows as Q8_K, with what each super-block's dot products start from (see the .cpp).
struct KquantX {
  int64_t cols = 0, blocks = 0;
  std::vector<int8_t> q;      // [rows][cols]
  std::vector<float> d;       // [rows][blocks]
  std::vector<int32_t> sums;  // [rows][blocks][kSums]: Q4_K pair sums, Q6_K start values
};
void quantize_kquant_x(const OpContext& ctx, tsr_dtype dtype, const Matrix& x, KquantX& out);

// out[r0 .. r0 + nr)[col0 .. col0 + 15] for nr (1..16) rows of x against one group.
void kquant_group_pass(tsr_dtype dtype, const uint8_t* group, const KquantX& x, int64_t r0, int nr,
                       const Matrix& out, int64_t col0);

}  // namespace tsr::cpu
