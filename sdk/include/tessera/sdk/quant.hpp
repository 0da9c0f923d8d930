// QuantPlugin<Impl>: fills a tsr_quant_iface from a C++ class (see sdk/templates/quant).
// Needs ABI 1.1.
//
// Impl provides:
//   static constexpr const char* kScheme = "mine";        // equals the plugin's name
//   static constexpr tsr_dtype kDtype = TSR_DTYPE_PLUGIN; // the tag its weights carry
//   static constexpr int32_t kBlock = 32;                 // row lengths are multiples of it
//   static int64_t row_bytes(int64_t n);                  // n: a positive multiple of kBlock
//   static void quantize_row(const float* x, uint8_t* row, int64_t n);
//   static void dequantize_row(const uint8_t* row, float* y, int64_t n);
// and optionally a matmul on host memory, offered as kernels("cpu"):
//   static void cpu_matmul(const tsr::sdk::QuantMatmul& args);
// All of them must be thread-safe: the host calls them from several threads at once.
//
// The generated entries check shapes (whole blocks), strides and NULL buffers before Impl
// runs, compute the reference dot product from dequantize_row, and turn every exception
// into a status and error object.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/quant.h"
#include "tessera/sdk/plugin.hpp"

namespace tsr::sdk {

// The arguments of tsr_quant_kernels.matmul, checked: y[i, j] = sum_k x[i, k] * W[j, k].
struct QuantMatmul {
  const float* x;
  int64_t x_stride, m, k;  // m rows of k floats, x_stride floats apart
  const uint8_t* w;
  int64_t w_row_bytes, n;  // n rows of the scheme, w_row_bytes apart
  float* y;
  int64_t y_stride;  // m rows of n floats, y_stride floats apart
  int32_t n_threads;
};

template <class Impl>
class QuantPlugin {
 public:
  static const tsr_plugin_desc& desc(const char* name, const char* version) {
    static const tsr_plugin_desc d = describe(TSR_PLUGIN_QUANT, name, version, &iface());
    return d;
  }

  static const tsr_quant_iface& iface() {
    static_assert(Impl::kBlock > 0, "kBlock must be positive");
    static const tsr_quant_iface t = {sizeof(tsr_quant_iface), Impl::kScheme, Impl::kDtype, Impl::kBlock,
                                      row_bytes, quantize, dequantize, dot, kernels};
    return t;
  }

 private:
  static constexpr bool kHasCpuMatmul = requires(const QuantMatmul& a) { Impl::cpu_matmul(a); };

  static bool fits(int64_t n) { return n > 0 && n % Impl::kBlock == 0; }

  static void check_shape(int64_t rows, int64_t cols, const char* entry) {
    require(rows >= 0 && fits(cols), std::string(entry) + ": " + std::to_string(rows) + " rows of " +
                                         std::to_string(cols) + " elements are not whole " + Impl::kScheme +
                                         " blocks of " + std::to_string(Impl::kBlock));
  }

  // 0 for lengths that are not whole blocks: the host asks before it converts a weight.
  static int64_t row_bytes(int64_t n) { return fits(n) ? Impl::row_bytes(n) : 0; }

  static tsr_status quantize(const float* x, int64_t rows, int64_t cols, void* out, tsr_error** error) {
    return boundary(error, [&] {
      check_shape(rows, cols, "quantize");
      require(x != nullptr && out != nullptr, "quantize: NULL buffer");
      const int64_t bytes = Impl::row_bytes(cols);
      auto* o = static_cast<uint8_t*>(out);
      for (int64_t r = 0; r < rows; ++r) Impl::quantize_row(x + r * cols, o + r * bytes, cols);
    });
  }

  static tsr_status dequantize(const void* in, int64_t rows, int64_t cols, float* out, tsr_error** error) {
    return boundary(error, [&] {
      check_shape(rows, cols, "dequantize");
      require(in != nullptr && out != nullptr, "dequantize: NULL buffer");
      const int64_t bytes = Impl::row_bytes(cols);
      const auto* i = static_cast<const uint8_t*>(in);
      for (int64_t r = 0; r < rows; ++r) Impl::dequantize_row(i + r * bytes, out + r * cols, cols);
    });
  }

  // Accumulates in double: this is the reference kernels are measured against.
  static tsr_status dot(const void* row, const float* x, int64_t n, float* out, tsr_error** error) {
    return boundary(error, [&] {
      check_shape(1, n, "dot");
      require(row != nullptr && x != nullptr && out != nullptr, "dot: NULL buffer");
      std::vector<float> w(static_cast<size_t>(n));
      Impl::dequantize_row(static_cast<const uint8_t*>(row), w.data(), n);
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += double(w[j]) * x[j];
      *out = static_cast<float>(s);
    });
  }

  static tsr_status cpu_matmul(const float* x, int64_t x_stride, int64_t m, int64_t k, const void* w,
                               int64_t w_row_bytes, int64_t n, float* y, int64_t y_stride, int32_t n_threads,
                               tsr_error** error) {
    return boundary(error, [&] {
      check_shape(n, k, "matmul");
      require(m >= 0, "matmul: m is negative");
      require(x != nullptr && w != nullptr && y != nullptr, "matmul: NULL buffer");
      require(x_stride >= k && y_stride >= n && w_row_bytes >= Impl::row_bytes(k),
              "matmul: strides smaller than the rows");
      Impl::cpu_matmul(QuantMatmul{x, x_stride, m, k, static_cast<const uint8_t*>(w), w_row_bytes, n, y,
                                   y_stride, n_threads});
    });
  }

  static const tsr_quant_kernels* kernels(const char* backend) {
    if (backend == nullptr || std::strcmp(backend, "cpu") != 0) return nullptr;
    if constexpr (kHasCpuMatmul) {
      static const tsr_quant_kernels cpu = {sizeof(tsr_quant_kernels), "cpu", cpu_matmul};
      return &cpu;
    } else {
      return nullptr;  // the host then needs a backend that supports kDtype itself
    }
  }
};

}  // namespace tsr::sdk

// Defines tsr_plugin_query for quant class `Impl` named `name` (the file is
// libtessera_quant_<name>.so; `name` must equal Impl::kScheme).
#define TSR_SDK_QUANT_PLUGIN(Impl, name, version)                                                 \
  static_assert(std::string_view(Impl::kScheme) == (name), "kScheme must equal the plugin's name"); \
  TSR_SDK_DEFINE_QUERY(::tsr::sdk::QuantPlugin<Impl>, name, version)
