#include "core/plugin_host/tensor.h"

#include "base/error.h"

namespace tsr {

const char* dtype_name(tsr_dtype dtype) {
  const char* name = tsr_dtype_name(dtype);
  return name != nullptr ? name : "unknown";
}

int64_t dtype_block_elems(tsr_dtype dtype) {
  int64_t elems = 0;
  return tsr_dtype_block(dtype, &elems, nullptr) ? elems : 1;
}

int64_t dtype_block_bytes(tsr_dtype dtype) {
  int64_t bytes = 0;
  if (!tsr_dtype_block(dtype, nullptr, &bytes)) {
    throw Error("dtype " + std::to_string(static_cast<int>(dtype)) + " (" + dtype_name(dtype) + ") has no fixed layout");
  }
  return bytes;
}

int64_t dtype_row_bytes(tsr_dtype dtype, int64_t n) {
  const int64_t bytes = tsr_dtype_row_bytes(dtype, n);
  if (bytes < 0) {
    dtype_block_bytes(dtype);  // names a dtype without a fixed layout
    throw Error(std::string("row of ") + std::to_string(n) + " elements is not a multiple of " +
                dtype_name(dtype) + "'s block of " + std::to_string(dtype_block_elems(dtype)));
  }
  return bytes;
}

tsr_tensor tensor_make(tsr_dtype dtype, void* data, std::initializer_list<int64_t> shape) {
  tsr_tensor t{};
  t.struct_size = sizeof(tsr_tensor);
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  t.data = data;
  int i = 0;
  for (int64_t d : shape) t.shape[i++] = d;
  int64_t stride = dtype_row_bytes(dtype, t.shape[t.ndim - 1]);
  // Nominal for rows of blocks or with a scale (abi.h: their rows are contiguous).
  t.strides[t.ndim - 1] = dtype == TSR_DTYPE_FP8_E4M3 ? 1 : dtype_block_bytes(dtype) / dtype_block_elems(dtype);
  for (int d = t.ndim - 2; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

int64_t tensor_rows(const tsr_tensor& t) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < t.ndim; ++d) rows *= t.shape[d];
  return rows;
}

}  // namespace tsr
