// The llm_int8 quant plugin: LLM.int8() (Dettmers et al., 2022). Weights are int8 with one
// absmax scale per output row (vector-wise); at each matmul the activations' feature
// dimensions where any row reaches `outlier_threshold` in magnitude (6 by default, [quant]
// outlier_threshold) are the outliers: they multiply in f32 against their weight columns
// (decoded from int8 with the row's scale), and the rest as int8 × int8 with one absmax
// scale per activation row, in int32. A threshold of inf leaves no outliers: plain
// vector-wise int8, the baseline the decomposition is measured against.
//
// A row: f32 scale (absmax / 127), f32 threshold (the option when the row was quantized,
// so that each model's weights carry their own), then n int8 values.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/sdk/quant.hpp"
#include "tessera/sdk/status.hpp"

namespace {

constexpr int64_t kHeader = 8;
std::atomic<float> g_threshold{6.0f};

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// x / scale rounded to nearest even, within ±127 (scale is absmax / 127).
int8_t quantize_value(float x, float inverse) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(x * inverse), -127.0f, 127.0f));
}

// The activations of one matmul split as LLM.int8() splits them.
struct SplitActivations {
  std::vector<int64_t> outliers;  // feature dims that any row reaches the threshold in
  std::vector<int8_t> q;          // [m][k], 0 in the outlier dims
  std::vector<float> scale;       // [m]
};

SplitActivations split(const tsr::sdk::QuantMatmul& a, float threshold) {
  SplitActivations s;
  std::vector<uint8_t> is_outlier(static_cast<size_t>(a.k), 0);
  for (int64_t i = 0; i < a.m; ++i) {
    const float* x = a.x + i * a.x_stride;
    for (int64_t c = 0; c < a.k; ++c) {
      if (std::fabs(x[c]) >= threshold) is_outlier[size_t(c)] = 1;
    }
  }
  for (int64_t c = 0; c < a.k; ++c) {
    if (is_outlier[size_t(c)]) s.outliers.push_back(c);
  }
  s.q.assign(static_cast<size_t>(a.m * a.k), 0);
  s.scale.assign(static_cast<size_t>(a.m), 0.0f);
  for (int64_t i = 0; i < a.m; ++i) {
    const float* x = a.x + i * a.x_stride;
    float amax = 0.0f;
    for (int64_t c = 0; c < a.k; ++c) {
      if (!is_outlier[size_t(c)]) amax = std::max(amax, std::fabs(x[c]));
    }
    s.scale[size_t(i)] = amax / 127.0f;
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    int8_t* q = &s.q[size_t(i * a.k)];
    for (int64_t c = 0; c < a.k; ++c) q[c] = is_outlier[size_t(c)] ? 0 : quantize_value(x[c], inverse);
  }
  return s;
}

int32_t dot_i8(const int8_t* a, const int8_t* b, int64_t n) {
  int32_t acc = 0;
  for (int64_t c = 0; c < n; ++c) acc += int32_t(a[c]) * int32_t(b[c]);
  return acc;
}

struct LlmInt8 {
  static constexpr const char* kScheme = "llm_int8";
  static constexpr tsr_dtype kDtype = TSR_DTYPE_PLUGIN;
  static constexpr int32_t kBlock = 1;

  static int64_t row_bytes(int64_t n) { return kHeader + n; }

  // A row with a NaN or an infinity gets a NaN scale: its outputs are NaN, as Q8_0's.
  static void quantize_row(const float* x, uint8_t* row, int64_t n) {
    float amax = 0.0f;
    bool finite = true;
    for (int64_t c = 0; c < n; ++c) {
      finite = finite && std::isfinite(x[c]);
      amax = std::max(amax, std::fabs(x[c]));
    }
    const float scale = finite ? amax / 127.0f : NAN, threshold = g_threshold.load();
    std::memcpy(row, &scale, sizeof scale);
    std::memcpy(row + 4, &threshold, sizeof threshold);
    const float inverse = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
    auto* q = reinterpret_cast<int8_t*>(row + kHeader);
    for (int64_t c = 0; c < n; ++c) q[c] = finite ? quantize_value(x[c], inverse) : 0;
  }

  static void dequantize_row(const uint8_t* row, float* y, int64_t n) {
    const float scale = load_f32(row);
    const auto* q = reinterpret_cast<const int8_t*>(row + kHeader);
    for (int64_t c = 0; c < n; ++c) y[c] = float(q[c]) * scale;
  }

  static void option_set(std::string_view key, double value) {
    tsr::sdk::require(key == "outlier_threshold",
                      "llm_int8 has no option '" + std::string(key) + "' (it has outlier_threshold)");
    tsr::sdk::require(value > 0, "llm_int8: outlier_threshold must be > 0 (inf: no outliers)");
    g_threshold = static_cast<float>(value);
  }

  static void cpu_matmul(const tsr::sdk::QuantMatmul& a) {
    if (a.n == 0 || a.m == 0) return;
    const SplitActivations s = split(a, load_f32(a.w + 4));
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
};

}  // namespace

TSR_SDK_QUANT_PLUGIN(LlmInt8, "llm_int8", "0.1.0")
