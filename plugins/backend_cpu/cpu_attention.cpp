// Paged causal attention with GQA on the CPU. With AVX-512 (head_dim up to 128, or a
// multiple of 16 up to 576: deepseek2's latent rows) the keys stream in tiles of sixteen
// through an online softmax, sixteen (query row, head) pairs that share a kv head at a time
// (below); the portable kernel, for other machines and other heads, takes one pair at a
// time in two passes (scores, then the weighted values). Tree attention (ABI 2.8 parents)
// reads a tree row's keys through its path, in the order a causal row holding that path
// reads them, so that both kernels give it the causal row's bits.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu_kv_format.h"
#include "cpu_ops.h"
#include "cpu_simd.h"
#include "cpu_tensor.h"
#include "tessera/sdk/op_checks.hpp"
#include "tessera/sdk/status.hpp"

namespace tsr::cpu {

using sdk::require;

namespace {

// Multiply-adds below which a call runs on the calling thread alone (see cpu_ops.cpp).
constexpr int64_t kParallelMin = 1 << 15;
// Head dims the AVX-512 kernels take, in chunks of 16 floats: attend_pair up to 8 chunks,
// attend_tile up to 36 (576, MLA's latent and RoPE key, whose one kv head all query heads
// share, so that its tiles are always full).
constexpr int64_t kMaxChunks = 8;
constexpr int64_t kMaxTileChunks = 36;

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

// One sequence's keys and values for one kv head, in the caches' dtypes (cpu_kv_format.h).
// Key t is the cached position t, except in a tree row (ABI 2.8 parents), whose keys from
// `path_from` on are the positions of its path: key t is then position path[t - path_from].
struct KeySource {
  const int32_t* table;  // the sequence's block table
  const uint8_t* k;      // the caches' first rows, offset to the kv head
  const uint8_t* v;
  int64_t k_stride, v_stride;  // bytes from one slot to the next
  tsr_dtype k_dtype, v_dtype;
  int32_t block_size;
  int64_t head_dim;
  const int32_t* path = nullptr;
  int64_t path_from = INT64_MAX;

  int64_t slot(int64_t t) const {
    if (t >= path_from) t = path[t - path_from];
    return int64_t(table[t / block_size]) * block_size + t % block_size;
  }
  const uint8_t* k_row(int64_t t) const { return k + slot(t) * k_stride; }
  const uint8_t* v_row(int64_t t) const { return v + slot(t) * v_stride; }
};

// The optional parts of attention (ABI 2.0; backend.h): keys before `first_key` are
// outside the sliding window, logits are softcapped when softcap > 0, and `sink` (a
// per-head logit, -inf for none) joins the denominator. All off: plain causal attention.
struct AttendExtras {
  int64_t first_key = 0;
  float softcap = 0;
  float sink = -INFINITY;
};

// A thread's buffers for the portable kernel: the scores of one pair's keys, and one
// dequantized key or value row.
struct PortableScratch {
  std::vector<float> scores, row;
};

// q · k. One compiled instance for every key: the simd reduction's order is the
// compiler's choice, and a copy of the loop inlined into another context (a tree row's keys
// split off by the optimizer, say) could sum in another order and change a score's bits.
[[gnu::noinline]] float dot_product(const float* q, const float* k, int64_t n) {
  float dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t d = 0; d < n; ++d) dot += q[d] * k[d];
  return dot;
}

// Portable kernel for one (query row, head) pair: scores, then the weighted values.
// `scratch.scores` holds n_keys floats, `scratch.row` head_dim.
void attend_portable(const float* q, float* out, int64_t n_keys, const KeySource& src, float scale,
                     PortableScratch& scratch, const AttendExtras& x = {}) {
  const int64_t hd = src.head_dim;
  float* scores = scratch.scores.data();
  float max_score = x.sink;
  for (int64_t t = x.first_key; t < n_keys; ++t) {
    const float* k = kv_row_floats(src.k_dtype, src.k_row(t), scratch.row.data(), hd);
    scores[t] = dot_product(q, k, hd) * scale;
    if (x.softcap > 0) scores[t] = x.softcap * std::tanh(scores[t] / x.softcap);
    max_score = std::max(max_score, scores[t]);
  }
  float denom = x.sink == -INFINITY ? 0.0f : std::exp(x.sink - max_score);
  for (int64_t t = x.first_key; t < n_keys; ++t) denom += (scores[t] = std::exp(scores[t] - max_score));
  std::fill(out, out + hd, 0.0f);
  for (int64_t t = x.first_key; t < n_keys; ++t) {
    const float* v = kv_row_floats(src.v_dtype, src.v_row(t), scratch.row.data(), hd);
#pragma omp simd
    for (int64_t d = 0; d < hd; ++d) out[d] += scores[t] * v[d];
  }
  for (int64_t d = 0; d < hd; ++d) out[d] /= denom;
}

// ---- AVX-512: online softmax over tiles of sixteen keys ----
//
// Each (query row, head) pair runs the same float operations whichever kernel takes it and
// whatever else shares its call, so that a token's attention is the same bits in a prompt,
// a chunk, a batch or a decode step (greedy output must not depend on them). Per pair and
// per tile of keys t0 .. t0+15: s_n = q·k_n (FMAs in order of d, from q_0·k_n0) times the
// scale, -inf where t0+n is past the pair's keys; m' = max(m, max_n s_n); α = e^(m - m');
// p_n = e^(s_n - m') (0 where masked); l = l·α + p_0 + … + p_15 in that order; o = o·α, then
// o += p_n·v_n for n in order (FMAs). Finally out = o · (1 / l). A masked key adds exact
// zeros and a tile past a pair's keys has α = e^0 = 1, so extra keys change nothing.
// This file is built with -ffp-contract=off: the compiler must not fuse a multiply and an
// add in one kernel and not in the other.
//
// attend_tile takes up to sixteen pairs that read the same keys (one sequence, one kv head:
// the heads of a GQA group, and consecutive rows) with one pair per vector lane: a key's
// value is broadcast against sixteen queries, so a tile of keys costs 2·16·head_dim FMAs
// and no horizontal sums. attend_pair takes a single pair with keys in the lanes (the tile
// transposed in registers); it serves tiles of few pairs (one head decoding without GQA),
// where the lanes of attend_tile would sit idle.
constexpr int kLanes = 16;
constexpr int kTileKeys = 16;
constexpr int64_t kMaxHeadDim = 16 * kMaxTileChunks;
constexpr int kMinTileLanes = 5;  // fewer pairs run one by one (attend_pair)

// Up to kLanes pairs of one KeySource: each pair's query, output and number of keys.
struct LaneTile {
  int n = 0;
  const float* q[kLanes];
  float* out[kLanes];
  int32_t n_keys[kLanes];
};

// A thread's working set: a tile of keys and values copied contiguously (the kernels then
// address them at constant offsets), the queries and outputs transposed (dimension-major,
// a lane per pair) and the tile's probabilities. Every field is written before it is read,
// so it is allocated uninitialized.
struct alignas(64) TileScratch {
  float k[kTileKeys][kMaxHeadDim];
  float v[kTileKeys][kMaxHeadDim];
  float qt[kMaxHeadDim][kLanes];
  float ot[kMaxHeadDim][kLanes];
  float p[kTileKeys][kLanes];
};

// A head row of `dtype` as n floats.
__attribute__((target(TSR_AVX512_TARGET), always_inline))
inline void load_row(float* dst, tsr_dtype dtype, const uint8_t* src, int64_t n) {
  for (int64_t d = 0; d < n; d += 16) _mm512_mask_storeu_ps(dst + d, first_lanes(n - d), kv_load16(dtype, src, d, n));
}

// The rows of keys and values t0 .. t0 + 15 (those at or past `end` repeat the last one,
// finite values whose scores are masked).
struct KeyRows {
  const uint8_t* k[kTileKeys];
  const uint8_t* v[kTileKeys];
};

KeyRows key_rows(const KeySource& src, int64_t t0, int64_t end) {
  KeyRows rows;
  if (t0 + kTileKeys > src.path_from) {  // a tree row's path: key by key
    for (int n = 0; n < kTileKeys; ++n) {
      const int64_t slot = src.slot(std::min(t0 + n, end - 1));
      rows.k[n] = src.k + slot * src.k_stride;
      rows.v[n] = src.v + slot * src.v_stride;
    }
    return rows;
  }
  int64_t block = t0 / src.block_size, offset = t0 % src.block_size;
  for (int n = 0; n < kTileKeys; ++n) {
    if (t0 + n >= end) {
      rows.k[n] = rows.k[n - 1];  // t0 < end: row 0 is a key
      rows.v[n] = rows.v[n - 1];
      continue;
    }
    const int64_t slot = int64_t(src.table[block]) * src.block_size + offset;
    rows.k[n] = src.k + slot * src.k_stride;
    rows.v[n] = src.v + slot * src.v_stride;
    if (++offset == src.block_size) {
      offset = 0;
      ++block;
    }
  }
  return rows;
}

// Copies the rows of keys t0 .. t0 + 15 into the scratch (past `end`, the last key again).
__attribute__((target(TSR_AVX512_TARGET)))
void load_key_tile(const KeySource& src, int64_t t0, int64_t end, TileScratch& s) {
  const KeyRows rows = key_rows(src, t0, end);
  for (int n = 0; n < kTileKeys; ++n) {
    load_row(s.k[n], src.k_dtype, rows.k[n], src.head_dim);
    load_row(s.v[n], src.v_dtype, rows.v[n], src.head_dim);
  }
}

// Up to sixteen pairs, one per lane; head_dim a multiple of 16.
__attribute__((target(TSR_AVX512_TARGET)))
void attend_tile(const LaneTile& tile, const KeySource& src, float scale, TileScratch& s) {
  const int64_t hd = src.head_dim;
  alignas(64) int32_t n_keys[kLanes] = {};
  int64_t end = 0;
  for (int l = 0; l < tile.n; ++l) {
    n_keys[l] = tile.n_keys[l];
    end = std::max<int64_t>(end, n_keys[l]);
  }
  for (int64_t d = 0; d < hd; ++d) {
    for (int l = 0; l < kLanes; ++l) s.qt[d][l] = l < tile.n ? tile.q[l][d] : 0.0f;
    _mm512_store_ps(s.ot[d], _mm512_setzero_ps());
  }
  const __m512i keys = _mm512_load_si512(n_keys);
  const __m512 vscale = _mm512_set1_ps(scale), minus_inf = _mm512_set1_ps(-INFINITY);
  __m512 m = minus_inf, l = _mm512_setzero_ps();
  for (int64_t t0 = 0; t0 < end; t0 += kTileKeys) {
    load_key_tile(src, t0, end, s);
    __m512 sc[kTileKeys];
    const __m512 q0 = _mm512_load_ps(s.qt[0]);
    for (int n = 0; n < kTileKeys; ++n) sc[n] = _mm512_mul_ps(q0, _mm512_set1_ps(s.k[n][0]));
    for (int64_t d = 1; d < hd; ++d) {
      const __m512 qd = _mm512_load_ps(s.qt[d]);
      for (int n = 0; n < kTileKeys; ++n) sc[n] = _mm512_fmadd_ps(qd, _mm512_set1_ps(s.k[n][d]), sc[n]);
    }
    __m512 tile_max = minus_inf;
    for (int n = 0; n < kTileKeys; ++n) {
      const __mmask16 valid = _mm512_cmpgt_epi32_mask(keys, _mm512_set1_epi32(int32_t(t0 + n)));
      sc[n] = _mm512_mask_mov_ps(minus_inf, valid, _mm512_mul_ps(sc[n], vscale));
      tile_max = _mm512_max_ps(tile_max, sc[n]);
    }
    const __m512 m_new = _mm512_max_ps(m, tile_max);
    const __m512 alpha = exp_avx512(_mm512_sub_ps(m, m_new));
    m = m_new;
    l = _mm512_mul_ps(l, alpha);
    for (int n = 0; n < kTileKeys; ++n) {
      const __mmask16 valid = _mm512_cmpgt_epi32_mask(keys, _mm512_set1_epi32(int32_t(t0 + n)));
      const __m512 p = _mm512_maskz_mov_ps(valid, exp_avx512(_mm512_sub_ps(sc[n], m_new)));
      _mm512_store_ps(s.p[n], p);
      l = _mm512_add_ps(l, p);
    }
    for (int64_t d0 = 0; d0 < hd; d0 += 16) {
      __m512 acc[16];
      for (int j = 0; j < 16; ++j) acc[j] = _mm512_mul_ps(_mm512_load_ps(s.ot[d0 + j]), alpha);
      for (int n = 0; n < kTileKeys; ++n) {
        const __m512 p = _mm512_load_ps(s.p[n]);
        for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(p, _mm512_set1_ps(s.v[n][d0 + j]), acc[j]);
      }
      for (int j = 0; j < 16; ++j) _mm512_store_ps(s.ot[d0 + j], acc[j]);
    }
  }
  alignas(64) float inv[kLanes];
  _mm512_store_ps(inv, _mm512_div_ps(_mm512_set1_ps(1.0f), l));
  for (int lane = 0; lane < tile.n; ++lane) {
    for (int64_t d = 0; d < hd; ++d) tile.out[lane][d] = s.ot[d][lane] * inv[lane];
  }
}

// 64-bit interleaves of float vectors (lambdas would not inherit the target).
__attribute__((target(TSR_AVX512_TARGET), always_inline))
inline __m512 unpacklo_64(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}
__attribute__((target(TSR_AVX512_TARGET), always_inline))
inline __m512 unpackhi_64(__m512 a, __m512 b) {
  return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
}

// r[j] becomes the j-th column of the 16x16 matrix whose rows were r[0..15].
__attribute__((target(TSR_AVX512_TARGET), always_inline))
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);      // per 128 bits: a0 b0 a1 b1
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);  // a2 b2 a3 b3
  }
  for (int i = 0; i < 16; i += 4) {  // per 128 bits: column c of four rows, c = 0..3
    u[i] = unpacklo_64(t[i], t[i + 2]);
    u[i + 1] = unpackhi_64(t[i], t[i + 2]);
    u[i + 2] = unpacklo_64(t[i + 1], t[i + 3]);
    u[i + 3] = unpackhi_64(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // u[4g + c]: rows 4g..4g+3 at columns c, c+4, c+8, c+12
    const __m512 a = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), b = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
    const __m512 e = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88), f = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(a, e, 0x88);
    r[c + 8] = _mm512_shuffle_f32x4(a, e, 0xdd);
    r[c + 4] = _mm512_shuffle_f32x4(b, f, 0x88);
    r[c + 12] = _mm512_shuffle_f32x4(b, f, 0xdd);
  }
}

// One pair, head_dim in (16·(NC-1), 16·NC], with the same operations as attend_tile.
template <int NC>
__attribute__((target(TSR_AVX512_TARGET)))
void attend_pair(const float* q, float* out, int64_t n_keys, const KeySource& src, float scale) {
  const int64_t hd = src.head_dim, rem = hd - 16 * (NC - 1);
  const __mmask16 last = first_lanes(rem);
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  __m512 o[NC];
  for (int c = 0; c < NC; ++c) o[c] = _mm512_setzero_ps();
  float m = -INFINITY, l = 0;
  for (int64_t t0 = 0; t0 < n_keys; t0 += kTileKeys) {
    const KeyRows rows = key_rows(src, t0, n_keys);  // read in place: a lone pair has no reuse to copy for
    __m512 sc = _mm512_setzero_ps();
    for (int c = 0; c < NC; ++c) {
      __m512 kt[16];
      for (int n = 0; n < kTileKeys; ++n) kt[n] = kv_load16(src.k_dtype, rows.k[n], 16 * c, hd);
      transpose16(kt);  // kt[j]: dimension 16c + j of the sixteen keys
      for (int j = 0; j < (c == NC - 1 ? rem : 16); ++j) {
        const __m512 qd = _mm512_set1_ps(q[16 * c + j]);
        sc = c == 0 && j == 0 ? _mm512_mul_ps(qd, kt[0]) : _mm512_fmadd_ps(qd, kt[j], sc);
      }
    }
    const __mmask16 valid = first_lanes(n_keys - t0);
    sc = _mm512_mask_mov_ps(minus_inf, valid, _mm512_mul_ps(sc, _mm512_set1_ps(scale)));
    const float m_new = std::max(m, _mm512_reduce_max_ps(sc));
    const __m512 alpha = exp_avx512(_mm512_set1_ps(m - m_new));
    m = m_new;
    alignas(64) float p[kTileKeys];
    _mm512_store_ps(p, _mm512_maskz_mov_ps(valid, exp_avx512(_mm512_sub_ps(sc, _mm512_set1_ps(m_new)))));
    l *= _mm512_cvtss_f32(alpha);
    for (int n = 0; n < kTileKeys; ++n) l += p[n];
    for (int c = 0; c < NC; ++c) o[c] = _mm512_mul_ps(o[c], alpha);
    for (int n = 0; n < kTileKeys; ++n) {
      const __m512 pn = _mm512_set1_ps(p[n]);
      for (int c = 0; c < NC; ++c) {
        o[c] = _mm512_fmadd_ps(pn, kv_load16(src.v_dtype, rows.v[n], 16 * c, hd), o[c]);
      }
    }
  }
  const __m512 inv = _mm512_set1_ps(1.0f / l);
  for (int c = 0; c < NC; ++c) _mm512_mask_storeu_ps(out + 16 * c, c == NC - 1 ? last : 0xffff, _mm512_mul_ps(o[c], inv));
}

using AttendPairFn = void (*)(const float*, float*, int64_t, const KeySource&, float);

AttendPairFn pick_pair_kernel(int64_t head_dim) {
  AttendPairFn fn = nullptr;
  dispatch_rows<kMaxChunks>(static_cast<int>((head_dim + 15) / 16), [&](auto n) { fn = &attend_pair<decltype(n)::value>; });
  return fn;
}

// The rows of a call with parents (ABI 2.8 tree attention): each row's number of keys,
// and for a row whose keys are not causal (a tree row off its sequence's first chain) the
// positions of its path, which its keys from its root's position on read.
struct TreeRows {
  std::vector<int32_t> n_keys;
  std::vector<int64_t> offset;  // the row's path in `paths`; -1: causal keys
  std::vector<int32_t> paths;
  std::vector<char> seq_has_path;

  TreeRows(const AttentionShape& s, const int32_t* qsl, const int32_t* pos, const int32_t* parents)
      : n_keys(size_t(s.n)), offset(size_t(s.n), -1), seq_has_path(size_t(s.num_seqs)) {
    std::vector<char> causal(size_t(s.n));
    std::vector<int32_t> chain;
    for (int64_t q = 0; q < s.num_seqs; ++q) {
      for (int32_t i = qsl[q]; i < qsl[q + 1]; ++i) {
        const int32_t p = parents[i];
        require(p == -1 || (p >= qsl[q] && p < i),
                "attention: parents[" + std::to_string(i) + "] must be -1 or an earlier row of its sequence");
        causal[i] = p == -1 || (p == i - 1 && pos[i] == pos[p] + 1 && causal[p]);
        n_keys[i] = pos[i] + 1;
        if (causal[i]) continue;
        chain.clear();
        for (int32_t r = i; r != -1; r = parents[r]) chain.push_back(r);
        offset[i] = static_cast<int64_t>(paths.size());
        for (auto r = chain.rbegin(); r != chain.rend(); ++r) paths.push_back(pos[*r]);
        n_keys[i] = pos[chain.back()] + static_cast<int32_t>(chain.size());
        seq_has_path[q] = 1;
      }
    }
  }
};

// One validated call: its shape and operands.
struct AttentionCall {
  AttentionShape s;
  Matrix q, out, k_cache, v_cache;
  const int32_t* tables;
  const int32_t* qsl;
  const int32_t* pos;
  int32_t block_size;
  float scale;
  int threads;
  int32_t window = 0;              // the optional parts (AttendExtras), off when zero / NULL
  float softcap = 0;
  const float* sinks = nullptr;    // [heads]
  const TreeRows* tree = nullptr;  // with parents

  bool plain() const { return window == 0 && softcap == 0 && sinks == nullptr; }
  int32_t n_keys(int64_t row) const { return tree ? tree->n_keys[row] : pos[row] + 1; }
  AttendExtras extras(int64_t row, int64_t head) const {
    AttendExtras x;
    if (window > 0) x.first_key = std::max<int64_t>(0, int64_t(n_keys(row)) - window);
    x.softcap = softcap;
    if (sinks != nullptr) x.sink = sinks[head];
    return x;
  }

  int64_t group() const { return s.heads / s.kv_heads; }
  // The keys of query row `row` of sequence `seq` at one kv head.
  KeySource keys(int64_t seq, int64_t kv_head, int64_t row) const {
    KeySource src{tables + seq * s.max_blocks,
                  k_cache.row<uint8_t>(0) + kv_head * row_bytes(k_cache.dtype, s.head_dim),
                  v_cache.row<uint8_t>(0) + kv_head * row_bytes(v_cache.dtype, s.head_dim),
                  k_cache.row_stride, v_cache.row_stride, k_cache.dtype, v_cache.dtype, block_size, s.head_dim};
    if (tree != nullptr && tree->offset[row] >= 0) {
      src.path = tree->paths.data() + tree->offset[row];
      src.path_from = src.path[0];  // the root's position
    }
    return src;
  }
  // Whether a tile may hold pairs of several rows (they share their keys but for their count).
  bool rows_share_keys(int64_t seq) const { return tree == nullptr || !tree->seq_has_path[seq]; }
};

// Pairs [first, first + count) of one sequence and kv head, numbered row-major over the
// sequence's query rows and the kv head's group of query heads.
struct TileWork {
  int32_t seq, kv_head, first, count;
};

void attention_avx512(const AttentionCall& c) {
  const int64_t group = c.group(), hd = c.s.head_dim;
  std::vector<TileWork> work;
  for (int64_t seq = 0; seq < c.s.num_seqs; ++seq) {
    const int64_t pairs = (c.qsl[seq + 1] - c.qsl[seq]) * group;
    // A sequence with tree rows has tiles of one row each: each row reads its own keys.
    const int64_t span = c.rows_share_keys(seq) ? pairs : group;
    for (int64_t kvh = 0; kvh < c.s.kv_heads; ++kvh) {
      for (int64_t base = 0; base < pairs; base += span) {
        for (int64_t first = base; first < base + span; first += kLanes) {
          work.push_back({int32_t(seq), int32_t(kvh), int32_t(first),
                          int32_t(std::min<int64_t>(kLanes, base + span - first))});
        }
      }
    }
  }
  // Heads wider than attend_pair's go to attend_tile however few pairs a tile holds (the
  // same operations per pair: only the lanes left idle differ).
  const AttendPairFn attend_one = hd <= 16 * kMaxChunks ? pick_pair_kernel(hd) : nullptr;
#pragma omp parallel num_threads(c.threads) if (c.threads > 1)
  {
    const auto scratch = std::make_unique_for_overwrite<TileScratch>();
#pragma omp for schedule(dynamic, 1)
    for (size_t w = 0; w < work.size(); ++w) {
      const TileWork& tw = work[w];
      const KeySource keys = c.keys(tw.seq, tw.kv_head, c.qsl[tw.seq] + tw.first / group);
      LaneTile tile;
      for (int32_t pair = tw.first; pair < tw.first + tw.count; ++pair) {
        const int64_t row = c.qsl[tw.seq] + pair / group, head = tw.kv_head * group + pair % group;
        tile.q[tile.n] = c.q.row<float>(row) + head * hd;
        tile.out[tile.n] = c.out.row<float>(row) + head * hd;
        tile.n_keys[tile.n++] = c.n_keys(row);
      }
      if ((tile.n >= kMinTileLanes || attend_one == nullptr) && hd % 16 == 0) {
        attend_tile(tile, keys, c.scale, *scratch);
      } else {
        for (int l = 0; l < tile.n; ++l) attend_one(tile.q[l], tile.out[l], tile.n_keys[l], keys, c.scale);
      }
    }
  }
}

// One work item per (query row, head) pair, on the portable kernel.
void attention_portable(const AttentionCall& c) {
  std::vector<int32_t> seq_of(c.s.n);
  int64_t max_keys = 0;
  for (int64_t seq = 0; seq < c.s.num_seqs; ++seq) {
    for (int32_t i = c.qsl[seq]; i < c.qsl[seq + 1]; ++i) seq_of[i] = static_cast<int32_t>(seq);
  }
  for (int64_t i = 0; i < c.s.n; ++i) max_keys = std::max<int64_t>(max_keys, c.n_keys(i));
  const int64_t group = c.group(), hd = c.s.head_dim;
#pragma omp parallel num_threads(c.threads) if (c.threads > 1)
  {
    PortableScratch scratch{std::vector<float>(static_cast<size_t>(max_keys)), std::vector<float>(size_t(hd))};
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (int64_t i = 0; i < c.s.n; ++i) {
      for (int64_t h = 0; h < c.s.heads; ++h) {
        const KeySource keys = c.keys(seq_of[i], h / group, i);
        attend_portable(c.q.row<float>(i) + h * hd, c.out.row<float>(i) + h * hd, c.n_keys(i), keys, c.scale,
                        scratch, c.extras(i, h));
      }
    }
  }
}

}  // namespace

void op_attention(OpContext& ctx, const tsr_attention_params& p) {
  sdk::check_attention_layout(p);
  const Matrix out = as_matrix(p.out, TSR_DTYPE_F32, "attention out");
  const Matrix q = as_matrix(p.q, TSR_DTYPE_F32, "attention q");
  const Matrix kc = as_matrix(p.k_cache, "attention k_cache");
  const Matrix vc = as_matrix(p.v_cache, "attention v_cache");
  for (const Matrix* c : {&kc, &vc}) {
    require(is_kv_dtype(c->dtype), [&] {
      return std::string("attention: the CPU backend has no KV cache of dtype ") + tsr_dtype_name(c->dtype);
    });
  }
  require(out.rows == q.rows && out.cols == q.cols, "attention: out and q shapes differ");
  require(kc.rows == vc.rows && kc.cols == vc.cols, "attention: k_cache and v_cache shapes differ");
  const AttentionShape s{q.rows, p.q->shape[1], p.k_cache->shape[1], p.q->shape[2],
                         p.block_tables->shape[0], p.block_tables->shape[1], kc.rows};
  require(p.k_cache->shape[2] == s.head_dim, "attention: head_dim of q and cache differ");
  require(s.kv_heads > 0 && s.heads % s.kv_heads == 0,
          "attention: heads must be a multiple of kv_heads");
  require(p.block_size > 0, "attention: block_size must be > 0");
  const int32_t* tables =
      as_i32(p.block_tables, s.num_seqs * s.max_blocks, "attention block_tables");
  const int32_t* seq_lens = as_i32(p.seq_lens, s.num_seqs, "attention seq_lens");
  const int32_t* qsl = as_i32(p.query_start_loc, s.num_seqs + 1, "attention query_start_loc");
  const int32_t* pos = as_i32(p.positions, s.n, "attention positions");
  validate_attention(s, p.block_size, tables, seq_lens, qsl, pos);

  int64_t work = 0;  // multiply-adds, to keep small steps off the thread pool
  for (int64_t i = 0; i < s.n; ++i) work += (pos[i] + 1) * s.heads * s.head_dim * 2;
  AttentionCall call{s, q, out, kc, vc, tables, qsl, pos, p.block_size, p.scale,
                     ctx.n_threads > 1 && work >= kParallelMin ? ctx.n_threads : 1};
  sdk::check_attention_scalars(p);
  call.window = p.window;
  call.softcap = p.softcap;
  std::optional<TreeRows> tree;
  if (TSR_STRUCT_HAS(&p, tsr_attention_params, parents) && p.parents != nullptr) {
    tree.emplace(s, qsl, pos, as_i32(p.parents, s.n, "attention parents"));
    call.tree = &*tree;
  }
  if (p.sinks != nullptr) {
    const Matrix sinks = as_matrix(p.sinks, TSR_DTYPE_F32, "attention sinks");
    require(sinks.rows * sinks.cols == s.heads, "attention: sinks must be [heads]");
    call.sinks = sinks.row<float>(0);
    for (int64_t h = 0; h < s.heads; ++h) require(std::isfinite(call.sinks[h]), "attention: sinks must be finite");
  }
  // The AVX-512 kernels implement plain attention; the optional parts run on the portable one.
  const bool avx512_heads = s.head_dim <= 16 * kMaxChunks || (s.head_dim <= kMaxHeadDim && s.head_dim % 16 == 0);
  if (call.plain() && has_avx512() && avx512_heads) return attention_avx512(call);
  attention_portable(call);
}

}  // namespace tsr::cpu
