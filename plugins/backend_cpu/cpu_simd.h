// What the CPU kernels share: AVX-512 helpers, each carrying its target so that it inlines
// into kernels compiled for AVX-512 (GCC does not inline across differing target
// attributes; callers check the CPU with has_avx512() first), and the dispatch of a row
// count to kernels that take it as a template parameter.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "quant_formats/float_convert.h"
#include "tessera/sdk/cpu_isa.hpp"

namespace tsr::cpu {

// The kernel paths this CPU may take (TESSERA_CPU_MAX_ISA caps them: sdk/cpu_isa.hpp).
inline bool has_avx2() { return sdk::cpu_isa_at_least(sdk::CpuIsa::avx2); }  // with FMA, F16C
inline bool has_avx512() { return sdk::cpu_isa_at_least(sdk::CpuIsa::avx512); }
inline bool has_vnni() { return sdk::cpu_isa_at_least(sdk::CpuIsa::avx512_vnni); }

#define TSR_AVX2_TARGET "avx2,f16c,fma"
#define TSR_AVX512_TARGET "avx512f,avx512dq,fma"
// The int8 kernels' target; helpers they call carry it too (a call per block costs ~15 %).
#define TSR_VNNI_TARGET "avx2,f16c,fma,avx512vl,avx512vnni,avx512bw,avx512f,avx512dq"

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

// The scale a block of activations multiplies with: llama.cpp stores it as f16
// (block_q8_0.d) and its dot products read it back, so a scale kept in f32 would give
// other logits, by ~1e-3 of a probability per layer on a model whose weights are all Q8_0.
inline float q8_block_scale(float d) { return f16_to_f32(f32_to_f16(d)); }

// Quantizes 32 floats to int8 as llama.cpp's Q8_0 does (scale max|v|/127, round to
// nearest even) without SIMD: q gets the values, the result is the scale. The AVX-512
// form below gives the same values. A block with a NaN or an infinity (activations of a
// corrupt model) gets zeros and a NaN scale: the dot products turn NaN, as in f32,
// where a float-to-int conversion would be undefined. A block whose scale would be
// subnormal (max|v| < 127 FLT_MIN, where 1/d overflows) gets zeros, as an all-zero one.
inline float quantize_block_portable(const float* v, int8_t* q) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) {
    if (!std::isfinite(v[i])) {
      std::fill_n(q, 32, int8_t{0});
      return std::numeric_limits<float>::quiet_NaN();
    }
    amax = std::max(amax, std::fabs(v[i]));
  }
  const float d = amax / 127.0f;
  if (d < std::numeric_limits<float>::min()) {
    std::fill_n(q, 32, int8_t{0});
    return d;
  }
  const float id = 127.0f / amax;
  for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(std::nearbyint(v[i] * id));
  return q8_block_scale(d);
}

// Quantizes 32 floats to int8 as llama.cpp's Q8_0 does (scale max|v|/127, round to nearest
// even): the values as two vectors of 16 int32, and the scale as the result.
__attribute__((target(TSR_AVX512_TARGET), always_inline))
inline float quantize_block_avx512(const float* v, __m512i* lo, __m512i* hi) {
  const __m512 a = _mm512_loadu_ps(v), b = _mm512_loadu_ps(v + 16);
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  // |x| not below infinity, or unordered: an infinity or a NaN (see the portable form).
  if ((_mm512_cmp_ps_mask(_mm512_abs_ps(a), inf, _CMP_NLT_UQ) | _mm512_cmp_ps_mask(_mm512_abs_ps(b), inf, _CMP_NLT_UQ)) != 0) {
    *lo = *hi = _mm512_setzero_si512();
    return std::numeric_limits<float>::quiet_NaN();
  }
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  const float d = amax / 127.0f;
  if (d < std::numeric_limits<float>::min()) {
    *lo = *hi = _mm512_setzero_si512();
    return d;
  }
  const __m512 id = _mm512_set1_ps(127.0f / amax);
  *lo = _mm512_cvtps_epi32(_mm512_mul_ps(a, id));
  *hi = _mm512_cvtps_epi32(_mm512_mul_ps(b, id));
  return q8_block_scale(d);
}

// Calls f(std::integral_constant<int, n>{}) for n = nr (1 <= nr <= Max): kernels take their
// row count as a compile-time constant so that their accumulators live in registers
// (indexed by a run-time count they went to the stack).
template <int Max, class F>
void dispatch_rows(int nr, F&& f) {
  [&]<int... N>(std::integer_sequence<int, N...>) {
    (void)((nr == N + 1 ? (f(std::integral_constant<int, N + 1>{}), true) : false) || ...);
  }(std::make_integer_sequence<int, Max>{});
}

}  // namespace tsr::cpu
