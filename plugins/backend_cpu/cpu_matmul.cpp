// out = x · wᵀ. Packed weights go to their own kernels (cpu_packed_matmul.cpp); of the
// others, F32 weights with many rows of x go to oneDNN's GEMM, Q8_0/Q4_0/Q5_0/IQ4_NL weights
// to the int8 kernels (cpu_quant_matmul.cpp), K-quants and IQ4_XS to theirs against Q8_K
// activations (cpu_kquant_matmul.cpp), and everything else streams each weight row once
// for all rows of x (decode is bound by reading weights).
#include <omp.h>

#include <dnnl.hpp>
#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "cpu_dtype.h"
#include "cpu_kquant_matmul.h"
#include "cpu_ops.h"
#include "cpu_packed_matmul.h"
#include "cpu_quant_matmul.h"
#include "cpu_row_decode.h"
#include "cpu_simd.h"
#include "cpu_tensor.h"
#include "tessera/quant.h"
#include "tessera/sdk/cpu_dot.hpp"
#include "tessera/sdk/status.hpp"

namespace tsr::cpu {

using sdk::require;

// Below this many rows of x, the streaming kernel beats GEMM setup costs.
constexpr int64_t kGemmMinRows = 16;
// Q8_0/Q4_0 and F16 weights stay on the streaming kernels (int8, F16C) up to this many
// rows (decode batches): decoding every weight for the GEMM costs more than the GEMM saves
// until the rows are many (prefill).
constexpr int64_t kDecodedGemmMinRows = 64;
// Primitive cache bound: prompt lengths vary, so shapes do too.
constexpr size_t kMaxCachedPrimitives = 64;
// Weight rows decoded at a time for the GEMM path (bounds the scratch memory).
constexpr int64_t kDecodeChunkRows = 1024;
// Multiply-adds below which the pool is not woken (see cpu_ops.cpp).
constexpr int64_t kParallelMinMacs = 1 << 16;

struct MatmulCache {
  using dt = dnnl::memory::data_type;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
  std::map<Key, dnnl::matmul> primitives;
  std::vector<uint16_t> x_bf16, w_bf16;  // scratch of the bf16 path
  std::vector<float> w_f32;              // scratch of the f16 path

  // x [n, k] and w [m, k] (row-major, used as wᵀ) of type `in`; out [n, m] f32.
  dnnl::matmul& get(dt in, int64_t n, int64_t k, int64_t m, int64_t ldx, int64_t ldw, int64_t ldo) {
    const Key key{static_cast<int>(in), n, k, m, ldx, ldw, ldo};
    auto it = primitives.find(key);
    if (it != primitives.end()) return it->second;
    if (primitives.size() >= kMaxCachedPrimitives) primitives.clear();
    dnnl::memory::desc x_md({n, k}, in, {ldx, 1});
    dnnl::memory::desc w_md({k, m}, in, {1, ldw});
    dnnl::memory::desc o_md({n, m}, dt::f32, {ldo, 1});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x_md, w_md, o_md), engine);
    return primitives.emplace(key, dnnl::matmul(pd)).first->second;
  }

  void run(dt in, int64_t n, int64_t k, int64_t m, const void* x, int64_t ldx, const void* w,
           int64_t ldw, float* out, int64_t ldo) {
    dnnl::matmul& prim = get(in, n, k, m, ldx, ldw, ldo);
    dnnl::memory xm({{n, k}, in, {ldx, 1}}, engine, const_cast<void*>(x));
    dnnl::memory wm({{k, m}, in, {1, ldw}}, engine, const_cast<void*>(w));
    dnnl::memory om({{n, m}, dt::f32, {ldo, 1}}, engine, out);
    prim.execute(stream, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, om}});
    stream.wait();
  }
};

OpContext::OpContext() : matmul(std::make_unique<MatmulCache>()) {}
OpContext::~OpContext() = default;

namespace {

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
  ctx.matmul->run(MatmulCache::dt::f32, x.rows, x.cols, w.rows, x.data, x.row_stride / 4, w.data,
                  w.row_stride / 4, reinterpret_cast<float*>(out.data), out.row_stride / 4);
}

// Prefill against quantized or 16-bit weights: weight rows are decoded in chunks into a
// dense scratch matrix and multiplied by oneDNN's GEMM. Quantized weights (Q8_0, Q4_0)
// and BF16 go through bf16 (the AVX-512 BF16 GEMM doubles f32's throughput, and the
// weights carry less precision than bf16 anyway); F16 through f32, so F16 models keep the
// precision of their weights.
// decode_row(j, dst) writes weight row j as k floats.
template <class DecodeRow>
void gemm_decoded(OpContext& ctx, const Matrix& out, const Matrix& x, int64_t w_rows, bool bf16,
                  const DecodeRow& decode_row) {
  const OmpThreadsScope threads(ctx.n_threads);
  MatmulCache& c = *ctx.matmul;
  const int64_t k = x.cols;
  const int64_t chunk = std::min<int64_t>(w_rows, kDecodeChunkRows);
  if (bf16) {
    c.x_bf16.resize(size_t(x.rows * k));
    c.w_bf16.resize(size_t(chunk * k));
#pragma omp parallel for num_threads(ctx.n_threads)
    for (int64_t r = 0; r < x.rows; ++r) f32_to_bf16_rne(x.row<float>(r), &c.x_bf16[size_t(r * k)], k);
  } else {
    c.w_f32.resize(size_t(chunk * k));
  }
  for (int64_t j0 = 0; j0 < w_rows; j0 += chunk) {
    const int64_t rows = std::min(chunk, w_rows - j0);
#pragma omp parallel num_threads(ctx.n_threads)
    {
      std::vector<float> tmp(bf16 ? size_t(k) : 0);
#pragma omp for schedule(static)
      for (int64_t j = 0; j < rows; ++j) {
        if (!bf16) {
          decode_row(j0 + j, &c.w_f32[size_t(j * k)]);
          continue;
        }
        decode_row(j0 + j, tmp.data());
        f32_to_bf16_rne(tmp.data(), &c.w_bf16[size_t(j * k)], k);
      }
    }
    float* dst = out.row<float>(0) + j0;
    if (bf16) {
      c.run(MatmulCache::dt::bf16, x.rows, k, rows, c.x_bf16.data(), k, c.w_bf16.data(), k, dst,
            out.row_stride / 4);
    } else {
      c.run(MatmulCache::dt::f32, x.rows, k, rows, x.data, x.row_stride / 4, c.w_f32.data(), k, dst,
            out.row_stride / 4);
    }
  }
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
      for (int64_t i = 0; i < x.rows; ++i) out.row<float>(i)[j] = sdk::dot_f32(x.row<float>(i), wr, x.cols);
    }
  }
}

}  // namespace

// A matmul of a quant plugin's weights on that plugin's kernels; they check their operands.
void plugin_matmul(OpContext& ctx, const tsr_quant_kernels& k, const tsr_matmul_params& p) {
  const tsr_quant_matmul_args args{sizeof(args), &k, &p, nullptr, ctx.n_threads, 0};
  tsr_error* error = nullptr;
  const tsr_status status = k.matmul(&args, &error);
  if (status == TSR_STATUS_OK) return;
  const tsr_host_api* host = sdk::g_host;
  const std::string message = error != nullptr && host != nullptr ? host->error_message(error) : "no details given";
  if (host != nullptr) host->error_free(error);
  throw sdk::Failure(status, "matmul on the kernels of a quant plugin: " + message);
}

void op_matmul(OpContext& ctx, const tsr_matmul_params& p) {
  if (p.w != nullptr && p.w->struct_size >= sizeof(tsr_tensor)) {
    if (const tsr_quant_kernels* k = ctx.plugin_kernels.find(p.w->dtype)) return plugin_matmul(ctx, *k, p);
  }
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "matmul out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "matmul x");
  if (p.w != nullptr && p.w->dtype == TSR_DTYPE_PACKED) {
    const PackedWeight w = as_packed(p.w, "matmul w");
    require(x.cols == w.cols, [&] {
      return "matmul: x has " + std::to_string(x.cols) + " columns, w has " + std::to_string(w.cols);
    });
    require(out.rows == x.rows && out.cols == w.rows, "matmul: out must be [n, m]");
    return packed_matmul(ctx, out, x, w);
  }
  const Matrix w = as_matrix(p.w, "matmul w");
  require(is_weight_dtype(w.dtype), "matmul: unsupported weight dtype " + std::to_string(w.dtype));
  require(x.cols == w.cols, "matmul: x has " + std::to_string(x.cols) + " columns, w has " +
                                std::to_string(w.cols));
  require(out.rows == x.rows && out.cols == w.rows, "matmul: out must be [n, m]");
  // oneDNN takes strides in elements; decoded weights are repacked, so only x and out count.
  const bool io_aligned = x.row_stride % 4 == 0 && out.row_stride % 4 == 0;
  if (w.dtype == TSR_DTYPE_F32 && x.rows >= kGemmMinRows && io_aligned && w.row_stride % 4 == 0) {
    gemm_onednn(ctx, out, x, w);
  } else if (w.dtype != TSR_DTYPE_F32 && io_aligned && (w.dtype == TSR_DTYPE_F16 || sdk::cpu_has_bf16()) &&
             x.rows >= (w.dtype == TSR_DTYPE_BF16 ? kGemmMinRows : kDecodedGemmMinRows)) {
    gemm_decoded(ctx, out, x, w.rows, w.dtype != TSR_DTYPE_F16, [&](int64_t j, float* dst) {
      if (!decode_row_avx512(w.dtype, w.row<uint8_t>(j), dst, w.cols)) row_to_f32(w.dtype, w.row<uint8_t>(j), dst, w.cols);
    });
  } else if (quant_matmul_supported(w.dtype)) {
    quant_matmul(ctx, out, x, w);
  } else if (kquant_matmul_supported(w.dtype)) {
    kquant_matmul(ctx, out, x, w);
  } else if (w.dtype == TSR_DTYPE_F16 && has_avx2()) {
    f16_matmul(ctx, out, x, w);
  } else {
    gemv_streaming(ctx, out, x, w);
  }
}

}  // namespace tsr::cpu
