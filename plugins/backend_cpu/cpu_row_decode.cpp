#include "cpu_row_decode.h"

#include <immintrin.h>

#include <cstring>

#include "cpu_simd.h"
#include "quant_formats/kquants.h"

namespace tsr::cpu {

namespace {

uint16_t bf16_rne(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// 16 nibbles or 6-bit codes as floats: y = d · q − m, multiplied then subtracted.
__attribute__((target(TSR_AVX512_TARGET), always_inline))
inline void store_affine(const __m512i q, float d, float m, float* y) {
  const __m512 v = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(q)), _mm512_set1_ps(m));
  _mm512_storeu_ps(y, v);
}

__attribute__((target(TSR_AVX512_TARGET)))
void q4_k_row(const quant::BlockQ4_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / quant::kQK_K; ++i) {
    const float d = f16_to_f32(x[i].d), min = f16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
      uint8_t sc, m;
      quant::kquant_scale_min(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      quant::kquant_scale_min(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int h = 0; h < 32; h += 16) {
        const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + h)));
        store_affine(_mm512_and_si512(b, _mm512_set1_epi32(0xF)), d1, m1, y + h);
        store_affine(_mm512_srli_epi32(b, 4), d2, m2, y + 32 + h);
      }
    }
  }
}

// Q6_K's signed codes: the low 4 bits, the 2 bits of `high` at `shift`, less the bias of 32.
__attribute__((target(TSR_AVX512_TARGET), always_inline))
inline __m512i q6_k_codes(__m512i low, __m512i high, int shift) {
  const __m512i top = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(high, unsigned(shift)), _mm512_set1_epi32(3)), 4);
  return _mm512_sub_epi32(_mm512_or_si512(low, top), _mm512_set1_epi32(32));
}

__attribute__((target(TSR_AVX512_TARGET)))
void q6_k_row(const quant::BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / quant::kQK_K; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int c = 0; c < quant::kQK_K; c += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; l += 16) {
        const int is = l / 16;
        const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + l)));
        const __m512i lo2 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + l + 32)));
        const __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + l)));
        const __m512i nib = _mm512_set1_epi32(0xF);
        // (d · sc) · q, as the reference's d * sc[is] * q.
        store_affine(q6_k_codes(_mm512_and_si512(lo, nib), hi, 0), d * sc[is], 0.0f, y + l);
        store_affine(q6_k_codes(_mm512_and_si512(lo2, nib), hi, 2), d * sc[is + 2], 0.0f, y + l + 32);
        store_affine(q6_k_codes(_mm512_srli_epi32(lo, 4), hi, 4), d * sc[is + 4], 0.0f, y + l + 64);
        store_affine(q6_k_codes(_mm512_srli_epi32(lo2, 4), hi, 6), d * sc[is + 6], 0.0f, y + l + 96);
      }
    }
  }
}

__attribute__((target(TSR_AVX512_TARGET)))
void bf16_avx512(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m512i round = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  for (; i + 16 <= n; i += 16) {
    const __m512i b = _mm512_castps_si512(_mm512_loadu_ps(src + i));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), one);
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(b, round), lsb), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
  for (; i < n; ++i) dst[i] = bf16_rne(src[i]);
}

}  // namespace

bool decode_row_avx512(tsr_dtype dtype, const void* src, float* dst, int64_t n) {
  if (!has_avx512()) return false;
  if (dtype == TSR_DTYPE_Q4_K) {
    q4_k_row(static_cast<const quant::BlockQ4_K*>(src), dst, n);
    return true;
  }
  if (dtype == TSR_DTYPE_Q6_K) {
    q6_k_row(static_cast<const quant::BlockQ6_K*>(src), dst, n);
    return true;
  }
  return false;
}

void f32_to_bf16_rne(const float* src, uint16_t* dst, int64_t n) {
  if (has_avx512()) return bf16_avx512(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_rne(src[i]);
}

}  // namespace tsr::cpu
