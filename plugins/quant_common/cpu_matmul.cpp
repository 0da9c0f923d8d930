#include "plugins/quant_common/cpu_matmul.h"

#include <omp.h>

#include <cstddef>
#include <vector>

#include "tessera/sdk/cpu_dot.hpp"
#include "tessera/sdk/status.hpp"

namespace tsr::quant_plugin {

void cpu_matmul_dequant(const MatmulArgs& a, DecodeRow decode) {
  sdk::require(sdk::cpu_isa_cap_error().empty(), sdk::cpu_isa_cap_error());
  const int threads = a.n_threads > 0 ? a.n_threads : omp_get_max_threads();
  // Small matrices are not worth waking the pool (its barrier costs more than the work).
  const bool big = a.n * a.k * (a.m + 1) >= (int64_t(1) << 16);
#pragma omp parallel num_threads(threads) if (big)
  {
    // One buffer per thread and call, not thread_local: this code lives in a dlopen'ed
    // plugin, and a thread_local object would outlive the library in the host's OpenMP
    // pool threads (its destructor and TLS block point into unmapped code after dlclose).
    std::vector<float> row(static_cast<size_t>(a.k));
#pragma omp for schedule(static)
    for (int64_t j = 0; j < a.n; ++j) {
      decode(a.w + j * a.w_row_bytes, row.data(), a.k);
      for (int64_t i = 0; i < a.m; ++i) a.y[i * a.y_stride + j] = sdk::dot_f32(a.x + i * a.x_stride, row.data(), a.k);
    }
  }
}

}  // namespace tsr::quant_plugin
