// The w8a8_smooth quant plugin: SmoothQuant's W8A8 (Xiao et al., 2023). Weights are int8
// with one absmax scale per output row, activations int8 with one absmax scale per token,
// multiplied int8 × int8 in int32 for prefill and decode alike (quant_common/vector_int8.hpp,
// with no outlier dimensions). It expects a model whose activation outliers were migrated
// into the weights by `tessera quantize IN OUT w8a8_smooth --calib TEXT`; on a model that
// was not smoothed it is plain vector-wise W8A8.
#include <cmath>

#include "plugins/quant_common/vector_int8.hpp"

namespace {

struct W8A8Smooth {
  static constexpr const char* kScheme = "w8a8_smooth";
  static constexpr tsr_dtype kDtype = TSR_DTYPE_PLUGIN;
  static constexpr int32_t kBlock = 1;

  static int64_t row_bytes(int64_t n) { return tsr::quant_int8::row_bytes(n, 0); }
  static void quantize_row(const float* x, uint8_t* row, int64_t n) { tsr::quant_int8::quantize_row(x, row, n, INFINITY); }
  static void dequantize_row(const uint8_t* row, float* y, int64_t n) { tsr::quant_int8::dequantize_row(row, y, n); }
  static void cpu_matmul(const tsr::sdk::QuantMatmul& a) { tsr::quant_int8::cpu_matmul(a); }
};

}  // namespace

TSR_SDK_QUANT_PLUGIN(W8A8Smooth, "w8a8_smooth", "0.1.0")
