// Paged causal attention with GQA on the CPU: one work item per (query row, head), two
// passes over its keys (scores, then the weighted values). The AVX-512 kernel keeps the
// query and the output accumulators in registers (head_dim up to 128); the portable one
// serves other machines and wider heads.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu_ops.h"
#include "cpu_simd.h"
#include "cpu_tensor.h"
#include "tessera/sdk/status.hpp"

namespace tsr::cpu {

using sdk::require;

namespace {

// Multiply-adds below which a call runs on the calling thread alone (see cpu_ops.cpp).
constexpr int64_t kParallelMin = 1 << 15;
// Head dims the AVX-512 kernel holds in registers: 16 floats per chunk.
constexpr int64_t kMaxChunks = 8;

struct AttentionShape {
  int64_t n, heads, kv_heads, head_dim, num_seqs, max_blocks, num_slots;
};

// Checks that every key a query may read lies inside its block table and the cache.
void validate_attention(const AttentionShape& s, int32_t block_size, const int32_t* tables,
                        const int32_t* seq_lens, const int32_t* qsl, const int32_t* pos) {
  require(qsl[0] == 0 && qsl[s.num_seqs] == s.n,
          "attention: query_start_loc must run from 0 to the number of tokens");
  for (int64_t q = 0; q < s.num_seqs; ++q) {
    // Bounded by n as well: a later decrease must not let these rows run past the batch.
    require(qsl[q + 1] >= qsl[q] && qsl[q + 1] <= s.n,
            "attention: query_start_loc must not decrease nor pass the number of tokens");
    // In 64 bits: seq_len + block_size - 1 overflows int32 for seq_len near INT32_MAX.
    const int64_t blocks = (int64_t{seq_lens[q]} + block_size - 1) / block_size;
    require(seq_lens[q] >= 0 && blocks <= s.max_blocks,
            "attention: seq_len " + std::to_string(seq_lens[q]) + " exceeds the block table");
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t block = tables[q * s.max_blocks + b];
      require(block >= 0 && (block + 1) * block_size <= s.num_slots,
              "attention: block " + std::to_string(block) + " outside the cache");
    }
    for (int32_t i = qsl[q]; i < qsl[q + 1]; ++i) {
      require(pos[i] >= 0 && pos[i] < seq_lens[q],
              "attention: position " + std::to_string(pos[i]) + " not below seq_len " +
                  std::to_string(seq_lens[q]));
    }
  }
}

// One (query row, head) pair: its query, its output, and where its keys are.
struct HeadTask {
  const float* q;
  float* out;
  const int32_t* table;  // the sequence's block table
  int64_t n_keys;        // keys 0..position
  const float* k;        // the cache's first row, offset to this head's kv head
  const float* v;
  int64_t row_floats;  // floats from one slot to the next
  int32_t block_size;
  int64_t head_dim;
  float scale;

  int64_t slot(int64_t t) const {
    return int64_t(table[t / block_size]) * block_size + t % block_size;
  }
};

// Portable kernel; `scores` holds n_keys floats.
void attend_portable(const HeadTask& h, float* scores) {
  float max_score = -INFINITY;
  for (int64_t t = 0; t < h.n_keys; ++t) {
    const float* kv = h.k + h.slot(t) * h.row_floats;
    float dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t d = 0; d < h.head_dim; ++d) dot += h.q[d] * kv[d];
    scores[t] = dot * h.scale;
    max_score = std::max(max_score, scores[t]);
  }
  float denom = 0;
  for (int64_t t = 0; t < h.n_keys; ++t) denom += (scores[t] = std::exp(scores[t] - max_score));
  std::fill(h.out, h.out + h.head_dim, 0.0f);
  for (int64_t t = 0; t < h.n_keys; ++t) {
    const float* vv = h.v + h.slot(t) * h.row_floats;
#pragma omp simd
    for (int64_t d = 0; d < h.head_dim; ++d) h.out[d] += scores[t] * vv[d];
  }
  for (int64_t d = 0; d < h.head_dim; ++d) h.out[d] /= denom;
}

// AVX-512 kernel for head_dim in (16·(NC-1), 16·NC]: the last chunk is masked.
template <int NC>
__attribute__((target(TSR_AVX512_TARGET)))
void attend_avx512(const HeadTask& h, float* scores) {
  const int64_t rem = h.head_dim - 16 * (NC - 1);
  const __mmask16 last = static_cast<__mmask16>((1u << rem) - 1);
  __m512 q[NC];
  for (int c = 0; c < NC; ++c) q[c] = _mm512_maskz_loadu_ps(c == NC - 1 ? last : 0xffff, h.q + 16 * c);

  float max_score = -INFINITY;
  for (int64_t t = 0; t < h.n_keys; ++t) {
    const float* kv = h.k + h.slot(t) * h.row_floats;
    __m512 dot = _mm512_mul_ps(q[0], _mm512_maskz_loadu_ps(NC == 1 ? last : 0xffff, kv));
    for (int c = 1; c < NC; ++c) {
      dot = _mm512_fmadd_ps(q[c], _mm512_maskz_loadu_ps(c == NC - 1 ? last : 0xffff, kv + 16 * c), dot);
    }
    scores[t] = _mm512_reduce_add_ps(dot) * h.scale;
    max_score = std::max(max_score, scores[t]);
  }
  const __m512 vmax = _mm512_set1_ps(max_score);

  __m512 vdenom = _mm512_setzero_ps();
  for (int64_t t = 0; t < h.n_keys; t += 16) {
    const __mmask16 m = first_lanes(h.n_keys - t);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + t), vmax));
    _mm512_mask_storeu_ps(scores + t, m, e);
    vdenom = _mm512_add_ps(vdenom, _mm512_maskz_mov_ps(m, e));
  }

  __m512 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t t = 0; t < h.n_keys; ++t) {
    const float* vv = h.v + h.slot(t) * h.row_floats;
    const __m512 p = _mm512_set1_ps(scores[t]);
    for (int c = 0; c < NC; ++c) {
      acc[c] = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(c == NC - 1 ? last : 0xffff, vv + 16 * c), acc[c]);
    }
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vdenom));
  for (int c = 0; c < NC; ++c) {
    _mm512_mask_storeu_ps(h.out + 16 * c, c == NC - 1 ? last : 0xffff, _mm512_mul_ps(acc[c], inv));
  }
}

using AttendFn = void (*)(const HeadTask&, float*);

// The kernel for this machine and head_dim.
AttendFn pick_kernel(int64_t head_dim) {
  const int64_t chunks = (head_dim + 15) / 16;
  if (!has_avx512() || chunks > kMaxChunks) return &attend_portable;
  AttendFn fn = nullptr;
  dispatch_rows<kMaxChunks>(static_cast<int>(chunks), [&](auto n) { fn = &attend_avx512<decltype(n)::value>; });
  return fn;
}

}  // namespace

void op_attention(OpContext& ctx, const tsr_attention_params& p) {
  require(p.q != nullptr && p.q->ndim == 3, "attention: q must be [n, heads, head_dim]");
  require(p.k_cache != nullptr && p.k_cache->ndim == 3,
          "attention: caches must be [slots, kv_heads, head_dim]");
  require(p.block_tables != nullptr && p.block_tables->ndim == 2,
          "attention: block_tables must be [num_seqs, max_blocks]");
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "attention out");
  const Matrix q = as_matrix(p.q, TSR_DTYPE_F32, "attention q");
  const Matrix kc = as_matrix(p.k_cache, TSR_DTYPE_F32, "attention k_cache");
  const Matrix vc = as_matrix(p.v_cache, TSR_DTYPE_F32, "attention v_cache");
  require(out.rows == q.rows && out.cols == q.cols, "attention: out and q shapes differ");
  require(kc.rows == vc.rows && kc.cols == vc.cols && kc.row_stride == vc.row_stride,
          "attention: k_cache and v_cache shapes differ");
  const AttentionShape s{q.rows, p.q->shape[1], p.k_cache->shape[1], p.q->shape[2],
                         p.block_tables->shape[0], p.block_tables->shape[1], kc.rows};
  require(p.k_cache->shape[2] == s.head_dim, "attention: head_dim of q and cache differ");
  require(s.kv_heads > 0 && s.heads % s.kv_heads == 0,
          "attention: heads must be a multiple of kv_heads");
  require(p.block_size > 0, "attention: block_size must be > 0");
  require(kc.row_stride % sizeof(float) == 0, "attention: cache rows must be whole floats apart");
  const int32_t* tables =
      as_i32(p.block_tables, s.num_seqs * s.max_blocks, "attention block_tables");
  const int32_t* seq_lens = as_i32(p.seq_lens, s.num_seqs, "attention seq_lens");
  const int32_t* qsl = as_i32(p.query_start_loc, s.num_seqs + 1, "attention query_start_loc");
  const int32_t* pos = as_i32(p.positions, s.n, "attention positions");
  validate_attention(s, p.block_size, tables, seq_lens, qsl, pos);

  // Sequence of each query row, so that (row, head) pairs can be spread over threads.
  std::vector<int32_t> seq_of(s.n);
  for (int64_t q_seq = 0; q_seq < s.num_seqs; ++q_seq) {
    for (int32_t i = qsl[q_seq]; i < qsl[q_seq + 1]; ++i) seq_of[i] = static_cast<int32_t>(q_seq);
  }
  const int64_t group = s.heads / s.kv_heads, hd = s.head_dim;
  int64_t work = 0, max_keys = 0;  // multiply-adds, to keep small steps off the thread pool
  for (int64_t i = 0; i < s.n; ++i) {
    work += (pos[i] + 1) * s.heads * hd * 2;
    max_keys = std::max<int64_t>(max_keys, pos[i] + 1);
  }
  const AttendFn attend = pick_kernel(hd);
#pragma omp parallel num_threads(ctx.n_threads) if (work >= kParallelMin)
  {
    std::vector<float> scores(static_cast<size_t>(max_keys));
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (int64_t i = 0; i < s.n; ++i) {
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t kv_off = h / group * hd;
        const HeadTask task{q.row<float>(i) + h * hd, out.row<float>(i) + h * hd,
                            tables + seq_of[i] * s.max_blocks, pos[i] + 1,
                            kc.row<float>(0) + kv_off, vc.row<float>(0) + kv_off,
                            kc.row_stride / int64_t{sizeof(float)}, p.block_size, hd, p.scale};
        attend(task, scores.data());
      }
    }
  }
}

}  // namespace tsr::cpu
