// The llm_int8 quant plugin: LLM.int8() (Dettmers et al., 2022). Weights are int8 with one
// absmax scale per output row (vector-wise); at each matmul the activations' feature
// dimensions where any row reaches `outlier_threshold` in magnitude (6 by default, [quant]
// outlier_threshold) are the outliers: they multiply in f32 against their weight columns,
// and the rest as int8 × int8 with one absmax scale per activation row, in int32
// (quant_common/vector_int8.hpp). Given an importance matrix ([quant] imatrix), the columns
// whose calibrated activations reach the threshold systematically (mean x² ≥ (threshold /
// 2)²) keep their weights in f32, room for max(8, n / 256) per row; other outliers' weights
// are decoded from int8, as bitsandbytes' inference kernel does. A threshold of inf leaves
// no outliers: plain vector-wise int8, the baseline the decomposition is measured against.
#include <algorithm>
#include <atomic>
#include <string>

#include "plugins/quant_common/vector_int8.hpp"
#include "tessera/sdk/status.hpp"

namespace {

std::atomic<float> g_threshold{6.0f};

struct LlmInt8 {
  static constexpr const char* kScheme = "llm_int8";
  static constexpr tsr_dtype kDtype = TSR_DTYPE_PLUGIN;
  static constexpr int32_t kBlock = 1;

  // Kept columns a row has room for: LLM.int8() found at most a few dozen outlier dimensions
  // in models up to 13B (6 of 4096 in OPT-6.7B).
  static int64_t capacity(int64_t n) { return std::max<int64_t>(8, n / 256); }
  static int64_t row_bytes(int64_t n) { return tsr::quant_int8::row_bytes(n, capacity(n)); }
  static void quantize_row(const float* x, uint8_t* row, int64_t n) {
    tsr::quant_int8::quantize_row(x, row, n, g_threshold.load(), capacity(n));
  }
  static void quantize_row_weighted(const float* x, uint8_t* row, int64_t n, const float* importance) {
    tsr::quant_int8::quantize_row(x, row, n, g_threshold.load(), capacity(n), importance);
  }
  static void dequantize_row(const uint8_t* row, float* y, int64_t n) { tsr::quant_int8::dequantize_row(row, y, n); }

  static void option_set(std::string_view key, double value) {
    tsr::sdk::require(key == "outlier_threshold",
                      "llm_int8 has no option '" + std::string(key) + "' (it has outlier_threshold)");
    tsr::sdk::require(value > 0, "llm_int8: outlier_threshold must be > 0 (inf: no outliers)");
    g_threshold = static_cast<float>(value);
  }

  static void cpu_matmul(const tsr::sdk::QuantMatmul& a) { tsr::quant_int8::cpu_matmul(a); }
};

}  // namespace

TSR_SDK_QUANT_PLUGIN(LlmInt8, "llm_int8", "0.1.0")
