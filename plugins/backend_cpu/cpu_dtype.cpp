#include "cpu_dtype.h"

#include "quant_formats/fp8_e4m3.h"
#include "quant_formats/ggml_blocks.h"
#include "quant_formats/iq4.h"
#include "quant_formats/kquants.h"
#include "quant_formats/mxfp4.h"

namespace tsr::cpu {

int64_t row_bytes(tsr_dtype dtype, int64_t n) { return tsr_dtype_row_bytes(dtype, n); }

bool is_weight_dtype(tsr_dtype dtype) {
  switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F16: case TSR_DTYPE_BF16: case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q4_0:
    case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1: case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K: case TSR_DTYPE_Q5_K: case TSR_DTYPE_Q6_K:
    case TSR_DTYPE_IQ4_NL: case TSR_DTYPE_IQ4_XS: case TSR_DTYPE_MXFP4: return true;
    default: return false;
  }
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
    // ggml's dequantizers, so embeddings and decoded GEMM weights are llama.cpp's floats.
    case TSR_DTYPE_Q4_1: return quant::dequantize_row_q4_1(static_cast<const quant::BlockQ4_1*>(src), dst, n);
    case TSR_DTYPE_Q5_0: return quant::dequantize_row_q5_0(static_cast<const quant::BlockQ5_0*>(src), dst, n);
    case TSR_DTYPE_Q5_1: return quant::dequantize_row_q5_1(static_cast<const quant::BlockQ5_1*>(src), dst, n);
    case TSR_DTYPE_FP8_E4M3: return quant::dequantize_row_fp8_e4m3(static_cast<const uint8_t*>(src), dst, n);
    case TSR_DTYPE_Q2_K: return quant::dequantize_row_q2_k(static_cast<const quant::BlockQ2_K*>(src), dst, n);
    case TSR_DTYPE_Q3_K: return quant::dequantize_row_q3_k(static_cast<const quant::BlockQ3_K*>(src), dst, n);
    case TSR_DTYPE_Q4_K: return quant::dequantize_row_q4_k(static_cast<const quant::BlockQ4_K*>(src), dst, n);
    case TSR_DTYPE_Q5_K: return quant::dequantize_row_q5_k(static_cast<const quant::BlockQ5_K*>(src), dst, n);
    case TSR_DTYPE_Q6_K: return quant::dequantize_row_q6_k(static_cast<const quant::BlockQ6_K*>(src), dst, n);
    case TSR_DTYPE_IQ4_NL: return quant::dequantize_row_iq4_nl(static_cast<const quant::BlockIQ4_NL*>(src), dst, n);
    case TSR_DTYPE_IQ4_XS: return quant::dequantize_row_iq4_xs(static_cast<const quant::BlockIQ4_XS*>(src), dst, n);
    case TSR_DTYPE_MXFP4: return quant::dequantize_row_mxfp4(static_cast<const quant::BlockMXFP4*>(src), dst, n);
    default:
      return;
  }
}

}  // namespace tsr::cpu
