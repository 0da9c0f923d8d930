// Vector-wise int8 rows and their int8 × int8 matmul, shared by the llm_int8 (LLM.int8())
// and w8a8_smooth (SmoothQuant) quant plugins. A row: f32 scale (absmax / 127), f32 outlier
// threshold (the scheme's when the row was quantized, so that each model's weights carry
// their own; inf for none), then n int8 values. At a matmul the activations' feature
// dimensions where any row reaches the threshold in magnitude multiply in f32 against their
// weight columns (decoded with the row's scale); the rest run as int8 × int8 with one absmax
// scale per activation row, in int32.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tessera/sdk/quant.hpp"

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

// The activations of one matmul split as LLM.int8() splits them. Kept per thread, so that a
// stream's matmuls reuse the buffers instead of allocating at every call.
struct SplitActivations {
  std::vector<uint8_t> is_outlier;  // [k]
  std::vector<int64_t> outliers;    // feature dims that any row reaches the threshold in
  std::vector<int8_t> q;            // [m][k], 0 in the outlier dims
  std::vector<float> scale;         // [m]
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
  s.q.resize(static_cast<size_t>(a.m * a.k));
  s.scale.resize(static_cast<size_t>(a.m));
  for (int64_t i = 0; i < a.m; ++i) {
    const float* x = a.x + i * a.x_stride;
    float amax = 0.0f;
    for (int64_t c = 0; c < a.k; ++c) {
      if (!s.is_outlier[size_t(c)]) amax = std::max(amax, std::fabs(x[c]));
    }
    s.scale[size_t(i)] = amax / 127.0f;
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    int8_t* q = &s.q[size_t(i * a.k)];
    for (int64_t c = 0; c < a.k; ++c) q[c] = s.is_outlier[size_t(c)] ? 0 : quantize_value(x[c], inverse);
  }
}

inline int32_t dot_i8(const int8_t* a, const int8_t* b, int64_t n) {
  int32_t acc = 0;
  for (int64_t c = 0; c < n; ++c) acc += int32_t(a[c]) * int32_t(b[c]);
  return acc;
}

inline void cpu_matmul(const tsr::sdk::QuantMatmul& a) {
  if (a.n == 0 || a.m == 0) return;
  // The calling thread's buffers, referenced by name so that the OpenMP workers below share
  // them (inside the region, `tls` would name each worker's own, empty instance).
  thread_local SplitActivations tls;
  SplitActivations& s = tls;
  split(a, load_f32(a.w + 4), s);
  const int threads = a.n_threads > 0 ? a.n_threads : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(static) if (a.n * a.k * a.m >= (int64_t(1) << 16))
  for (int64_t j = 0; j < a.n; ++j) {
    const uint8_t* row = a.w + j * a.w_row_bytes;
    const float w_scale = load_f32(row);
    const auto* w = reinterpret_cast<const int8_t*>(row + kHeader);
    for (int64_t i = 0; i < a.m; ++i) {
      float sum = float(dot_i8(&s.q[size_t(i * a.k)], w, a.k)) * s.scale[size_t(i)] * w_scale;
      const float* x = a.x + i * a.x_stride;
      for (const int64_t c : s.outliers) sum += x[c] * (float(w[c]) * w_scale);
      a.y[i * a.y_stride + j] = sum;
    }
  }
}

}  // namespace tsr::quant_int8
