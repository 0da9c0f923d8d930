// The in-tree quant plugins as one template over a weight format (quant_formats/): the
// format, described for the SDK's QuantPlugin (sdk/include/tessera/sdk/quant.hpp), plus
// the CPU kernels where the format brings its own (int4_g128, fp8_e4m3; the CPU backend
// runs Q8_0/Q4_0 natively).
//
// Format provides:
//   static constexpr const char* kName; static constexpr tsr_dtype kDtype;
//   static constexpr int32_t kBlock;                  // row lengths are multiples of it
//   static constexpr bool kCpuKernels;                // whether to offer cpu_matmul
//   static int64_t row_bytes(int64_t n);
//   static void quantize_row(const float* x, uint8_t* row, int64_t n);
//   static void dequantize_row(const uint8_t* row, float* y, int64_t n);
#pragma once

#include <type_traits>

#include "plugins/quant_common/cpu_matmul.h"
#include "tessera/sdk/quant.hpp"

namespace tsr::quant_plugin {

template <class Format>
struct Scheme : Format {
  static constexpr const char* kScheme = Format::kName;
};

template <class Format>
struct SchemeWithCpuKernels : Scheme<Format> {
  static void cpu_matmul(const sdk::QuantMatmul& a) {
    cpu_matmul_dequant(MatmulArgs{a.x, a.x_stride, a.m, a.k, a.w, a.w_row_bytes, a.n, a.y, a.y_stride, a.n_threads},
                       Format::dequantize_row);
  }
};

// The SDK offers kernels("cpu") exactly when the scheme has a cpu_matmul.
template <class Format>
using SdkScheme = std::conditional_t<Format::kCpuKernels, SchemeWithCpuKernels<Format>, Scheme<Format>>;

}  // namespace tsr::quant_plugin

#define TSR_QUANT_PLUGIN(Format, name, version) \
  TSR_SDK_QUANT_PLUGIN(::tsr::quant_plugin::SdkScheme<Format>, name, version)
