#include "cpu_tensor.h"

#include <cstring>

#include "cpu_dtype.h"
#include "tessera/sdk/status.hpp"

namespace tsr::cpu {

using sdk::require;

std::string shape_string(const tsr_tensor& t) {
  std::string s = "[";
  for (int d = 0; d < t.ndim && d < TSR_MAX_DIMS; ++d) {
    s += (d ? ", " : "") + std::to_string(t.shape[d]);
  }
  return s + "]";
}

// The checks below run for every operand of every op, so their messages are built only on
// failure (lambdas), never on the way through.
Matrix as_matrix(const tsr_tensor* t, const char* what) {
  const auto name = [what](const char* problem) { return std::string(what) + problem; };
  require(t != nullptr, [&] { return name(" is NULL"); });
  require(t->struct_size >= sizeof(tsr_tensor), [&] { return name(": tensor struct_size too small"); });
  require(t->data != nullptr, [&] { return name(" has no data"); });
  require(t->ndim >= 1 && t->ndim <= TSR_MAX_DIMS, [&] { return name(": bad ndim"); });
  for (int d = 0; d < t->ndim; ++d) require(t->shape[d] > 0, [&] { return name(": empty dimension"); });
  // A C caller may store any int as dtype; loading one outside the enum's range as
  // tsr_dtype is undefined behaviour in C++, so read it as an int and check it first.
  static_assert(sizeof(tsr_dtype) == sizeof(int32_t));
  int32_t dtype_value = 0;
  std::memcpy(&dtype_value, &t->dtype, sizeof(dtype_value));
  const auto unsupported = [&] { return name(": unsupported dtype ") + std::to_string(dtype_value); };
  require(dtype_value >= 0 && dtype_value < TSR_DTYPE_COUNT_, unsupported);
  const auto dtype = static_cast<tsr_dtype>(dtype_value);
  const int64_t elems_per_row_last = t->shape[t->ndim - 1];
  int64_t block = 1;
  require(dtype == TSR_DTYPE_FP8_E4M3 || tsr_dtype_block(dtype, &block, nullptr) != 0, unsupported);
  require(elems_per_row_last % block == 0, [&] { return name(": row length not a multiple of the block size"); });
  const int64_t last_row_bytes = row_bytes(dtype, elems_per_row_last);
  // Inner dims (1..ndim-2) must be packed so a row is contiguous.
  int64_t packed = last_row_bytes;
  for (int d = t->ndim - 2; d >= 1; --d) {
    require(t->strides[d] == packed, [&] { return name(" ") + shape_string(*t) + " is not contiguous"; });
    packed *= t->shape[d];
  }
  Matrix m;
  m.data = static_cast<uint8_t*>(t->data);
  m.dtype = dtype;
  m.rows = t->ndim == 1 ? 1 : t->shape[0];
  m.cols = packed / last_row_bytes * elems_per_row_last;
  m.row_stride = t->ndim == 1 ? packed : t->strides[0];
  m.row_bytes = packed;
  require(m.rows == 1 || m.row_stride >= packed, [&] { return name(": rows overlap"); });
  return m;
}

Matrix as_matrix(const tsr_tensor* t, tsr_dtype dtype, const char* what) {
  Matrix m = as_matrix(t, what);
  require(m.dtype == dtype, [&] {
    return std::string(what) + " must have dtype " + std::to_string(dtype) + ", has " + std::to_string(m.dtype);
  });
  return m;
}

const int32_t* as_i32(const tsr_tensor* t, int64_t n, const char* what, int64_t* length) {
  Matrix m = as_matrix(t, TSR_DTYPE_I32, what);
  const int64_t total = m.rows * m.cols;
  require(m.rows == 1 || m.row_stride == m.cols * 4, [&] { return std::string(what) + " is not contiguous"; });
  require(n < 0 || total == n, [&] {
    return std::string(what) + " has " + std::to_string(total) + " elements, expected " + std::to_string(n);
  });
  if (length) *length = total;
  return reinterpret_cast<const int32_t*>(m.data);
}

void require_same_shape(const Matrix& a, const Matrix& b, const char* what) {
  sdk::require(a.rows == b.rows && a.cols == b.cols, [&] {
    return std::string(what) + ": operand shapes differ (" + std::to_string(a.rows) + "x" + std::to_string(a.cols) +
           " vs " + std::to_string(b.rows) + "x" + std::to_string(b.cols) + ")";
  });
}

}  // namespace tsr::cpu
