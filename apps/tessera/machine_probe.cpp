#include "apps/tessera/machine_probe.h"

#include <immintrin.h>
#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace tsr::app {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Sums `n` words with four independent accumulators so that the loads, not the adds, are
// the limit (a single dependency chain measures latency, not bandwidth).
__attribute__((target("avx512f")))
uint64_t sum_avx512(const uint64_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  const auto* v = reinterpret_cast<const __m512i*>(p);
  for (size_t i = 0; i + 4 <= n / 8; i += 4) {
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(v + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(v + i + 1));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(v + i + 2));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(v + i + 3));
  }
  return _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}

uint64_t sum_generic(const uint64_t* p, size_t n) {
  uint64_t a[4] = {0, 0, 0, 0};
  for (size_t i = 0; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; ++k) a[k] += p[i + k];
  }
  return a[0] + a[1] + a[2] + a[3];
}

// Twelve chains: more than latency (4-5 cycles) times issue rate (1-2 a cycle) needs.
constexpr int kChains = 12;
constexpr int64_t kIterations = 1 << 22;  // ~15 ms a thread at one instruction a cycle

__attribute__((target("avx512f")))
float fma_chains() {
  __m512 a[kChains];
  for (int c = 0; c < kChains; ++c) a[c] = _mm512_set1_ps(float(c) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999f), k = _mm512_set1_ps(1e-3f);
  for (int64_t i = 0; i < kIterations; ++i) {
    for (int c = 0; c < kChains; ++c) a[c] = _mm512_fmadd_ps(a[c], m, k);
  }
  float sum = 0;
  for (int c = 0; c < kChains; ++c) sum += _mm512_reduce_add_ps(a[c]);
  return sum;
}

__attribute__((target("avx512f,avx512vnni")))
float dot_chains() {
  __m512i a[kChains];
  for (int c = 0; c < kChains; ++c) a[c] = _mm512_set1_epi32(c);
  const __m512i u = _mm512_set1_epi8(1), s = _mm512_set1_epi8(-1);
  for (int64_t i = 0; i < kIterations; ++i) {
    for (int c = 0; c < kChains; ++c) a[c] = _mm512_dpbusd_epi32(a[c], u, s);
  }
  int64_t sum = 0;
  for (int c = 0; c < kChains; ++c) sum += _mm512_reduce_add_epi32(a[c]);
  return float(sum);
}

// Instructions a second over `threads` threads running `chains`, best of three.
double instruction_rate(int32_t threads, float (*chains)()) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    float sink = 0;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += chains();
    const double s = seconds_since(t0);
    if (sink == 1.5f) spdlog::debug("compute probe: {}", sink);  // keeps the chains live
    best = std::max(best, double(threads) * kChains * double(kIterations) / s);
  }
  return best;
}

}  // namespace

double measure_read_bandwidth(int32_t threads) {
  const size_t n = size_t(1) << 27;  // 1 GiB of 8-byte words, far beyond any cache
  std::vector<uint64_t> buffer(n, 1);
  const bool avx512 = __builtin_cpu_supports("avx512f");
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    uint64_t sum = 0;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sum)
    {
      const size_t chunk = n / size_t(omp_get_num_threads()) / 32 * 32;
      const uint64_t* p = buffer.data() + chunk * size_t(omp_get_thread_num());
      sum += avx512 ? sum_avx512(p, chunk) : sum_generic(p, chunk);
    }
    const double s = seconds_since(t0);
    const size_t read = n / 32 * 32 / size_t(threads) * size_t(threads);
    if (sum == 0) spdlog::warn("bandwidth probe read nothing");
    best = std::max(best, double(read * sizeof(uint64_t)) / s / 1e9);
  }
  return best;
}

ComputePeak measure_compute_peak(int32_t threads) {
  ComputePeak peak;
  if (__builtin_cpu_supports("avx512f")) peak.f32_fma_g_s = instruction_rate(threads, fma_chains) * 16 / 1e9;
  if (__builtin_cpu_supports("avx512vnni")) peak.i8_mac_g_s = instruction_rate(threads, dot_chains) * 64 / 1e9;
  return peak;
}

}  // namespace tsr::app
