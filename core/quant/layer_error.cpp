#include "core/quant/layer_error.h"

#include <dnnl.h>

#include <vector>

#include "base/error.h"

namespace tsr::quant {

void sgemm(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (dnnl_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) != dnnl_success) {
    throw Error("oneDNN sgemm failed");
  }
}

double layer_output_error(std::span<const float> w, std::span<const float> q, int64_t rows, int64_t cols,
                          std::span<const float> hessian) {
  std::vector<float> delta(w.size()), dh(w.size());
  for (size_t i = 0; i < w.size(); ++i) delta[i] = w[i] - q[i];
  sgemm('N', 'N', rows, cols, cols, 1.0f, delta.data(), cols, hessian.data(), cols, 0.0f, dh.data(), cols);
  double err = 0;
  for (size_t i = 0; i < w.size(); ++i) err += double(delta[i]) * dh[i];
  return err;
}

}  // namespace tsr::quant
