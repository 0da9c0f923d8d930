// Vector-wise int8 rows and their int8 × int8 matmul, shared by the llm_int8 (LLM.int8())
// and w8a8_smooth (SmoothQuant) quant plugins. A row: f32 scale (absmax / 127), f32 outlier
// threshold (the scheme's when the row was quantized, so that each model's weights carry
// their own; inf for none), then n int8 values. At a matmul the activations' feature
// dimensions where any row reaches the threshold in magnitude multiply in f32 against their
// weight columns (decoded with the row's scale); the rest run as int8 × int8 with one absmax
// scale per activation row, in int32, through oneDNN's u8 × s8 GEMM (the activations shifted
// by its zero point 128, which maps to VNNI's unsigned × signed dot products); decode steps
// of under 4 rows take a dot product per output instead, and so does every step on a CPU
// without AVX-512 VNNI, where oneDNN's GEMM sums pairs of u8 × s8 products in saturating
// 16 bits (vpmaddubsw: 255 · 127 · 2 > 32767), which a shifted activation reaches.
#pragma once

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "tessera/sdk/cpu_isa.hpp"
#include "tessera/sdk/quant.hpp"
#include "tessera/sdk/status.hpp"

namespace tsr::quant_int8 {

inline constexpr int64_t kHeader = 8;

inline float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// x / scale rounded to nearest even, within ±127 (scale is absmax / 127).
inline int8_t quantize_value(float x, float inverse) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(x * inverse), -127.0f, 127.0f));
}

inline int64_t row_bytes(int64_t n) { return kHeader + n; }

// A row with a NaN or an infinity gets a NaN scale: its outputs are NaN, as Q8_0's.
inline void quantize_row(const float* x, uint8_t* row, int64_t n, float threshold) {
  float amax = 0.0f;
  bool finite = true;
  for (int64_t c = 0; c < n; ++c) {
    finite = finite && std::isfinite(x[c]);
    amax = std::max(amax, std::fabs(x[c]));
  }
  const float scale = finite ? amax / 127.0f : NAN;
  std::memcpy(row, &scale, sizeof scale);
  std::memcpy(row + 4, &threshold, sizeof threshold);
  const float inverse = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
  auto* q = reinterpret_cast<int8_t*>(row + kHeader);
  for (int64_t c = 0; c < n; ++c) q[c] = finite ? quantize_value(x[c], inverse) : 0;
}

inline void dequantize_row(const uint8_t* row, float* y, int64_t n) {
  const float scale = load_f32(row);
  const auto* q = reinterpret_cast<const int8_t*>(row + kHeader);
  for (int64_t c = 0; c < n; ++c) y[c] = float(q[c]) * scale;
}

// The activations of one matmul split as LLM.int8() splits them. Pooled (SplitPool), so that
// a stream's matmuls reuse the buffers instead of allocating at every call.
struct SplitActivations {
  std::vector<uint8_t> is_outlier;  // [k]
  std::vector<int64_t> outliers;    // feature dims that any row reaches the threshold in
  std::vector<uint8_t> u;           // [m][k]: the int8 value + 128; 128 (zero) in the outlier dims
  std::vector<float> scale;         // [m]
  std::vector<int32_t> acc;         // [m][n]: the int8 products
};

inline constexpr uint8_t kZeroPoint = 128;

// Buffers for the matmuls in flight, one set each. A pool rather than thread_local: a
// plugin's dynamic TLS outlives its dlclose in the threads that called it, where
// LeakSanitizer's exit scan crashed (see constraints/compile_budget.cpp).
class SplitPool {
 public:
  class Lease {
   public:
    explicit Lease(SplitPool& pool) : pool_(pool), s_(pool.take()) {}
    ~Lease() { pool_.give(std::move(s_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    SplitActivations& get() { return *s_; }

   private:
    SplitPool& pool_;
    std::unique_ptr<SplitActivations> s_;
  };

  static SplitPool& instance() {
    static SplitPool pool;
    return pool;
  }

 private:
  std::unique_ptr<SplitActivations> take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return std::make_unique<SplitActivations>();
    std::unique_ptr<SplitActivations> s = std::move(free_.back());
    free_.pop_back();
    return s;
  }
  void give(std::unique_ptr<SplitActivations> s) {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(s));
  }
  std::mutex mutex_;
  std::vector<std::unique_ptr<SplitActivations>> free_;
};

inline void split(const tsr::sdk::QuantMatmul& a, float threshold, SplitActivations& s) {
  s.is_outlier.assign(static_cast<size_t>(a.k), 0);
  s.outliers.clear();
  if (!std::isinf(threshold)) {
    for (int64_t i = 0; i < a.m; ++i) {
      const float* x = a.x + i * a.x_stride;
      for (int64_t c = 0; c < a.k; ++c) {
        if (std::fabs(x[c]) >= threshold) s.is_outlier[size_t(c)] = 1;
      }
    }
    for (int64_t c = 0; c < a.k; ++c) {
      if (s.is_outlier[size_t(c)]) s.outliers.push_back(c);
    }
  }
  s.u.resize(static_cast<size_t>(a.m * a.k));
  s.scale.resize(static_cast<size_t>(a.m));
  for (int64_t i = 0; i < a.m; ++i) {
    const float* x = a.x + i * a.x_stride;
    float amax = 0.0f;
    for (int64_t c = 0; c < a.k; ++c) {
      if (!s.is_outlier[size_t(c)]) amax = std::max(amax, std::fabs(x[c]));
    }
    s.scale[size_t(i)] = amax / 127.0f;
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    uint8_t* u = &s.u[size_t(i * a.k)];
    for (int64_t c = 0; c < a.k; ++c) {
      u[c] = static_cast<uint8_t>((s.is_outlier[size_t(c)] ? 0 : quantize_value(x[c], inverse)) + kZeroPoint);
    }
  }
}

// sum (u - 128) * w: one output of a decode step, where a GEMM call costs more than it saves.
inline int32_t dot_u8s8(const uint8_t* u, const int8_t* w, int64_t n) {
  int32_t acc = 0;
  for (int64_t c = 0; c < n; ++c) acc += (int32_t(u[c]) - kZeroPoint) * int32_t(w[c]);
  return acc;
}

// acc = (u - 128) * W^T: the weight rows, past their headers, are W's rows a row stride apart.
inline void int8_products(const tsr::sdk::QuantMatmul& a, SplitActivations& s, int threads) {
  s.acc.resize(static_cast<size_t>(a.m * a.n));
  static const bool gemm_exact = tsr::sdk::cpu_isa_at_least(tsr::sdk::CpuIsa::avx512_vnni);
  if (a.m < 4 || !gemm_exact) {
#pragma omp parallel for num_threads(threads) schedule(static) if (a.n * a.k * a.m >= (int64_t(1) << 16))
    for (int64_t j = 0; j < a.n; ++j) {  // exact in int32 whatever the ISA
      const auto* w = reinterpret_cast<const int8_t*>(a.w + j * a.w_row_bytes + kHeader);
      for (int64_t i = 0; i < a.m; ++i) s.acc[size_t(i * a.n + j)] = dot_u8s8(&s.u[size_t(i * a.k)], w, a.k);
    }
    return;
  }
  const int32_t no_offset = 0;
  const dnnl_status_t st = dnnl_gemm_u8s8s32('N', 'T', 'F', a.m, a.n, a.k, 1.0f, s.u.data(), a.k, kZeroPoint,
                                             reinterpret_cast<const int8_t*>(a.w + kHeader), a.w_row_bytes, 0, 0.0f,
                                             s.acc.data(), a.n, &no_offset);
  tsr::sdk::require(st == dnnl_success, "int8 matmul: oneDNN's u8s8s32 GEMM failed");
}

inline void cpu_matmul(const tsr::sdk::QuantMatmul& a) {
  if (a.n == 0 || a.m == 0) return;
  SplitPool::Lease lease(SplitPool::instance());
  SplitActivations& s = lease.get();
  split(a, load_f32(a.w + 4), s);
  const int threads = a.n_threads > 0 ? a.n_threads : omp_get_max_threads();
  int8_products(a, s, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (a.n * a.m >= (int64_t(1) << 12))
  for (int64_t j = 0; j < a.n; ++j) {
    const uint8_t* row = a.w + j * a.w_row_bytes;
    const float w_scale = load_f32(row);
    const auto* w = reinterpret_cast<const int8_t*>(row + kHeader);
    for (int64_t i = 0; i < a.m; ++i) {
      float sum = float(s.acc[size_t(i * a.n + j)]) * s.scale[size_t(i)] * w_scale;
      const float* x = a.x + i * a.x_stride;
      for (const int64_t c : s.outliers) sum += x[c] * (float(w[c]) * w_scale);
      a.y[i * a.y_stride + j] = sum;
    }
  }
}

}  // namespace tsr::quant_int8
