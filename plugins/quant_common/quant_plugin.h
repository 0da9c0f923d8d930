// The in-tree quant plugins as one template over a weight format (quant_formats/): the
// ABI table, the generic reference dot product, and the CPU kernels where the format
// brings its own (int4_g128, fp8_e4m3; the CPU backend runs Q8_0/Q4_0 natively).
//
// Format provides:
//   static constexpr const char* kName; static constexpr tsr_dtype kDtype;
//   static constexpr int32_t kBlock;                  // row lengths are multiples of it
//   static constexpr bool kCpuKernels;                // whether to offer cpu_matmul
//   static int64_t row_bytes(int64_t n);
//   static void quantize_row(const float* x, uint8_t* row, int64_t n);
//   static void dequantize_row(const uint8_t* row, float* y, int64_t n);
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "plugins/quant_common/cpu_matmul.h"
#include "tessera/quant.h"
#include "tessera/sdk/plugin.hpp"

namespace tsr::quant_plugin {

template <class Format>
class QuantPlugin {
 public:
  static const tsr_plugin_desc& desc(const char* name, const char* version) {
    static const tsr_plugin_desc d = sdk::describe(TSR_PLUGIN_QUANT, name, version, &iface());
    return d;
  }

  static const tsr_quant_iface& iface() {
    static const tsr_quant_iface t = {sizeof(tsr_quant_iface), Format::kName, Format::kDtype, Format::kBlock,
                                      row_bytes, quantize, dequantize, dot, kernels};
    return t;
  }

 private:
  static void check_shape(int64_t rows, int64_t cols, const char* entry) {
    sdk::require(rows >= 0 && cols > 0 && cols % Format::kBlock == 0,
                 std::string(entry) + ": rows of " + std::to_string(cols) + " elements are not whole " +
                     Format::kName + " blocks of " + std::to_string(Format::kBlock));
  }

  static int64_t row_bytes(int64_t n) { return n > 0 && n % Format::kBlock == 0 ? Format::row_bytes(n) : 0; }

  static tsr_status quantize(const float* x, int64_t rows, int64_t cols, void* out, tsr_error** error) {
    return sdk::boundary(error, [&] {
      check_shape(rows, cols, "quantize");
      sdk::require(x != nullptr && out != nullptr, "quantize: NULL buffer");
      auto* o = static_cast<uint8_t*>(out);
      for (int64_t r = 0; r < rows; ++r) Format::quantize_row(x + r * cols, o + r * Format::row_bytes(cols), cols);
    });
  }

  static tsr_status dequantize(const void* in, int64_t rows, int64_t cols, float* out, tsr_error** error) {
    return sdk::boundary(error, [&] {
      check_shape(rows, cols, "dequantize");
      sdk::require(in != nullptr && out != nullptr, "dequantize: NULL buffer");
      const auto* i = static_cast<const uint8_t*>(in);
      for (int64_t r = 0; r < rows; ++r) Format::dequantize_row(i + r * Format::row_bytes(cols), out + r * cols, cols);
    });
  }

  static tsr_status dot(const void* row, const float* x, int64_t n, float* out, tsr_error** error) {
    return sdk::boundary(error, [&] {
      check_shape(1, n, "dot");
      sdk::require(row != nullptr && x != nullptr && out != nullptr, "dot: NULL buffer");
      std::vector<float> w(static_cast<size_t>(n));
      Format::dequantize_row(static_cast<const uint8_t*>(row), w.data(), n);
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += double(w[j]) * x[j];
      *out = static_cast<float>(s);
    });
  }

  static tsr_status cpu_matmul(const float* x, int64_t x_stride, int64_t m, int64_t k, const void* w,
                               int64_t w_row_bytes, int64_t n, float* y, int64_t y_stride, int32_t n_threads,
                               tsr_error** error) {
    return sdk::boundary(error, [&] {
      check_shape(n, k, "matmul");
      sdk::require(x != nullptr && w != nullptr && y != nullptr, "matmul: NULL buffer");
      sdk::require(m >= 0 && x_stride >= k && y_stride >= n && w_row_bytes >= Format::row_bytes(k),
                   "matmul: strides smaller than the rows");
      cpu_matmul_dequant(MatmulArgs{x, x_stride, m, k, static_cast<const uint8_t*>(w), w_row_bytes, n, y,
                                    y_stride, n_threads},
                         Format::dequantize_row);
    });
  }

  static const tsr_quant_kernels* kernels(const char* backend) {
    static const tsr_quant_kernels cpu = {sizeof(tsr_quant_kernels), "cpu", cpu_matmul};
    if (!Format::kCpuKernels || backend == nullptr || std::strcmp(backend, "cpu") != 0) return nullptr;
    return &cpu;
  }
};

}  // namespace tsr::quant_plugin

#define TSR_QUANT_PLUGIN(Format, name, version) \
  TSR_SDK_DEFINE_QUERY(::tsr::quant_plugin::QuantPlugin<Format>, name, version)
