// The KV cache's element formats on the CPU: the dtypes kv_write stores and attention reads
// (f32, f16, bf16, GGUF's q8_0 and q4_0 blocks of 32 along the head dimension, and fp8_e4m3
// rows of an f32 scale and a byte per element, abi.h), one head row's write, and its read 16
// elements at a time in AVX-512 registers. Attention never converts the cache as a whole:
// each key it reads is dequantized where it is used.
//
// A row read here equals row_to_f32's (cpu_dtype.h) bit for bit, whichever kernel reads
// it: f16 and bf16 widen exactly, and a q8_0 / q4_0 / fp8 element is one float product of
// its block's (row's) scale and its exactly decoded value, in both forms.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_dtype.h"
#include "cpu_simd.h"

namespace tsr::cpu {

// Whether kv_write and attention take caches of `dtype`.
bool is_kv_dtype(tsr_dtype dtype);

// Stores the n floats of `src` as one row of `dtype` at `dst` (quantizing as GGUF's
// reference quantizers do for q8_0 and q4_0, and fp8 with the scale max|x| / 448; round to
// nearest even for f16, bf16 and fp8).
void kv_row_write(tsr_dtype dtype, const float* src, uint8_t* dst, int64_t n);

// Elements d0 .. d0 + 15 of a row of `dtype` at `row` that holds n elements (d0 a multiple
// of 16); lanes at or past n are zero. The q8_0 and q4_0 rows hold whole blocks of 32, so
// their chunks are always whole.
__attribute__((target(TSR_AVX512_TARGET), always_inline))
inline __m512 kv_load16(tsr_dtype dtype, const uint8_t* row, int64_t d0, int64_t n) {
  const __mmask16 m = first_lanes(n - d0);
  switch (dtype) {
    case TSR_DTYPE_F16:
    case TSR_DTYPE_BF16: {
      alignas(32) uint16_t h[16] = {};
      const auto* src = reinterpret_cast<const uint16_t*>(row) + d0;
      if (m == 0xffff) std::memcpy(h, src, sizeof(h));
      else std::memcpy(h, src, size_t(n - d0) * sizeof(uint16_t));
      const __m256i bits = _mm256_load_si256(reinterpret_cast<const __m256i*>(h));
      if (dtype == TSR_DTYPE_F16) return _mm512_cvtph_ps(bits);
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
    }
    case TSR_DTYPE_Q8_0: {
      const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[d0 / kQBlock];
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + d0 % kQBlock));
      return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(f16_to_f32(b.d)));
    }
    case TSR_DTYPE_Q4_0: {
      const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[d0 / kQBlock];
      __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
      q = d0 % kQBlock == 0 ? _mm512_and_si512(q, _mm512_set1_epi32(0x0f)) : _mm512_srli_epi32(q, 4);
      q = _mm512_sub_epi32(q, _mm512_set1_epi32(8));
      return _mm512_mul_ps(_mm512_set1_ps(f16_to_f32(b.d)), _mm512_cvtepi32_ps(q));
    }
    case TSR_DTYPE_FP8_E4M3: {
      // The row's scale, then its E4M3 bytes. Each byte becomes the f16 of the same bits
      // shifted into place (exponent field 15 - 7 = 8 lower, subnormals included), so the
      // value is that f16 times 2^8, folded into the scale: exact, as the scalar table.
      alignas(16) uint8_t b[16] = {};
      if (m == 0xffff) std::memcpy(b, row + 4 + d0, sizeof(b));
      else std::memcpy(b, row + 4 + d0, size_t(n - d0));
      const __m512i x = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(b)));
      const __m512i h = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x80)), 8),
                                        _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x7f)), 7));
      float s;
      std::memcpy(&s, row, sizeof s);
      return _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)), _mm512_set1_ps(s * 256.0f));
    }
    default:
      return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + d0);
  }
}

// A head row as floats: the row itself for f32, else its dequantized copy in `buf` (n floats).
inline const float* kv_row_floats(tsr_dtype dtype, const uint8_t* row, float* buf, int64_t n) {
  if (dtype == TSR_DTYPE_F32) return reinterpret_cast<const float*>(row);
  row_to_f32(dtype, row, buf, n);
  return buf;
}

}  // namespace tsr::cpu
