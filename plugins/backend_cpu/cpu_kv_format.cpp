#include "cpu_kv_format.h"

#include "quant_formats/float_convert.h"
#include "quant_formats/fp8_e4m3.h"
#include "quant_formats/ggml_blocks.h"

namespace tsr::cpu {

bool is_kv_dtype(tsr_dtype dtype) {
  return dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16 ||
         dtype == TSR_DTYPE_Q8_0 || dtype == TSR_DTYPE_Q4_0 || dtype == TSR_DTYPE_FP8_E4M3;
}

void kv_row_write(tsr_dtype dtype, const float* src, uint8_t* dst, int64_t n) {
  switch (dtype) {
    case TSR_DTYPE_F16:
    case TSR_DTYPE_BF16: {
      auto* h = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = dtype == TSR_DTYPE_F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
      return;
    }
    case TSR_DTYPE_Q8_0:
      quant::quantize_row_q8_0_ref(src, reinterpret_cast<quant::BlockQ8_0*>(dst), n);
      return;
    case TSR_DTYPE_Q4_0:
      quant::quantize_row_q4_0_ref(src, reinterpret_cast<quant::BlockQ4_0*>(dst), n);
      return;
    case TSR_DTYPE_FP8_E4M3:
      quant::quantize_row_fp8_e4m3(src, dst, n);
      return;
    default:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
  }
}

}  // namespace tsr::cpu
