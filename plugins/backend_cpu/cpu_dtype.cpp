#include "cpu_dtype.h"

namespace tsr::cpu {

int64_t row_bytes(tsr_dtype dtype, int64_t n) { return tsr_dtype_row_bytes(dtype, n); }

bool is_weight_dtype(tsr_dtype dtype) {
  return dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16 ||
         dtype == TSR_DTYPE_Q8_0 || dtype == TSR_DTYPE_Q4_0;
}

void row_to_f32(tsr_dtype dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case TSR_DTYPE_F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case TSR_DTYPE_F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
      return;
    }
    case TSR_DTYPE_BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case TSR_DTYPE_Q8_0: {
      const auto* blocks = static_cast<const BlockQ8_0*>(src);
      for (int64_t b = 0; b < n / kQBlock; ++b) {
        const float d = f16_to_f32(blocks[b].d);
        for (int j = 0; j < kQBlock; ++j) dst[b * kQBlock + j] = d * blocks[b].qs[j];
      }
      return;
    }
    case TSR_DTYPE_Q4_0: {
      const auto* blocks = static_cast<const BlockQ4_0*>(src);
      for (int64_t b = 0; b < n / kQBlock; ++b) {
        const float d = f16_to_f32(blocks[b].d);
        float* out = dst + b * kQBlock;
        for (int j = 0; j < kQBlock / 2; ++j) {
          out[j] = d * static_cast<float>((blocks[b].qs[j] & 0x0f) - 8);
          out[j + kQBlock / 2] = d * static_cast<float>((blocks[b].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace tsr::cpu
