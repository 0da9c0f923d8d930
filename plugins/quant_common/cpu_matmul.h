// The CPU kernel of the quant plugins that bring their own: for each weight row (rows
// split over the OpenMP pool), decode it once into f32 and take its dot product with
// every activation row. Decode is memory-bound work done once per weight per call, so a
// decode step reads each weight once whatever the batch; the dot products run on
// AVX-512, AVX2 or portable code, chosen at run time (sdk/cpu_dot.hpp; TESSERA_CPU_MAX_ISA
// caps the choice).
#pragma once

#include <cstdint>

namespace tsr::quant_plugin {

struct MatmulArgs {
  const float* x;
  int64_t x_stride, m, k;
  const uint8_t* w;
  int64_t w_row_bytes, n;
  float* y;
  int64_t y_stride;
  int32_t n_threads;
};

using DecodeRow = void (*)(const uint8_t* row, float* out, int64_t k);

void cpu_matmul_dequant(const MatmulArgs& a, DecodeRow decode);

}  // namespace tsr::quant_plugin
