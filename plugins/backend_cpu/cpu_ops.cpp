#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu_dtype.h"
#include "cpu_kv_format.h"
#include "cpu_ops.h"
#include "cpu_simd.h"
#include "cpu_tensor.h"
#include "tessera/sdk/op_checks.hpp"
#include "tessera/sdk/status.hpp"

namespace tsr::cpu {

using sdk::require;

namespace {

// Elements (or multiply-adds) below which an op runs on the calling thread alone: waking
// the pool costs more than it saves, and far more when the cores are busy.
constexpr int64_t kParallelMin = 1 << 15;

}  // namespace

void op_get_rows(OpContext& ctx, const tsr_get_rows_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "get_rows out");
  const Matrix table = as_matrix(p.table, "get_rows table");
  require(is_weight_dtype(table.dtype), "get_rows: unsupported table dtype");
  const int32_t* ids = as_i32(p.ids, out.rows, "get_rows ids");
  require(out.cols == table.cols, "get_rows: out and table widths differ");
  for (int64_t i = 0; i < out.rows; ++i) {
    require(ids[i] >= 0 && ids[i] < table.rows,
            "get_rows: id " + std::to_string(ids[i]) + " out of range [0, " +
                std::to_string(table.rows) + ")");
  }
#pragma omp parallel for num_threads(ctx.n_threads) if (out.rows * out.cols >= kParallelMin)
  for (int64_t i = 0; i < out.rows; ++i) {
    row_to_f32(table.dtype, table.row<uint8_t>(ids[i]), out.row<float>(i), table.cols);
  }
}

void op_rms_norm(OpContext& ctx, const tsr_rms_norm_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "rms_norm out");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "rms_norm x");
  const Matrix w = as_matrix(p.weight, TSR_DTYPE_F32, "rms_norm weight");
  require_same_shape(out, x, "rms_norm");
  require(w.rows * w.cols == x.cols, "rms_norm: weight length differs from row length");
  require(p.eps >= 0, "rms_norm: negative eps");
  const float* weight = w.row<float>(0);
#pragma omp parallel for num_threads(ctx.n_threads) if (x.rows * x.cols >= kParallelMin)
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* in = x.row<float>(r);
    float* o = out.row<float>(r);
    double sum = 0;  // as ggml: the sum of squares in double
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < x.cols; ++c) sum += static_cast<double>(in[c]) * in[c];
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / x.cols) + p.eps);
    for (int64_t c = 0; c < x.cols; ++c) o[c] = in[c] * scale * weight[c];
  }
}

namespace {

// YaRN's mix of the interpolated and the extrapolated angle (backend.h; llama.cpp's
// rope_yarn). Off (theta = the interpolated angle) when ext_factor is 0.
double yarn_theta(const tsr_rope_params& p, int pair, double interp, double extrap) {
  if (p.ext_factor == 0) return interp;
  const double y = (pair - double(p.corr_low)) / std::max(0.001, double(p.corr_high) - p.corr_low);
  const double mix = (1.0 - std::min(1.0, std::max(0.0, y))) * p.ext_factor;
  return interp * (1 - mix) + extrap * mix;
}

}  // namespace

void op_rope(OpContext& ctx, const tsr_rope_params& p) {
  require(p.x != nullptr && p.x->ndim == 3, "rope: x must be [n, heads, head_dim]");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "rope x");
  const int64_t heads = p.x->shape[1], head_dim = p.x->shape[2];
  const int32_t* pos = as_i32(p.positions, x.rows, "rope positions");
  const sdk::RopeScalars rs = sdk::check_rope_scalars(p, head_dim);
  const int half = p.n_rot / 2;
  const float* factors = nullptr;  // ABI 1.4; absent from an older caller's struct
  if (TSR_STRUCT_HAS(&p, tsr_rope_params, freq_factors) && p.freq_factors != nullptr) {
    const Matrix f = as_matrix(p.freq_factors, TSR_DTYPE_F32, "rope freq_factors");
    require(f.rows == 1 && f.cols == half, "rope: freq_factors must be [n_rot / 2]");
    factors = f.row<float>(0);
  }
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(double(p.freq_base), -2.0 * i / p.n_rot);
    if (factors != nullptr) {
      require(std::isfinite(factors[i]) && factors[i] > 0, "rope: freq_factors must be finite and > 0");
      inv_freq[i] /= factors[i];
    }
  }
#pragma omp parallel for num_threads(ctx.n_threads) if (x.rows * x.cols >= kParallelMin)
  for (int64_t r = 0; r < x.rows; ++r) {
    std::vector<float> cs(half), sn(half);
    for (int i = 0; i < half; ++i) {
      const double extrap = double(pos[r]) * inv_freq[i];
      const double theta = yarn_theta(p, i, extrap * p.freq_scale, extrap);
      cs[i] = static_cast<float>(std::cos(theta) * rs.mscale);
      sn[i] = static_cast<float>(std::sin(theta) * rs.mscale);
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x.row<float>(r) + h * head_dim;
      for (int i = 0; i < half; ++i) {
        // NORMAL pairs adjacent dims, NEOX pairs dim i with dim i + n_rot/2.
        const int a = rs.neox ? i : 2 * i;
        const int b = rs.neox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs[i] - x1 * sn[i];
        v[b] = x0 * sn[i] + x1 * cs[i];
      }
    }
  }
}

// Caches of any KV dtype (cpu_kv_format.h): each head of each row of k and v is stored as
// one row of the cache's dtype (blocks along the head dimension; an fp8 scale per head).
void op_kv_write(OpContext& ctx, const tsr_kv_write_params& p) {
  const Matrix kc = as_matrix(p.k_cache, "kv_write k_cache");
  const Matrix vc = as_matrix(p.v_cache, "kv_write v_cache");
  const Matrix k = as_matrix(p.k, TSR_DTYPE_F32, "kv_write k");
  const Matrix v = as_matrix(p.v, TSR_DTYPE_F32, "kv_write v");
  for (const Matrix* c : {&kc, &vc}) {
    require(is_kv_dtype(c->dtype), [&] {
      return std::string("kv_write: the CPU backend has no KV cache of dtype ") + tsr_dtype_name(c->dtype);
    });
  }
  require(kc.rows == vc.rows && kc.cols == vc.cols, "kv_write: k_cache and v_cache shapes differ");
  require_same_shape(k, v, "kv_write k/v");
  require(k.cols == kc.cols, "kv_write: row width differs from the cache's");
  const int32_t* slots = as_i32(p.slot_mapping, k.rows, "kv_write slot_mapping");
  for (int64_t i = 0; i < k.rows; ++i) {
    require(slots[i] >= -1 && slots[i] < kc.rows,
            "kv_write: slot " + std::to_string(slots[i]) + " out of range");
  }
  const int64_t hd = p.k_cache->shape[p.k_cache->ndim - 1], heads = k.cols / hd;
  require(p.v_cache->shape[p.v_cache->ndim - 1] == hd, "kv_write: k_cache and v_cache heads differ");
  const int64_t k_head = row_bytes(kc.dtype, hd), v_head = row_bytes(vc.dtype, hd);
  for (int64_t i = 0; i < k.rows; ++i) {
    if (slots[i] < 0) continue;
    for (int64_t h = 0; h < heads; ++h) {
      kv_row_write(kc.dtype, k.row<float>(i) + h * hd, kc.row<uint8_t>(slots[i]) + h * k_head, hd);
      kv_row_write(vc.dtype, v.row<float>(i) + h * hd, vc.row<uint8_t>(slots[i]) + h * v_head, hd);
    }
  }
  (void)ctx;
}

namespace {

void silu_mul_row_portable(const float* g, const float* u, float* o, int64_t n) {
  for (int64_t c = 0; c < n; ++c) o[c] = g[c] / (1.0f + std::exp(-g[c])) * u[c];
}

__attribute__((target(TSR_AVX512_TARGET)))
void silu_mul_row_avx512(const float* g, const float* u, float* o, int64_t n) {
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 m = first_lanes(n - c);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + c);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), gv));
    const __m512 silu = _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(o + c, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, u + c)));
  }
}

}  // namespace

void op_silu_mul(OpContext& ctx, const tsr_silu_mul_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "silu_mul out");
  const Matrix g = as_matrix(p.gate, TSR_DTYPE_F32, "silu_mul gate");
  const Matrix u = as_matrix(p.up, TSR_DTYPE_F32, "silu_mul up");
  require_same_shape(out, g, "silu_mul");
  require_same_shape(out, u, "silu_mul");
  const bool avx512 = has_avx512();
#pragma omp parallel for num_threads(ctx.n_threads) if (out.rows * out.cols >= kParallelMin)
  for (int64_t r = 0; r < out.rows; ++r) {
    const float* gr = g.row<float>(r);
    const float* ur = u.row<float>(r);
    float* o = out.row<float>(r);
    (avx512 ? silu_mul_row_avx512 : silu_mul_row_portable)(gr, ur, o, out.cols);
  }
}

void op_add(OpContext& ctx, const tsr_add_params& p) {
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "add out");
  const Matrix a = as_matrix(p.a, TSR_DTYPE_F32, "add a");
  const Matrix b = as_matrix(p.b, TSR_DTYPE_F32, "add b");
  require_same_shape(out, a, "add");
  require_same_shape(out, b, "add");
#pragma omp parallel for num_threads(ctx.n_threads) if (out.rows * out.cols >= kParallelMin)
  for (int64_t r = 0; r < out.rows; ++r) {
    const float* ar = a.row<float>(r);
    const float* br = b.row<float>(r);
    float* o = out.row<float>(r);
    for (int64_t c = 0; c < out.cols; ++c) o[c] = ar[c] + br[c];
  }
}

void op_copy_blocks(OpContext& ctx, const tsr_copy_blocks_params& p) {
  require(p.n_caches >= 0 && (p.n_caches == 0 || p.caches != nullptr),
          "copy_blocks: caches missing");
  require(p.block_size > 0, "copy_blocks: block_size must be > 0");
  require(p.pairs != nullptr && p.pairs->ndim == 2 && p.pairs->shape[1] == 2,
          "copy_blocks: pairs must be [n, 2]");
  int64_t n_values = 0;
  const int32_t* pairs = as_i32(p.pairs, -1, "copy_blocks pairs", &n_values);
  // Every cache and pair is checked before anything is copied: a failed call changes nothing.
  std::vector<Matrix> caches;
  for (int32_t c = 0; c < p.n_caches; ++c) {
    caches.push_back(as_matrix(p.caches[c], "copy_blocks cache"));
    const int64_t n_blocks = caches.back().rows / p.block_size;
    for (int64_t i = 0; i < n_values; ++i) {
      require(pairs[i] >= 0 && pairs[i] < n_blocks, "copy_blocks: block id out of range");
    }
  }
  // Row by row, copying only each row's own bytes: a padded row stride may span another
  // tensor's rows (K and V interleaved), and the last row's padding may lie past the buffer.
  for (const Matrix& cache : caches) {
    const auto bytes = static_cast<size_t>(cache.row_bytes);
    for (int64_t i = 0; i + 1 < n_values; i += 2) {
      for (int64_t r = 0; r < p.block_size; ++r) {
        std::memmove(cache.row<uint8_t>(int64_t(pairs[i + 1]) * p.block_size + r),
                     cache.row<uint8_t>(int64_t(pairs[i]) * p.block_size + r), bytes);
      }
    }
  }
  (void)ctx;
}

bool op_supports(tsr_op op, tsr_dtype dtype) {
  switch (op) {
    case TSR_OP_MATMUL: case TSR_OP_MATMUL_ID:
    case TSR_OP_GET_ROWS: return is_weight_dtype(dtype);
    case TSR_OP_COPY_BLOCKS: return row_bytes(dtype, 32) > 0;
    case TSR_OP_CAST: return cast_supports(dtype, dtype);
    case TSR_OP_KV_WRITE: case TSR_OP_ATTENTION: return is_kv_dtype(dtype);
    case TSR_OP_RMS_NORM: case TSR_OP_ROPE:
    case TSR_OP_SILU_MUL: case TSR_OP_ADD: case TSR_OP_MUL: case TSR_OP_SCALE: case TSR_OP_GELU:
    case TSR_OP_GELU_MUL: case TSR_OP_LAYER_NORM: case TSR_OP_BIAS_ADD: case TSR_OP_SOFTMAX: case TSR_OP_TOP_K:
    case TSR_OP_SOFTCAP: case TSR_OP_MOE_COMBINE: case TSR_OP_SWIGLU_OAI: return dtype == TSR_DTYPE_F32;
    default: return false;
  }
}

}  // namespace tsr::cpu
