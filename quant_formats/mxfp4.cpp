#include "quant_formats/mxfp4.h"

#include <algorithm>
#include <cmath>

namespace tsr::quant {

namespace {

// The nearest level, the lowest index among equals (ggml's best_index_mxfp4).
uint8_t best_index(float x, float d) {
  int best = 0;
  float best_err = std::fabs(kMXFP4Values[0] * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kMXFP4Values[i] * d - x);
    if (err < best_err) best = i, best_err = err;
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

void quantize_row_mxfp4(const float* x, BlockMXFP4* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockMXFP4; ++i, x += kBlockMXFP4) {
    float amax = 0.0f;
    for (int j = 0; j < kBlockMXFP4; ++j) amax = std::max(amax, std::fabs(x[j]));
    // The largest level, 6 (12 doubled), lands at amax's power of two times 1.5 at most.
    // ggml converts a negative exponent to uint8_t (undefined); it is 0 here.
    const float e = amax > 0.0f ? std::floor(std::log2(amax)) - 2 + 127 : 0.0f;
    y[i].e = static_cast<uint8_t>(std::clamp(e, 0.0f, 255.0f));
    const float d = e8m0_to_f32_half(y[i].e);
    for (int j = 0; j < kBlockMXFP4 / 2; ++j) {
      y[i].qs[j] = static_cast<uint8_t>(best_index(x[j], d) | best_index(x[j + kBlockMXFP4 / 2], d) << 4);
    }
  }
}

void dequantize_row_mxfp4(const BlockMXFP4* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockMXFP4; ++i, y += kBlockMXFP4) {
    const float d = e8m0_to_f32_half(x[i].e);
    for (int j = 0; j < kBlockMXFP4 / 2; ++j) {
      y[j] = kMXFP4Values[x[i].qs[j] & 0x0f] * d;
      y[j + kBlockMXFP4 / 2] = kMXFP4Values[x[i].qs[j] >> 4] * d;
    }
  }
}

}  // namespace tsr::quant
