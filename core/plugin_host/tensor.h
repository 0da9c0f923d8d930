// Helpers for the ABI's tensor descriptor: dtype geometry and contiguous tensors.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "tessera/abi.h"

namespace tsr {

const char* dtype_name(tsr_dtype dtype);
// Types whose block geometry abi.h fixes (GGUF's, not a quant plugin's format).
inline bool dtype_is_gguf(tsr_dtype dtype) { return tsr_dtype_block(dtype, nullptr, nullptr) != 0; }
// Elements per block (1 for plain types) and bytes per block.
int64_t dtype_block_elems(tsr_dtype dtype);
int64_t dtype_block_bytes(tsr_dtype dtype);
// Bytes of a row of `n` elements; n must be a multiple of the block size.
int64_t dtype_row_bytes(tsr_dtype dtype, int64_t n);

// A contiguous row-major tensor at `data` (outermost dimension first).
tsr_tensor tensor_make(tsr_dtype dtype, void* data, std::initializer_list<int64_t> shape);

// Number of rows (product of all but the last dimension).
int64_t tensor_rows(const tsr_tensor& t);

}  // namespace tsr
