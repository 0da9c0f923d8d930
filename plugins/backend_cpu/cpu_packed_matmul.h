// Matmul weights in the CPU backend's own layout (ABI 1.3 weight_pack): rows interleaved
// sixteen at a time. For Q8_0, Q4_0 and MXFP4 one VNNI instruction multiplies four weights
// of each of sixteen rows by the same four activations, and one conversion yields the
// sixteen rows' block scales (Q4_K and Q6_K: cpu_packed_kquant.h); for F16 one conversion gives a column of sixteen rows to
// multiply by one activation. Each output vector is sixteen adjacent output columns: no
// horizontal sums. Without VNNI, Q8_0 and Q4_0 keep the layout on AVX2 (vpmaddubsw, eight
// rows per vector).
#pragma once

#include <cstdint>

#include "cpu_ops.h"
#include "cpu_tensor.h"

namespace tsr::cpu {

// Whether weights of this dtype have a packed form on this CPU: Q8_0, Q4_0, Q4_K and Q6_K
// with AVX2, F16 and MXFP4 with AVX-512 VNNI.
bool packs(tsr_dtype dtype);
// Bytes of w's packed form; 0 when w has none (packs() says no, or rows not a multiple of
// 16), and the weight stays as stored.
uint64_t packed_size(const Matrix& w);
// Writes w's packed form into dst (packed_size(w) bytes, 64-byte aligned).
void pack_weight(OpContext& ctx, const Matrix& w, uint8_t* dst);

// A TSR_DTYPE_PACKED tensor's weight, checked against its header.
struct PackedWeight {
  tsr_dtype dtype = TSR_DTYPE_Q8_0;  // the format it was packed from
  int64_t rows = 0, cols = 0;
  const uint8_t* groups = nullptr;  // rows / 16 groups of cols / 32 blocks
};
// t may be [rows, cols] or (matmul_id's experts, ABI 2.5) [n_expert, rows, cols]; the
// result spans every row.
PackedWeight as_packed(const tsr_tensor* t, const char* what);
// Rows first .. first + rows - 1 of w (first and rows multiples of 16): one expert's matrix.
PackedWeight packed_rows(const PackedWeight& w, int64_t first, int64_t rows);

// out[n, rows] = x[n, cols] · wᵀ (the caller has checked these shapes); for Q8_0, Q4_0
// and MXFP4 weights x is quantized to Q8_0 blocks as llama.cpp does (K-quants: Q8_K).
void packed_matmul(OpContext& ctx, const Matrix& out, const Matrix& x, const PackedWeight& w);

}  // namespace tsr::cpu
