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
// and optionally a matmul on host memory, offered as kernels("cpu") (in ABI 2.0 the SDK
// unpacks the tensors of tsr_quant_matmul_args into it; the CPU backend calls it):
//   static void cpu_matmul(const tsr::sdk::QuantMatmul& args);
// and optionally (ABI 2.4) numeric options from the host's [quant] table, throwing
// tsr::sdk::Failure (or std::exception) for an unknown key or a bad value:
//   static void option_set(std::string_view key, double value);
// and optionally (ABI 2.10) a row quantized knowing each column's importance (the mean of
// x^2 at the weights' input over calibration text, llama.cpp's importance matrix):
//   static void quantize_row_weighted(const float* x, uint8_t* row, int64_t n, const float* importance);
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
#if TSR_SDK_ABI_AT_LEAST(2, 10)
    static const tsr_quant_iface t = {sizeof(tsr_quant_iface), Impl::kScheme, Impl::kDtype, Impl::kBlock,
                                      row_bytes, quantize, dequantize, dot, kernels,
                                      kHasOptions ? option_set : nullptr,
                                      kHasWeighted ? quantize_weighted : nullptr};
#elif TSR_SDK_ABI_AT_LEAST(2, 4)
    static const tsr_quant_iface t = {sizeof(tsr_quant_iface), Impl::kScheme, Impl::kDtype, Impl::kBlock,
                                      row_bytes, quantize, dequantize, dot, kernels,
                                      kHasOptions ? option_set : nullptr};
#else
    static const tsr_quant_iface t = {sizeof(tsr_quant_iface), Impl::kScheme, Impl::kDtype, Impl::kBlock,
                                      row_bytes, quantize, dequantize, dot, kernels};
#endif
    return t;
  }

 private:
  static constexpr bool kHasCpuMatmul = requires(const QuantMatmul& a) { Impl::cpu_matmul(a); };
  static constexpr bool kHasOptions = requires(std::string_view k, double v) { Impl::option_set(k, v); };
  static constexpr bool kHasWeighted = requires(const float* x, uint8_t* row, int64_t n) {
    Impl::quantize_row_weighted(x, row, n, x);
  };

  static tsr_status option_set(const char* key, double value, tsr_error** error) {
    return boundary(error, [&] {
      require(key != nullptr, "option_set: NULL key");
      if constexpr (kHasOptions) Impl::option_set(key, value);
    });
  }

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

  static tsr_status quantize_weighted(const float* x, int64_t rows, int64_t cols, const float* importance, void* out,
                                      tsr_error** error) {
    return boundary(error, [&] {
      check_shape(rows, cols, "quantize_weighted");
      require(x != nullptr && importance != nullptr && out != nullptr, "quantize_weighted: NULL buffer");
      if constexpr (kHasWeighted) {
        const int64_t bytes = Impl::row_bytes(cols);
        auto* o = static_cast<uint8_t*>(out);
        for (int64_t r = 0; r < rows; ++r) Impl::quantize_row_weighted(x + r * cols, o + r * bytes, cols, importance);
      }
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

  static void run_cpu_matmul(const QuantMatmul& a) {
    check_shape(a.n, a.k, "matmul");
    require(a.m >= 0, "matmul: m is negative");
    require(a.x != nullptr && a.w != nullptr && a.y != nullptr, "matmul: NULL buffer");
    require(a.x_stride >= a.k && a.y_stride >= a.n && a.w_row_bytes >= Impl::row_bytes(a.k),
            "matmul: strides smaller than the rows");
    Impl::cpu_matmul(a);
  }

#if TSR_SDK_ABI_AT_LEAST(2, 0)
  // A 2-d tensor of non-negative shape and row stride.
  static const tsr_tensor& matrix(const tsr_tensor* t, const char* what) {
    require(t != nullptr && t->struct_size >= sizeof(tsr_tensor) && t->ndim == 2,
            std::string("matmul: ") + what + " must be a 2-d tensor");
    require(t->shape[0] >= 0 && t->shape[1] >= 0 && t->strides[0] >= 0, std::string("matmul: ") + what + " has a negative shape or stride");
    return *t;
  }

  // The tensors of the call as QuantMatmul's rows and strides; CPU kernels only (the
  // stream is NULL: they run before they return).
  static tsr_status cpu_matmul(const tsr_quant_matmul_args* args, tsr_error** error) {
    return boundary(error, [&] {
      const tsr_quant_matmul_args& a = checked(args, "matmul");
      const tsr_matmul_params& p = checked(a.params, "matmul params");
      const tsr_tensor &x = matrix(p.x, "x"), &w = matrix(p.w, "w"), &y = matrix(p.out, "out");
      require(x.dtype == TSR_DTYPE_F32 && y.dtype == TSR_DTYPE_F32 && x.strides[1] == 4 && y.strides[1] == 4 &&
                  x.strides[0] % 4 == 0 && y.strides[0] % 4 == 0,
              "matmul: x and out must be contiguous f32 rows");
      require(w.dtype == Impl::kDtype, "matmul: w is not of this scheme's dtype");
      require(y.shape[0] == x.shape[0] && y.shape[1] == w.shape[0] && w.shape[1] == x.shape[1],
              "matmul: out must be [rows of x, rows of w] and w as wide as x");
      run_cpu_matmul(QuantMatmul{static_cast<const float*>(x.data), x.strides[0] / 4, x.shape[0], x.shape[1],
                                 static_cast<const uint8_t*>(w.data), w.strides[0], w.shape[0],
                                 static_cast<float*>(y.data), y.strides[0] / 4, a.n_threads});
    });
  }
#else
  static tsr_status cpu_matmul(const float* x, int64_t x_stride, int64_t m, int64_t k, const void* w,
                               int64_t w_row_bytes, int64_t n, float* y, int64_t y_stride, int32_t n_threads,
                               tsr_error** error) {
    return boundary(error, [&] {
      run_cpu_matmul(QuantMatmul{x, x_stride, m, k, static_cast<const uint8_t*>(w), w_row_bytes, n, y, y_stride,
                                 n_threads});
    });
  }
#endif

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
