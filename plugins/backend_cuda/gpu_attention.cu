// Paged causal attention with GQA (see AttentionPlan in gpu_kernels.h for the scheme).
//
// Shared memory of a block: the scaled queries [QR*QH][hd], one K or V tile [T][hd+1]
// (padded so that lanes reading different keys hit different banks), the scores
// [QR*QH][T] and the running max / sum / rescale factor per query head and row.
// Accumulators live in registers: at most kMaxAcc per thread (QR*QH*hd <= kThreads*kMaxAcc).
#include <cfloat>
#include <climits>

#include "gpu_decode.cuh"
#include "gpu_kernels.h"

namespace tsr::gpu {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxAcc = 16;
constexpr int kMaxQueries = kThreads * kMaxAcc;  // (row, head, dim) accumulators per block
constexpr int kMaxTileFloats = 4096;             // one K/V tile
constexpr int kMaxHeadsRows = 64;                // (row, head) pairs per block

struct Tile {
  int32_t seq, row0, rows, max_pos;
  int32_t first_key;  // the first key any row of the tile sees (sliding window)
};

// The first key a query at `pos` attends to.
__device__ __forceinline__ int32_t first_key(const AttentionArgs& a, int32_t pos) {
  return a.window > 0 ? max(0, pos + 1 - a.window) : 0;
}

// A row's place along its path (tree attention; without parents the row is its own
// root): the root's position and the row's depth below it, so that the row stands at
// position root + depth of the causal sequence its path makes.
struct PathPlace {
  int32_t root_pos, depth;
};

__device__ __forceinline__ PathPlace path_place(const AttentionArgs& a, int32_t row) {
  int32_t depth = 0;
  if (a.parents != nullptr) {
    while (a.parents[row] >= 0) row = a.parents[row], ++depth;
  }
  return {a.pos[row], depth};
}

// Whether query row `row` attends to the key at cache position `key`: causally, or for a
// tree row (backend.h, tsr_attention_params.parents) the keys before its path's root and
// then its path's own, the window counted along the path. Masking in slot order reads the
// same keys as the CPU kernel's walk along the path, in another summation order: equal
// within rounding, not to the bit.
__device__ bool visible(const AttentionArgs& a, int32_t row, int32_t key) {
  if (a.parents == nullptr) {
    const int32_t pos = a.pos[row];
    return key <= pos && key >= first_key(a, pos);
  }
  const PathPlace place = path_place(a, row);
  const int32_t lowest = first_key(a, place.root_pos + place.depth);
  if (key < place.root_pos) return key >= lowest;
  for (int32_t r = row, d = place.depth; r >= 0; r = a.parents[r], --d) {
    if (a.pos[r] == key) return place.root_pos + d >= lowest;
  }
  return false;
}

// The sequence and rows of tile `y`.
__device__ Tile find_tile(const AttentionArgs& a, int32_t qr, int32_t y) {
  Tile t{y, 0, 0, -1, INT_MAX};
  if (a.tile_map != nullptr) t.seq = a.tile_map[2 * y], t.row0 = a.tile_map[2 * y + 1];
  else t.row0 = a.qsl[y];
  t.rows = min(qr, a.qsl[t.seq + 1] - t.row0);
  for (int32_t r = 0; r < t.rows; ++r) {
    const PathPlace place = path_place(a, t.row0 + r);
    t.max_pos = max(t.max_pos, a.pos[t.row0 + r]);
    t.first_key = min(t.first_key, first_key(a, place.root_pos + place.depth));
  }
  return t;
}

// out = acc / l, with the head's sink logit (if any) joining the denominator l at the
// running max m: rescaled to max(m, sink) so that neither exponential overflows.
__device__ __forceinline__ float finish(const AttentionArgs& a, int h, float acc, float m, float l) {
  if (a.sinks == nullptr) return acc / l;
  const float sink = a.sinks[h], top = fmaxf(m, sink);
  const float r = m == -INFINITY ? 0.0f : expf(m - top);
  return acc * r / (l * r + expf(sink - top));
}

__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs a, AttentionPlan p) {
  extern __shared__ float smem[];
  __shared__ Tile tile;
  const int qh = p.heads_per_block, nq = p.rows_per_tile * qh, hd = a.head_dim;
  const int T = p.tile_keys, ld = hd + 1;
  float* qs = smem;
  float* kv = qs + nq * hd;
  float* S = kv + T * ld;
  float* m_run = S + nq * T;
  float* l_run = m_run + nq;
  float* alpha = l_run + nq;

  const int group = a.heads / a.kv_heads, chunks = group / qh;
  const int kvh = blockIdx.x / chunks, h0 = kvh * group + (blockIdx.x % chunks) * qh;
  if (threadIdx.x == 0) tile = find_tile(a, p.rows_per_tile, blockIdx.y);
  __syncthreads();

  for (int i = threadIdx.x; i < nq * hd; i += kThreads) {
    const int qi = i / hd, r = qi / qh, d = i % hd;
    qs[i] = r < tile.rows ? a.q[(tile.row0 + r) * a.q_stride + (h0 + qi % qh) * hd + d] * a.scale : 0.0f;
  }
  for (int i = threadIdx.x; i < nq; i += kThreads) m_run[i] = -INFINITY, l_run[i] = 0.0f;

  const int32_t* table = a.tables + int64_t(tile.seq) * a.max_blocks;
  const int key_begin = max(int(blockIdx.z) * p.split_keys, tile.first_key);
  const int key_end = min(tile.max_pos + 1, key_begin + p.split_keys);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float acc[kMaxAcc] = {};

  // Loads keys [t0, t0 + nt) of `cache` (of `dtype`) for this block's KV head into kv, as
  // floats: a quantized key is decoded here, once per tile, never copied out of the cache.
  auto load_tile = [&](const uint8_t* cache, int dtype, int64_t stride, int t0, int nt) {
    for (int i = threadIdx.x; i < nt * hd; i += kThreads) {
      const int t = i / hd, d = i % hd, key = t0 + t;
      const int64_t slot = int64_t(table[key / a.block_size]) * a.block_size + key % a.block_size;
      kv[t * ld + d] = decode_kv(dtype, cache + slot * stride, kvh, d, hd);
    }
  };

  for (int t0 = key_begin; t0 < key_end; t0 += T) {
    const int nt = min(T, key_end - t0);
    __syncthreads();  // the previous tile's V is no longer read
    load_tile(a.k_cache, a.k_dtype, a.k_stride, t0, nt);
    __syncthreads();
    for (int i = threadIdx.x; i < nq * T; i += kThreads) {
      const int qi = i / T, t = i % T, r = qi / qh;
      float score = -INFINITY;
      const int key = t0 + t;
      if (t < nt && r < tile.rows && visible(a, tile.row0 + r, key)) {
        score = 0.0f;
        for (int d = 0; d < hd; ++d) score += qs[qi * hd + d] * kv[t * ld + d];
        if (a.softcap > 0) score = a.softcap * tanhf(score / a.softcap);
      }
      S[i] = score;
    }
    __syncthreads();
    // Online softmax: a warp per (row, head), a lane per key (T <= 32).
    for (int qi = warp; qi < nq; qi += kThreads / kWarp) {
      const float s = lane < T ? S[qi * T + lane] : -INFINITY;
      const float m_old = m_run[qi], m_new = fmaxf(m_old, warp_max(s));
      const float e = s == -INFINITY ? 0.0f : expf(s - m_new);
      const float sum = warp_sum(e);
      if (lane < T) S[qi * T + lane] = e;
      if (lane == 0) {
        const float scale = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
        alpha[qi] = scale;
        l_run[qi] = l_run[qi] * scale + sum;
        m_run[qi] = m_new;
      }
    }
    load_tile(a.v_cache, a.v_dtype, a.v_stride, t0, nt);  // the scores no longer need K
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kMaxAcc; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i < nq * hd && i / hd / qh < tile.rows) {
        const int qi = i / hd, d = i % hd;
        float v = acc[j] * alpha[qi];
        for (int t = 0; t < nt; ++t) v += S[qi * T + t] * kv[t * ld + d];
        acc[j] = v;
      }
    }
  }

  __syncthreads();  // m_run / l_run of the last tile are written by other warps
#pragma unroll
  for (int j = 0; j < kMaxAcc; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= nq * hd) continue;
    const int qi = i / hd, r = qi / qh, d = i % hd;
    if (r >= tile.rows) continue;
    const int64_t row = tile.row0 + r;
    const int h = h0 + qi % qh;
    if (p.splits == 1) {
      a.out[row * a.out_stride + h * hd + d] = finish(a, h, acc[j], m_run[qi], l_run[qi]);
    } else {
      float* part = a.partial + ((row * a.heads + h) * p.splits + blockIdx.z) * (hd + 2);
      part[d] = acc[j];
      if (d == 0) part[hd] = m_run[qi], part[hd + 1] = l_run[qi];
    }
  }
}

// Merges the splits of one (row, head): rescales each partial sum to the global max.
__global__ void combine_kernel(AttentionArgs a, int32_t splits) {
  const int64_t rh = blockIdx.x, row = rh / a.heads;
  const int h = static_cast<int>(rh % a.heads), hd = a.head_dim;
  const float* part = a.partial + rh * splits * (hd + 2);
  float m = -INFINITY;
  for (int z = 0; z < splits; ++z) m = fmaxf(m, part[z * (hd + 2) + hd]);
  float l = 0;
  for (int z = 0; z < splits; ++z) {
    const float mz = part[z * (hd + 2) + hd];
    if (mz != -INFINITY) l += part[z * (hd + 2) + hd + 1] * expf(mz - m);
  }
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float v = 0;
    for (int z = 0; z < splits; ++z) {
      const float mz = part[z * (hd + 2) + hd];
      if (mz != -INFINITY) v += part[z * (hd + 2) + d] * expf(mz - m);
    }
    a.out[row * a.out_stride + h * hd + d] = finish(a, h, v, m, l);
  }
}

}  // namespace

bool attention_tiles(int32_t heads, int32_t kv_heads, int32_t head_dim, AttentionPlan& plan) {
  if (head_dim <= 0 || head_dim > kMaxQueries) return false;
  const int32_t group = heads / kv_heads;
  // The largest divisor of the group that fits: K/V tiles are shared by more heads.
  int32_t qh = 1;
  for (int32_t d = 1; d <= group; ++d) {
    if (group % d == 0 && d * head_dim <= kMaxQueries && d <= kMaxHeadsRows) qh = d;
  }
  int32_t qr = kMaxQueries / (qh * head_dim);
  qr = qr < kMaxHeadsRows / qh ? qr : kMaxHeadsRows / qh;
  qr = qr < 16 ? qr : 16;
  int32_t keys = kMaxTileFloats / (head_dim + 1);
  keys = keys < kWarp ? keys : kWarp;
  if (keys < 1) return false;
  plan.heads_per_block = qh;
  plan.rows_per_tile = qr;
  plan.tile_keys = keys;
  const int32_t nq = qh * qr;
  plan.shared_bytes = sizeof(float) * (size_t(nq) * head_dim + size_t(keys) * (head_dim + 1) +
                                       size_t(nq) * keys + 3 * size_t(nq));
  return true;
}

void attention(cudaStream_t s, const AttentionArgs& a, const AttentionPlan& p) {
  const int32_t group = a.heads / a.kv_heads;
  const dim3 grid(static_cast<unsigned>(a.kv_heads * (group / p.heads_per_block)),
                  static_cast<unsigned>(p.tiles), static_cast<unsigned>(p.splits));
  attention_kernel<<<grid, kThreads, p.shared_bytes, s>>>(a, p);
  if (p.splits > 1) {
    combine_kernel<<<static_cast<unsigned>(a.n * a.heads), 128, 0, s>>>(a, p.splits);
  }
}

}  // namespace tsr::gpu
