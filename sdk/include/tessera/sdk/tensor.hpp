// Helpers for backends whose tensors live in host-addressable memory: operand checks that
// turn bad tensors into INVALID_ARGUMENT failures, a row view (outer dimension strided,
// inner dimensions packed, as the ops of backend.h address their operands) and decoding of
// the weight formats (F32, F16, BF16, GGUF Q8_0 and Q4_0) to f32.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "tessera/abi.h"
#include "tessera/sdk/status.hpp"

namespace tsr::sdk {

inline float f16_to_f32(uint16_t h) {
  // Exact, subnormals, infinities and NaN included: scale the 11-bit significand.
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else {
    float f = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24
    std::memcpy(&bits, &f, sizeof(bits));
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

constexpr int64_t kQuantBlock = 32;  // elements per Q8_0 / Q4_0 block

inline bool is_quantized(tsr_dtype dtype) {
  return dtype == TSR_DTYPE_Q8_0 || dtype == TSR_DTYPE_Q4_0;
}

// Elements per block and bytes per block (per element for unquantized types); 0 bytes
// for dtypes without a fixed layout. ABI 2.0 headers define the table (tsr_dtype_block);
// for plugins built against 1.x headers, which lack it, the same layouts are listed here.
inline int64_t dtype_block(tsr_dtype dtype, int64_t* elems) {
  int64_t e = 0, bytes = 0;
#if TSR_ABI_MAJOR >= 2
  tsr_dtype_block(dtype, &e, &bytes);
#else
  const bool q8 = dtype == TSR_DTYPE_Q8_0, q4 = dtype == TSR_DTYPE_Q4_0;
  const bool b4 = dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_I32, b2 = dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16;
  e = q8 || q4 ? 32 : 1;
  bytes = q8 ? 34 : q4 ? 18 : b4 ? 4 : b2 ? 2 : dtype == TSR_DTYPE_I64 ? 8 : dtype == TSR_DTYPE_I8 ? 1 : 0;
#endif
  if (elems != nullptr) *elems = e;
  return bytes;
}

inline int64_t dtype_unit_bytes(tsr_dtype dtype) { return dtype_block(dtype, nullptr); }

// Bytes of n elements of `dtype` (n whole blocks for quantized types).
inline int64_t row_bytes(tsr_dtype dtype, int64_t n, const std::string& what) {
  int64_t elems = 0;
  const int64_t bytes = dtype_block(dtype, &elems);
  require(bytes != 0, what + ": unsupported dtype " + std::to_string(static_cast<int>(dtype)));
  require(n % elems == 0, what + ": row of " + std::to_string(n) + " elements is not a whole number of " +
                              std::to_string(elems) + "-element blocks");
  return n / elems * bytes;
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Decodes n elements of one row to f32. GGUF blocks: an f16 scale d, then 32 int8
// (Q8_0: d * q) or 16 bytes of nibbles (Q4_0: element j low nibble of byte j, element
// j + 16 the high nibble; value d * (nibble - 8)).
inline void decode_row(tsr_dtype dtype, const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case TSR_DTYPE_F32: std::memcpy(&dst[i], p + 4 * i, 4); break;
      case TSR_DTYPE_F16: dst[i] = f16_to_f32(load_u16(p + 2 * i)); break;
      case TSR_DTYPE_BF16: dst[i] = bf16_to_f32(load_u16(p + 2 * i)); break;
      case TSR_DTYPE_Q8_0: {
        const uint8_t* block = p + i / kQuantBlock * 34;
        dst[i] = f16_to_f32(load_u16(block)) * static_cast<int8_t>(block[2 + i % kQuantBlock]);
        break;
      }
      case TSR_DTYPE_Q4_0: {
        const uint8_t* block = p + i / kQuantBlock * 18;
        const int64_t j = i % kQuantBlock;
        const int nibble = j < 16 ? block[2 + j] & 0xf : block[2 + j - 16] >> 4;
        dst[i] = f16_to_f32(load_u16(block)) * static_cast<float>(nibble - 8);
        break;
      }
      default: throw Failure(TSR_STATUS_UNSUPPORTED, "cannot decode dtype " + std::to_string(dtype));
    }
  }
}

// A checked operand seen as rows: dimension 0 strided by strides[0], the other dimensions
// packed into one row of `width` elements (a 1-D tensor is one row).
struct Rows {
  const tsr_tensor* t = nullptr;
  uint8_t* base = nullptr;
  int64_t count = 0, width = 0, stride = 0;

  uint8_t* row(int64_t r) const { return base + r * stride; }
  float* f32(int64_t r) const { return reinterpret_cast<float*>(row(r)); }
  int32_t* i32(int64_t r) const { return reinterpret_cast<int32_t*>(row(r)); }
  tsr_dtype dtype() const { return t->dtype; }
  int64_t dim(int i) const { return t->shape[i]; }
};

// Checks that `t` is a well-formed tensor of `ndim` dimensions and returns its rows.
// `what` names the operand in messages, e.g. "matmul w".
inline Rows rows(const tsr_tensor* t, int ndim, const std::string& what) {
  require(t != nullptr, what + " is NULL");
  require(t->struct_size >= sizeof(tsr_tensor), what + ": tensor struct_size too small");
  require(t->ndim == ndim, what + " must have " + std::to_string(ndim) + " dimensions, has " +
                               std::to_string(t->ndim));
  Rows r{t};
  r.count = ndim == 1 ? 1 : t->shape[0];
  r.width = 1;
  for (int i = ndim == 1 ? 0 : 1; i < ndim; ++i) {
    require(t->shape[i] >= 0, what + ": negative dimension");
    r.width *= t->shape[i];
  }
  require(r.count >= 0, what + ": negative dimension");
  const int64_t packed = row_bytes(t->dtype, r.width, what);
  // Inner strides must describe packed rows (quantized rows are contiguous by definition).
  int64_t expect = dtype_unit_bytes(t->dtype);
  for (int i = ndim - 1; i >= 1 && !is_quantized(t->dtype); --i) {
    require(t->strides[i] == expect, what + ": inner dimensions not contiguous");
    expect *= t->shape[i];
  }
  r.stride = ndim == 1 ? packed : t->strides[0];
  require(r.count <= 1 || r.stride >= packed, what + ": rows overlap");
  require(t->data != nullptr || r.count * r.width == 0, what + ": data is NULL");
  r.base = static_cast<uint8_t*>(t->data);
  return r;
}

// As rows(), and the tensor must have `dtype`.
inline Rows rows(const tsr_tensor* t, int ndim, tsr_dtype dtype, const std::string& what) {
  require(t != nullptr, what + " is NULL");
  require(t->dtype == dtype, what + " must have dtype " + std::to_string(dtype) + ", has " +
                                 std::to_string(t->dtype));
  return rows(t, ndim, what);
}

}  // namespace tsr::sdk
