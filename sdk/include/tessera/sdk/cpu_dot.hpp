// The f32 dot product of two vectors on the widest instructions cpu_isa() allows (AVX-512,
// AVX2 + FMA, or portable code): for CPU plugins' kernels that decode weights to f32.
// Header-only. Sums are vectorized, so their rounding differs from a sequential sum's.
#pragma once

#include <cstdint>

#include "tessera/sdk/cpu_isa.hpp"

namespace tsr::sdk {

namespace cpu_dot_detail {

// One loop compiled for each level: GCC inlines a default-target function into a
// wider-target one, not the other way round.
__attribute__((always_inline)) inline float loop(const float* a, const float* b, int64_t n) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f,fma"))) inline float avx512(const float* a, const float* b, int64_t n) {
  return loop(a, b, n);
}
__attribute__((target("avx2,fma"))) inline float avx2(const float* a, const float* b, int64_t n) {
  return loop(a, b, n);
}
#endif

}  // namespace cpu_dot_detail

inline float dot_f32(const float* a, const float* b, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (cpu_isa_at_least(CpuIsa::avx512)) return cpu_dot_detail::avx512(a, b, n);
  if (cpu_isa_at_least(CpuIsa::avx2)) return cpu_dot_detail::avx2(a, b, n);
#endif
  return cpu_dot_detail::loop(a, b, n);
}

}  // namespace tsr::sdk
