// out = x · wᵀ. F32 weights with many rows of x go to oneDNN's GEMM; everything else
// streams each weight row once for all rows of x (decode is bound by reading weights).
#include <omp.h>

#include <dnnl.hpp>
#include <map>
#include <tuple>
#include <vector>

#include "cpu_dtype.h"
#include "cpu_ops.h"
#include "cpu_tensor.h"
#include "tessera/sdk/status.hpp"

namespace tsr::cpu {

using sdk::require;

// Below this many rows of x, the streaming kernel beats GEMM setup costs.
constexpr int64_t kGemmMinRows = 16;
// Primitive cache bound: prompt lengths vary, so shapes do too.
constexpr size_t kMaxCachedPrimitives = 64;
// Multiply-adds below which the pool is not woken (see cpu_ops.cpp).
constexpr int64_t kParallelMinMacs = 1 << 16;

struct MatmulCache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
  std::map<Key, dnnl::matmul> primitives;

  dnnl::matmul& get(int64_t n, int64_t k, int64_t m, int64_t ldx, int64_t ldw, int64_t ldo) {
    const Key key{n, k, m, ldx, ldw, ldo};
    auto it = primitives.find(key);
    if (it != primitives.end()) return it->second;
    if (primitives.size() >= kMaxCachedPrimitives) primitives.clear();
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc x_md({n, k}, dt::f32, {ldx, 1});
    dnnl::memory::desc w_md({k, m}, dt::f32, {1, ldw});  // w is [m, k] row-major = wᵀ
    dnnl::memory::desc o_md({n, m}, dt::f32, {ldo, 1});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x_md, w_md, o_md), engine);
    return primitives.emplace(key, dnnl::matmul(pd)).first->second;
  }
};

OpContext::OpContext() : matmul(std::make_unique<MatmulCache>()) {}
OpContext::~OpContext() = default;

namespace {

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
float dot_f32(const float* a, const float* b, int64_t n) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// oneDNN sizes its parallel regions by omp_get_max_threads(), a setting of the calling
// thread that backend_create made on its own thread only and that every later
// backend_create overwrites; so each call sets this backend's count and restores the
// caller's.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreadsScope() { omp_set_num_threads(saved_); }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_;
};

void gemm_onednn(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix& w) {
  const OmpThreadsScope threads(ctx.n_threads);
  dnnl::matmul& prim = ctx.matmul->get(x.rows, x.cols, w.rows, x.row_stride / 4,
                                       w.row_stride / 4, out.row_stride / 4);
  auto& cache = *ctx.matmul;
  using dt = dnnl::memory::data_type;
  dnnl::memory xm({{x.rows, x.cols}, dt::f32, {x.row_stride / 4, 1}}, cache.engine, x.data);
  dnnl::memory wm({{w.cols, w.rows}, dt::f32, {1, w.row_stride / 4}}, cache.engine, w.data);
  dnnl::memory om({{out.rows, out.cols}, dt::f32, {out.row_stride / 4, 1}}, cache.engine,
                  out.data);
  prim.execute(cache.stream, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, om}});
  cache.stream.wait();
}

void gemv_streaming(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix& w) {
  const bool big = w.rows * w.cols * x.rows >= kParallelMinMacs;
#pragma omp parallel num_threads(ctx.n_threads) if (big)
  {
    std::vector<float> row(w.dtype == TSR_DTYPE_F32 ? 0 : w.cols);
#pragma omp for schedule(static)
    for (int64_t j = 0; j < w.rows; ++j) {
      const float* wr = w.row<float>(j);
      if (w.dtype != TSR_DTYPE_F32) {
        row_to_f32(w.dtype, w.row<uint8_t>(j), row.data(), w.cols);
        wr = row.data();
      }
      for (int64_t i = 0; i < x.rows; ++i) out.row<float>(i)[j] = dot_f32(x.row<float>(i), wr, x.cols);
    }
  }
}

}  // namespace

void op_matmul(OpContext& ctx, const tsr_matmul_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "matmul out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "matmul x");
  const Matrix w = as_matrix(p.w, "matmul w");
  require(is_weight_dtype(w.dtype), "matmul: unsupported weight dtype " + std::to_string(w.dtype));
  require(x.cols == w.cols, "matmul: x has " + std::to_string(x.cols) + " columns, w has " +
                                std::to_string(w.cols));
  require(out.rows == x.rows && out.cols == w.rows, "matmul: out must be [n, m]");
  const bool aligned = x.row_stride % 4 == 0 && w.row_stride % 4 == 0 && out.row_stride % 4 == 0;
  if (w.dtype == TSR_DTYPE_F32 && x.rows >= kGemmMinRows && aligned) {
    gemm_onednn(ctx, out, x, w);
  } else {
    gemv_streaming(ctx, out, x, w);
  }
}

}  // namespace tsr::cpu
