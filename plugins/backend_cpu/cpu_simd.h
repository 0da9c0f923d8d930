// AVX-512 helpers the CPU kernels share. Each carries its target so that it inlines into
// kernels compiled for AVX-512 (GCC does not inline across differing target attributes);
// callers check the CPU (has_avx512()) before calling them.
#pragma once

#include <immintrin.h>

namespace tsr::cpu {

inline bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return yes;
}

#define TSR_AVX512_TARGET "avx512f,avx512dq,fma"

// e^x in every lane: Cephes' expf polynomial on x - n·ln2, scaled by 2^n with vscalefps,
// which gives 0 far below and +inf far above the float range; a NaN stays NaN. Relative
// error about 1e-7.
__attribute__((target(TSR_AVX512_TARGET), always_inline))
inline __m512 exp_avx512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // this operand order keeps a NaN
  x = _mm512_min_ps(_mm512_set1_ps(104.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// Lanes [0, n) set, for the last, partial vector of a row (n < 16).
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

}  // namespace tsr::cpu
