// Device-side decoding of the weight formats (F32, F16, BF16, GGUF Q8_0, Q4_0, Q4_K, Q6_K
// and MXFP4) to f32, exact as ggml's dequantizers (and tsr::sdk::decode_row), and of
// FP8_E4M3 KV cache rows (abi.h: an f32 scale per head) as the CPU backend decodes them.
// Quantized blocks are 2-byte aligned at best (34, 18, 144 and 210 bytes; MXFP4's 17 are
// read bytewise), so they are read in 16-bit units.
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
constexpr int kQK_K = 256;         // elements per K-quant super-block
constexpr int kQ4KBytes = 144;     // f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 of nibbles
constexpr int kQ6KBytes = 210;     // 128 bytes of low nibbles, 64 of high 2 bits, 16 int8 scales, f16 d
constexpr int kMxfp4Bytes = 17;    // E8M0 exponent + 16 bytes of E2M1 nibbles

__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// Q4_K's 6-bit scale and min of sub-block `is` (0..7), as ggml's get_scale_min_k4.
__device__ __forceinline__ void q4k_scale_min(const uint8_t* s, int is, int* scale, int* min) {
  if (is < 4) {
    *scale = s[is] & 63;
    *min = s[is + 4] & 63;
  } else {
    *scale = (s[is + 4] & 0xf) | ((s[is - 4] >> 6) << 4);
    *min = (s[is + 4] >> 4) | ((s[is] >> 6) << 4);
  }
}

// Element e (0..255) of a Q4_K super-block: d·scale·q − dmin·min of its sub-block of 32;
// each 64 elements take 32 bytes, low nibbles first.
__device__ __forceinline__ float decode_q4_k(const uint8_t* b, int e) {
  int scale, min;
  q4k_scale_min(b + 4, e / 32, &scale, &min);
  const uint8_t byte = b[16 + (e / 64) * 32 + e % 32];
  const int q = e % 64 < 32 ? byte & 0xf : byte >> 4;
  return f16_bits_to_f32(load_u16(b)) * float(scale) * float(q) - f16_bits_to_f32(load_u16(b + 2)) * float(min);
}

// Element e of a Q6_K super-block: two halves of 128, each four quarters of 32 whose 4 low
// bits are in 64 bytes of ql and 2 high bits in 32 bytes of qh; a scale per 16.
__device__ __forceinline__ float decode_q6_k(const uint8_t* b, int e) {
  const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
  const uint8_t* ql = b + 64 * half;
  const uint8_t qh = b[128 + 32 * half + l];
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192 + 8 * half);
  const uint8_t low = quarter % 2 == 0 ? ql[l] : ql[l + 32];
  const int q = (quarter < 2 ? low & 0xf : low >> 4) | (((qh >> (2 * quarter)) & 3) << 4);
  return f16_bits_to_f32(load_u16(b + 208)) * float(scales[l / 16 + 2 * quarter]) * float(q - 32);
}

// Element i (0..31) of an MXFP4 block: an E2M1 level (kept doubled, 0..12) under half the
// E8M0 power of two, as ggml's kvalues_mxfp4 and GGML_E8M0_TO_FP32_HALF.
__device__ __forceinline__ float decode_mxfp4(const uint8_t* b, int i) {
  const int nibble = i < 16 ? b[1 + i] & 0xf : b[1 + i - 16] >> 4;
  const int m = nibble & 7;
  const int level = m < 4 ? m : (2 + (m & 1)) << ((m >> 1) - 1);  // 0 1 2 3 4 6 8 12
  const uint32_t e = b[0];
  const float half_scale = __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
  return float(nibble & 8 ? -level : level) * half_scale;
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
  } else if constexpr (D == TSR_DTYPE_Q4_K) {
    return decode_q4_k(row + j / kQK_K * kQ4KBytes, static_cast<int>(j % kQK_K));
  } else if constexpr (D == TSR_DTYPE_Q6_K) {
    return decode_q6_k(row + j / kQK_K * kQ6KBytes, static_cast<int>(j % kQK_K));
  } else if constexpr (D == TSR_DTYPE_MXFP4) {
    return decode_mxfp4(row + j / kQK * kMxfp4Bytes, static_cast<int>(j % kQK));
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
    case TSR_DTYPE_Q4_K: return decode<TSR_DTYPE_Q4_K>(row, j);
    case TSR_DTYPE_Q6_K: return decode<TSR_DTYPE_Q6_K>(row, j);
    case TSR_DTYPE_MXFP4: return decode<TSR_DTYPE_MXFP4>(row, j);
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
    case TSR_DTYPE_Q4_K: f(DtypeTag<TSR_DTYPE_Q4_K>{}); break;
    case TSR_DTYPE_Q6_K: f(DtypeTag<TSR_DTYPE_Q6_K>{}); break;
    case TSR_DTYPE_MXFP4: f(DtypeTag<TSR_DTYPE_MXFP4>{}); break;
    default: break;  // the caller checked the dtype
  }
}

}  // namespace tsr::gpu
