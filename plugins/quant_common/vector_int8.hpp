// Vector-wise int8 rows and their int8 × int8 matmul, shared by the llm_int8 (LLM.int8())
// and w8a8_smooth (SmoothQuant) quant plugins. A row: a 16-byte header (f32 scale, absmax /
// 127 of the row's int8 columns; f32 outlier threshold, the scheme's when the row was
// quantized, so that each model's weights carry their own, inf for none; i32 count of kept
// columns; i32 zero), n int8 values, then room for `capacity` kept columns (llm_int8's; none
// for w8a8_smooth): pairs of an i32 index (ascending) and its f32 weight. A kept column is one that
// calibration showed to carry an outlier feature (its importance, the mean of x² at the
// input, reaches (threshold / 2)²: x reaching the threshold at a quarter of the tokens,
// LLM.int8()'s systematic outliers); its weights stay f32 and its int8 values are 0.
// At a matmul the kept columns, and the activations' feature dimensions where any row reaches
// the threshold in magnitude, multiply in f32 against their weight columns (kept, or else
// decoded with the row's scale); the rest run as int8 × int8 with one absmax
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

inline constexpr int64_t kHeader = 16;

inline float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// x / scale rounded to nearest even, within ±127 (scale is absmax / 127).
inline int8_t quantize_value(float x, float inverse) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(x * inverse), -127.0f, 127.0f));
}

inline int64_t row_bytes(int64_t n, int64_t capacity) { return kHeader + n + 8 * capacity; }

// A row's kept columns: `count` pairs of an i32 index and its f32 weight.
struct KeptColumns {
  int32_t count;
  const uint8_t* pairs;
  int32_t index(int32_t s) const { return load_i32(pairs + 8 * s); }
  float weight(int32_t s) const { return load_f32(pairs + 8 * s + 4); }
};

inline KeptColumns kept_columns(const uint8_t* row, int64_t n) { return {load_i32(row + 8), row + kHeader + n}; }

// The columns to keep: those whose importance reaches (threshold / 2)², the most important
// first, at most `capacity`; returned ascending. None without an importance or a threshold.
inline std::vector<int32_t> choose_kept(const float* importance, int64_t n, float threshold, int64_t capacity) {
  std::vector<int32_t> kept;
  if (importance == nullptr || std::isinf(threshold)) return kept;
  const float floor = 0.25f * threshold * threshold;
  for (int64_t c = 0; c < n; ++c) {
    if (importance[c] >= floor) kept.push_back(int32_t(c));
  }
  if (int64_t(kept.size()) > capacity) {
    std::partial_sort(kept.begin(), kept.begin() + capacity, kept.end(),
                      [&](int32_t a, int32_t b) { return importance[a] > importance[b]; });
    kept.resize(size_t(capacity));
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

// A row with a NaN or an infinity gets a NaN scale: its outputs are NaN, as Q8_0's.
// `importance` (can be NULL) chooses kept columns, room for `capacity` of them.
inline void quantize_row(const float* x, uint8_t* row, int64_t n, float threshold, int64_t capacity = 0,
                         const float* importance = nullptr) {
  const std::vector<int32_t> kept = choose_kept(importance, n, threshold, capacity);
  std::vector<uint8_t> is_kept(size_t(n), 0);
  for (const int32_t c : kept) is_kept[size_t(c)] = 1;
  float amax = 0.0f;
  bool finite = true;
  for (int64_t c = 0; c < n; ++c) {
    finite = finite && std::isfinite(x[c]);
    if (!is_kept[size_t(c)]) amax = std::max(amax, std::fabs(x[c]));
  }
  const float scale = finite ? amax / 127.0f : NAN;
  const int32_t count = int32_t(kept.size()), zero = 0;
  std::memcpy(row, &scale, sizeof scale);
  std::memcpy(row + 4, &threshold, sizeof threshold);
  std::memcpy(row + 8, &count, sizeof count);
  std::memcpy(row + 12, &zero, sizeof zero);
  const float inverse = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
  auto* q = reinterpret_cast<int8_t*>(row + kHeader);
  for (int64_t c = 0; c < n; ++c) q[c] = finite && !is_kept[size_t(c)] ? quantize_value(x[c], inverse) : 0;
  uint8_t* region = row + kHeader + n;
  std::memset(region, 0, size_t(8 * capacity));
  for (size_t s = 0; s < kept.size(); ++s) {
    std::memcpy(region + 8 * s, &kept[s], 4);
    std::memcpy(region + 8 * s + 4, &x[kept[s]], 4);
  }
}

inline void dequantize_row(const uint8_t* row, float* y, int64_t n) {
  const float scale = load_f32(row);
  const auto* q = reinterpret_cast<const int8_t*>(row + kHeader);
  for (int64_t c = 0; c < n; ++c) y[c] = float(q[c]) * scale;
  const KeptColumns kept = kept_columns(row, n);
  for (int32_t s = 0; s < kept.count; ++s) y[kept.index(s)] = kept.weight(s);
}

// The activations of one matmul split as LLM.int8() splits them. Pooled (SplitPool), so that
// a stream's matmuls reuse the buffers instead of allocating at every call.
struct SplitActivations {
  std::vector<uint8_t> is_outlier;  // [k]: 1 where any row reaches the threshold, 2 kept (first weight row)
  std::vector<int64_t> f32_dims;    // the dims marked, ascending
  std::vector<int64_t> outliers;    // those marked 1: decoded from int8 (unless a row keeps them)
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

// Marks the dimensions that multiply in f32 (any row reaching the threshold, and the first
// weight row's kept columns) and quantizes the rest of each activation row.
inline void split(const tsr::sdk::QuantMatmul& a, float threshold, const KeptColumns& kept, SplitActivations& s) {
  s.is_outlier.assign(static_cast<size_t>(a.k), 0);
  if (!std::isinf(threshold)) {
    for (int64_t i = 0; i < a.m; ++i) {
      const float* x = a.x + i * a.x_stride;
      for (int64_t c = 0; c < a.k; ++c) {
        if (std::fabs(x[c]) >= threshold) s.is_outlier[size_t(c)] = 1;
      }
    }
  }
  s.f32_dims.clear();
  s.outliers.clear();
  for (int32_t k = 0; k < kept.count; ++k) s.is_outlier[size_t(kept.index(k))] = 2;
  for (int64_t c = 0; c < a.k; ++c) {
    if (s.is_outlier[size_t(c)]) s.f32_dims.push_back(c);
    if (s.is_outlier[size_t(c)] == 1) s.outliers.push_back(c);
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

// The marked dimensions row `kept` decodes from int8: all but its own kept columns. The rows
// of one quantize_weighted call keep the same columns as the first row; a row that keeps
// others (rows quantized with another importance) gets its list built in `scratch`.
inline const std::vector<int64_t>& decoded_dims(const SplitActivations& s, const KeptColumns& kept,
                                                const KeptColumns& first, std::vector<int64_t>& scratch) {
  bool same = kept.count == first.count;
  for (int32_t t = 0; t < kept.count && same; ++t) same = kept.index(t) == first.index(t);
  if (same) return s.outliers;
  if (kept.count == 0) return s.f32_dims;
  scratch.clear();
  for (const int64_t c : s.f32_dims) {
    bool own = false;
    for (int32_t t = 0; t < kept.count && !own; ++t) own = kept.index(t) == c;
    if (!own) scratch.push_back(c);
  }
  return scratch;
}

inline void cpu_matmul(const tsr::sdk::QuantMatmul& a) {
  if (a.n == 0 || a.m == 0) return;
  SplitPool::Lease lease(SplitPool::instance());
  SplitActivations& s = lease.get();
  const KeptColumns first = kept_columns(a.w, a.k);
  split(a, load_f32(a.w + 4), first, s);
  const int threads = a.n_threads > 0 ? a.n_threads : omp_get_max_threads();
  int8_products(a, s, threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (a.n * a.m >= (int64_t(1) << 12))
  for (int64_t j = 0; j < a.n; ++j) {
    const uint8_t* row = a.w + j * a.w_row_bytes;
    const float w_scale = load_f32(row);
    const auto* w = reinterpret_cast<const int8_t*>(row + kHeader);
    const KeptColumns kept = kept_columns(row, a.k);
    std::vector<int64_t> scratch;
    const std::vector<int64_t>& decoded = decoded_dims(s, kept, first, scratch);
    for (int64_t i = 0; i < a.m; ++i) {
      const float* x = a.x + i * a.x_stride;
      float sum = float(s.acc[size_t(i * a.n + j)]) * s.scale[size_t(i)] * w_scale;
      for (int32_t t = 0; t < kept.count; ++t) sum += x[kept.index(t)] * kept.weight(t);
      for (const int64_t c : decoded) sum += x[c] * (float(w[c]) * w_scale);
      a.y[i * a.y_stride + j] = sum;
    }
  }
}

}  // namespace tsr::quant_int8
