#include "core/plugin_host/tensor.h"

#include "core/error.h"

namespace tsr {

const char* dtype_name(tsr_dtype dtype) {
  switch (dtype) {
    case TSR_DTYPE_F32: return "f32";
    case TSR_DTYPE_F16: return "f16";
    case TSR_DTYPE_BF16: return "bf16";
    case TSR_DTYPE_I32: return "i32";
    case TSR_DTYPE_I64: return "i64";
    case TSR_DTYPE_I8: return "i8";
    case TSR_DTYPE_Q8_0: return "q8_0";
    case TSR_DTYPE_Q4_0: return "q4_0";
    case TSR_DTYPE_INT4_G128: return "int4_g128";
    case TSR_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case TSR_DTYPE_PLUGIN: return "plugin";
    default: return "unknown";
  }
}

int64_t dtype_block_elems(tsr_dtype dtype) {
  return dtype == TSR_DTYPE_Q8_0 || dtype == TSR_DTYPE_Q4_0 ? 32 : 1;
}

int64_t dtype_block_bytes(tsr_dtype dtype) {
  switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_I32: return 4;
    case TSR_DTYPE_F16: case TSR_DTYPE_BF16: return 2;
    case TSR_DTYPE_I64: return 8;
    case TSR_DTYPE_I8: return 1;
    case TSR_DTYPE_Q8_0: return 34;
    case TSR_DTYPE_Q4_0: return 18;
    default: throw Error("unknown dtype " + std::to_string(static_cast<int>(dtype)));
  }
}

int64_t dtype_row_bytes(tsr_dtype dtype, int64_t n) {
  const int64_t block = dtype_block_elems(dtype);
  if (n % block != 0) {
    throw Error(std::string("row of ") + std::to_string(n) + " elements is not a multiple of " +
                dtype_name(dtype) + "'s block of " + std::to_string(block));
  }
  return n / block * dtype_block_bytes(dtype);
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
  t.strides[t.ndim - 1] = dtype_block_bytes(dtype) / dtype_block_elems(dtype);
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
