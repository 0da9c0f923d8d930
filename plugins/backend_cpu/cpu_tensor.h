// Validated views of the ABI's tensor descriptors for the CPU kernels.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/abi.h"

namespace tsr::cpu {

// A tensor seen as rows x cols: dims 1.. are contiguous, dim 0 has a row stride in bytes.
struct Matrix {
  uint8_t* data = nullptr;
  tsr_dtype dtype = TSR_DTYPE_F32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  // bytes
  int64_t row_bytes = 0;   // bytes of a row's own data (FP8_E4M3: a scale per innermost row)

  template <class T>
  T* row(int64_t r) const {
    return reinterpret_cast<T*>(data + r * row_stride);
  }
};

// Throws sdk::Failure naming `what` when t is NULL, malformed or not contiguous within rows.
Matrix as_matrix(const tsr_tensor* t, const char* what);
// As as_matrix, and requires the dtype.
Matrix as_matrix(const tsr_tensor* t, tsr_dtype dtype, const char* what);
// A contiguous i32 vector of exactly `n` elements (n < 0: any length).
const int32_t* as_i32(const tsr_tensor* t, int64_t n, const char* what, int64_t* length = nullptr);

std::string shape_string(const tsr_tensor& t);

// Throws sdk::Failure naming `what` unless a and b have the same rows and columns.
void require_same_shape(const Matrix& a, const Matrix& b, const char* what);

}  // namespace tsr::cpu
