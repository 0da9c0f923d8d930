// The four weight formats as the in-tree quant plugins describe them.
#pragma once

#include "quant_formats/fp8_e4m3.h"
#include "quant_formats/ggml_blocks.h"
#include "quant_formats/int4_g128.h"
#include "tessera/abi.h"

namespace tsr::quant_plugin {

struct Q8_0 {
  static constexpr const char* kName = "q8_0";
  static constexpr tsr_dtype kDtype = TSR_DTYPE_Q8_0;
  static constexpr int32_t kBlock = quant::kBlockQ8_0;
  static constexpr bool kCpuKernels = false;  // the CPU backend's own int8 kernels run it
  static int64_t row_bytes(int64_t n) { return n / kBlock * int64_t(sizeof(quant::BlockQ8_0)); }
  static void quantize_row(const float* x, uint8_t* row, int64_t n) {
    quant::quantize_row_q8_0_ref(x, reinterpret_cast<quant::BlockQ8_0*>(row), n);
  }
  static void dequantize_row(const uint8_t* row, float* y, int64_t n) {
    quant::dequantize_row_q8_0(reinterpret_cast<const quant::BlockQ8_0*>(row), y, n);
  }
};

struct Q4_0 {
  static constexpr const char* kName = "q4_0";
  static constexpr tsr_dtype kDtype = TSR_DTYPE_Q4_0;
  static constexpr int32_t kBlock = quant::kBlockQ4_0;
  static constexpr bool kCpuKernels = false;  // the CPU backend's own int8 kernels run it
  static int64_t row_bytes(int64_t n) { return n / kBlock * int64_t(sizeof(quant::BlockQ4_0)); }
  static void quantize_row(const float* x, uint8_t* row, int64_t n) {
    quant::quantize_row_q4_0_ref(x, reinterpret_cast<quant::BlockQ4_0*>(row), n);
  }
  static void dequantize_row(const uint8_t* row, float* y, int64_t n) {
    quant::dequantize_row_q4_0(reinterpret_cast<const quant::BlockQ4_0*>(row), y, n);
  }
};

struct Int4G128 {
  static constexpr const char* kName = "int4_g128";
  static constexpr tsr_dtype kDtype = TSR_DTYPE_INT4_G128;
  static constexpr int32_t kBlock = quant::kGroupInt4;
  static constexpr bool kCpuKernels = true;
  static int64_t row_bytes(int64_t n) { return n / kBlock * int64_t(sizeof(quant::GroupInt4)); }
  static void quantize_row(const float* x, uint8_t* row, int64_t n) {
    quant::quantize_row_int4_g128(x, reinterpret_cast<quant::GroupInt4*>(row), n);
  }
  static void dequantize_row(const uint8_t* row, float* y, int64_t n) {
    quant::dequantize_row_int4_g128(reinterpret_cast<const quant::GroupInt4*>(row), y, n);
  }
};

struct Fp8E4m3 {
  static constexpr const char* kName = "fp8_e4m3";
  static constexpr tsr_dtype kDtype = TSR_DTYPE_FP8_E4M3;
  static constexpr int32_t kBlock = 1;
  static constexpr bool kCpuKernels = true;
  static int64_t row_bytes(int64_t n) { return quant::fp8_row_bytes(n); }
  static void quantize_row(const float* x, uint8_t* row, int64_t n) { quant::quantize_row_fp8_e4m3(x, row, n); }
  static void dequantize_row(const uint8_t* row, float* y, int64_t n) { quant::dequantize_row_fp8_e4m3(row, y, n); }
};

}  // namespace tsr::quant_plugin
