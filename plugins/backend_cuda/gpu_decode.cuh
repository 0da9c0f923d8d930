// Device-side decoding of the weight formats (F32, F16, BF16, GGUF Q8_0 and Q4_0) to f32,
// exact as tsr::sdk::decode_row, and of FP8_E4M3 KV cache rows (abi.h: an f32 scale per
// head) as the CPU backend decodes them. Quantized blocks are 2-byte aligned at best (34
// and 18 bytes), so they are read in 16-bit units.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gpu_device.cuh"
#include "gpu_runtime.h"
#include "tessera/abi.h"

namespace tsr::gpu {

constexpr int kQK = 32;            // elements per quantized block
constexpr int kQ8Bytes = 34;       // f16 scale + 32 int8
constexpr int kQ4Bytes = 18;       // f16 scale + 16 bytes of nibbles

__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// Element j of a row of dtype D.
template <int D>
__device__ __forceinline__ float decode(const uint8_t* row, int64_t j) {
  if constexpr (D == TSR_DTYPE_F32) {
    return reinterpret_cast<const float*>(row)[j];
  } else if constexpr (D == TSR_DTYPE_F16) {
    return f16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[j]);
  } else if constexpr (D == TSR_DTYPE_BF16) {
    return bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[j]);
  } else if constexpr (D == TSR_DTYPE_Q8_0) {
    const uint8_t* block = row + j / kQK * kQ8Bytes;
    return f16_bits_to_f32(load_u16(block)) * static_cast<float>(static_cast<int8_t>(block[2 + j % kQK]));
  } else {
    // Q4_0: element i < 16 in the low nibble of byte i, element i + 16 in its high nibble.
    const uint8_t* block = row + j / kQK * kQ4Bytes;
    const int i = static_cast<int>(j % kQK);
    const int nibble = i < 16 ? block[2 + i] & 0xf : block[2 + i - 16] >> 4;
    return f16_bits_to_f32(load_u16(block)) * static_cast<float>(nibble - 8);
  }
}

// Element j of a row of a runtime dtype (uniform across a block: the branch costs little
// beside the load).
__device__ __forceinline__ float decode_any(int dtype, const uint8_t* row, int64_t j) {
  switch (dtype) {
    case TSR_DTYPE_F16: return decode<TSR_DTYPE_F16>(row, j);
    case TSR_DTYPE_BF16: return decode<TSR_DTYPE_BF16>(row, j);
    case TSR_DTYPE_Q8_0: return decode<TSR_DTYPE_Q8_0>(row, j);
    case TSR_DTYPE_Q4_0: return decode<TSR_DTYPE_Q4_0>(row, j);
    default: return decode<TSR_DTYPE_F32>(row, j);
  }
}

constexpr int kFp8ScaleBytes = 4;  // the f32 scale that starts an FP8_E4M3 row
constexpr float kFp8Max = 448.0f;   // E4M3's largest finite value

// An E4M3 byte (OCP "fn": bias 7, 0x7f / 0xff NaN) as f32, exact.
__device__ __forceinline__ float e4m3_to_f32(uint8_t b) {
  const int exp = (b >> 3) & 0x0f, m = b & 0x07;
  if (exp == 0x0f && m == 0x07) return NAN;
  const float a = exp == 0 ? float(m) * 0x1p-9f : ldexpf(1.0f + float(m) / 8.0f, exp - 7);
  return (b & 0x80) ? -a : a;
}

// f32 to E4M3, rounding to nearest even and saturating at ±448, as the CPU's f32_to_e4m3.
__device__ __forceinline__ uint8_t f32_to_e4m3(float v) {
  if (isnan(v)) return 0x7f;
  const int sign = signbit(v) ? 0x80 : 0;
  const float a = fminf(fabsf(v), kFp8Max);
  if (a < 0x1p-6f) return static_cast<uint8_t>(sign | int(rintf(a / 0x1p-9f)));  // subnormal
  int e = 0;
  const float frac = frexpf(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  int m = int(rintf((frac * 2.0f - 1.0f) * 8.0f));
  int exp = e - 1 + 7;
  if (m == 8) m = 0, ++exp;
  return static_cast<uint8_t>(sign | (exp << 3) | m);
}

// Element d of head `head` (of hd elements) of one token's KV cache row of `dtype`: an
// FP8_E4M3 cache holds a scaled row per head, the others one row of all heads.
__device__ __forceinline__ float decode_kv(int dtype, const uint8_t* row, int head, int d, int hd) {
  if (dtype == TSR_DTYPE_FP8_E4M3) {
    const uint8_t* h = row + int64_t(head) * (kFp8ScaleBytes + hd);
    return e4m3_to_f32(h[kFp8ScaleBytes + d]) * *reinterpret_cast<const float*>(h);
  }
  return decode_any(dtype, row, int64_t(head) * hd + d);
}

template <int D>
using DtypeTag = std::integral_constant<int, D>;

// Calls f(DtypeTag<dtype>{}): the runtime dtype as a compile-time constant.
template <class F>
void dispatch_dtype(tsr_dtype dtype, F&& f) {
  switch (dtype) {
    case TSR_DTYPE_F32: f(DtypeTag<TSR_DTYPE_F32>{}); break;
    case TSR_DTYPE_F16: f(DtypeTag<TSR_DTYPE_F16>{}); break;
    case TSR_DTYPE_BF16: f(DtypeTag<TSR_DTYPE_BF16>{}); break;
    case TSR_DTYPE_Q8_0: f(DtypeTag<TSR_DTYPE_Q8_0>{}); break;
    case TSR_DTYPE_Q4_0: f(DtypeTag<TSR_DTYPE_Q4_0>{}); break;
    default: break;  // the caller checked the dtype
  }
}

}  // namespace tsr::gpu
