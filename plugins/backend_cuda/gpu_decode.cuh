// Device-side decoding of the weight formats (F32, F16, BF16, GGUF Q8_0 and Q4_0) to f32,
// exact as tsr::sdk::decode_row. Quantized blocks are 2-byte aligned at best (34 and 18
// bytes), so they are read in 16-bit units.
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
