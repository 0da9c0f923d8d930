// Quant plugin template: symmetric int8 in groups of 32 with an f32 scale per group,
// w = q * d with d = max|group| / 127. A group is 36 bytes: the scale, then 32 int8.
//
// The format is this plugin's own, so its weights carry TSR_DTYPE_PLUGIN: no backend
// supports that tag, and the host runs every matmul on weights of this scheme through
// kernels("cpu") below. (The tags of abi.h — Q8_0, INT4_G128, ... — name layouts the
// backends may know; reusing one for another layout would make them misread the weights.)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tessera/sdk/quant.hpp"

namespace {

class ExampleQuant {
 public:
  static constexpr const char* kScheme = "example";
  static constexpr tsr_dtype kDtype = TSR_DTYPE_PLUGIN;
  static constexpr int32_t kBlock = 32;

  static int64_t row_bytes(int64_t n) { return n / kBlock * kGroupBytes; }

  static void quantize_row(const float* x, uint8_t* row, int64_t n) {
    for (int64_t g = 0; g < n / kBlock; ++g, x += kBlock, row += kGroupBytes) {
      float amax = 0;
      for (int32_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float d = amax / 127;
      const float id = d != 0 ? 1 / d : 0;
      std::memcpy(row, &d, sizeof d);  // groups are 36 bytes apart: the scale is unaligned
      for (int32_t i = 0; i < kBlock; ++i) {
        row[4 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * id), -127.0f, 127.0f)));
      }
    }
  }

  static void dequantize_row(const uint8_t* row, float* y, int64_t n) {
    for (int64_t g = 0; g < n / kBlock; ++g, y += kBlock, row += kGroupBytes) {
      const float d = scale(row);
      for (int32_t i = 0; i < kBlock; ++i) y[i] = d * static_cast<int8_t>(row[4 + i]);
    }
  }

  // Single-threaded for clarity; a production kernel splits the n weight rows over
  // a.n_threads workers of a pool it keeps, and vectorizes the inner loop.
  static void cpu_matmul(const tsr::sdk::QuantMatmul& a) {
    for (int64_t j = 0; j < a.n; ++j) {
      const uint8_t* w = a.w + j * a.w_row_bytes;
      for (int64_t i = 0; i < a.m; ++i) a.y[i * a.y_stride + j] = dot(w, a.x + i * a.x_stride, a.k);
    }
  }

 private:
  static constexpr int64_t kGroupBytes = 4 + kBlock;

  static float scale(const uint8_t* group) {
    float d;
    std::memcpy(&d, group, sizeof d);
    return d;
  }

  // Integer weights times floats, one multiply by the scale per group.
  static float dot(const uint8_t* row, const float* x, int64_t n) {
    float sum = 0;
    for (int64_t g = 0; g < n / kBlock; ++g, x += kBlock, row += kGroupBytes) {
      float s = 0;
      for (int32_t i = 0; i < kBlock; ++i) s += static_cast<int8_t>(row[4 + i]) * x[i];
      sum += scale(row) * s;
    }
    return sum;
  }
};

}  // namespace

TSR_SDK_QUANT_PLUGIN(ExampleQuant, "example", "0.1.0")  // libtessera_quant_example.so
