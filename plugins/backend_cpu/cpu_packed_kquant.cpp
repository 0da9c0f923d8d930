#include "cpu_packed_kquant.h"

#include <immintrin.h>
#include <omp.h>

#include <cstring>

#include "cpu_simd.h"
#include "quant_formats/kquants.h"

namespace tsr::cpu {

namespace {

using quant::BlockQ4_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;
using quant::kQK_K;

constexpr int kGroupRows = 16;

// Q4_K, per super-block of a group (2368 bytes, a multiple of 64): the rows' d and dmin
// (f16), their sub-block scales ([8][16] bytes: sub-block s, row r) and mins as pairs of
// sub-blocks ([4][16][2]: a widening to int16 gives each row's lane the pair vpdpwssd
// multiplies by the activations' two sums), then each sub-block of 32 as four vectors:
// byte 4r + i of vector v holds row r's element 4v + i in its low nibble and 16 + 4v + i
// in its high one (so a mask and a shift give vectors v and v + 4, as for Q4_0).
struct Q4KLayout {
  static constexpr int64_t kD = 0, kDmin = 32, kScales = 64, kMins = 192, kQs = 320;
  static constexpr int64_t kBytes = kQs + 8 * 256;
};
// Q6_K (3392 bytes): d (f16) and 32 bytes of padding, the sixteen int8 scales of each
// sub-block of 16 ([16][16]), then each 32 columns (sub-blocks 2c and 2c + 1) as four
// vectors of low nibbles (as Q4_K's) and two of high bit pairs: bits 2q, 2q + 1 of byte
// 4r + i of pair vector h belong to vector 4h + q.
struct Q6KLayout {
  static constexpr int64_t kD = 0, kScales = 64, kChunks = 320, kChunkBytes = 384;
  static constexpr int64_t kBytes = kChunks + 8 * kChunkBytes;
};
static_assert(Q4KLayout::kBytes % 64 == 0 && Q6KLayout::kBytes % 64 == 0, "blocks stay 64-byte aligned");

// Sums per super-block in KquantX::sums: Q4_K, the activations' sums over each pair of
// sub-blocks of 32 as two int16 in one int32 (vpdpwssd's operand against the mins); Q6_K,
// -32 times the sum over each sub-block of 16, where its dot product starts (the bias of
// the stored quants, which are q + 32).
constexpr int64_t sums_per_block(tsr_dtype dtype) { return dtype == TSR_DTYPE_Q4_K ? 4 : 16; }

// How far ahead of the kernel the weight stream is prefetched (as cpu_packed_matmul.cpp).
constexpr int64_t kPrefetchBytes = 4096;

// The 256 quants of a super-block as unsigned values (Q4_K 0..15, Q6_K 0..63).
void unpack_quants(const BlockQ4_K& b, uint8_t* u) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      u[64 * c + l] = b.qs[32 * c + l] & 0xF;
      u[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
  }
}

void unpack_quants(const BlockQ6_K& b, uint8_t* u) {
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    for (int l = 0; l < 32; ++l) {
      u[128 * n + l] = static_cast<uint8_t>((ql[l] & 0xF) | ((qh[l] & 3) << 4));
      u[128 * n + l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      u[128 * n + l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      u[128 * n + l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
}

// Row r's low nibbles of 32 values at u into the four nibble vectors at dst (see Q4KLayout).
void pack_nibbles(const uint8_t* u, int r, uint8_t* dst) {
  for (int v = 0; v < 4; ++v) {
    for (int i = 0; i < 4; ++i) {
      dst[64 * v + 4 * r + i] = static_cast<uint8_t>((u[4 * v + i] & 0xF) | (u[16 + 4 * v + i] & 0xF) << 4);
    }
  }
}

void pack_q4_k_block(const uint8_t* const rows[kGroupRows], int64_t b, uint8_t* dst) {
  for (int r = 0; r < kGroupRows; ++r) {
    BlockQ4_K src;
    std::memcpy(&src, rows[r] + b * sizeof(BlockQ4_K), sizeof(src));
    std::memcpy(dst + Q4KLayout::kD + 2 * r, &src.d, 2);
    std::memcpy(dst + Q4KLayout::kDmin + 2 * r, &src.dmin, 2);
    for (int s = 0; s < 8; ++s) {
      uint8_t scale, min;
      quant::kquant_scale_min(s, src.scales, &scale, &min);
      dst[Q4KLayout::kScales + 16 * s + r] = scale;
      dst[Q4KLayout::kMins + 32 * (s / 2) + 2 * r + s % 2] = min;
    }
    uint8_t u[kQK_K];
    unpack_quants(src, u);
    for (int s = 0; s < 8; ++s) pack_nibbles(u + 32 * s, r, dst + Q4KLayout::kQs + 256 * s);
  }
}

void pack_q6_k_block(const uint8_t* const rows[kGroupRows], int64_t b, uint8_t* dst) {
  std::memset(dst, 0, Q6KLayout::kScales);
  for (int r = 0; r < kGroupRows; ++r) {
    BlockQ6_K src;
    std::memcpy(&src, rows[r] + b * sizeof(BlockQ6_K), sizeof(src));
    std::memcpy(dst + Q6KLayout::kD + 2 * r, &src.d, 2);
    for (int s = 0; s < 16; ++s) dst[Q6KLayout::kScales + 16 * s + r] = static_cast<uint8_t>(src.scales[s]);
    uint8_t u[kQK_K];
    unpack_quants(src, u);
    for (int c = 0; c < 8; ++c) {
      uint8_t* chunk = dst + Q6KLayout::kChunks + c * Q6KLayout::kChunkBytes;
      pack_nibbles(u + 32 * c, r, chunk);
      for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 4; ++i) {
          uint8_t bits = 0;
          for (int q = 0; q < 4; ++q) bits |= static_cast<uint8_t>(((u[32 * c + 4 * (4 * h + q) + i] >> 4) & 3) << (2 * q));
          chunk[256 + 64 * h + 4 * r + i] = bits;
        }
      }
    }
  }
}

// Four activations as one int32, to broadcast.
inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

__attribute__((target(TSR_VNNI_TARGET), always_inline))
inline __m512i broadcast_i32(const int8_t* p) { return _mm512_set1_epi32(load_i32(p)); }

// The dot products of one row of x against eight weight vectors (32 columns of sixteen
// rows) or four (16 columns), in two chains so that each waits on half as many others.
template <int V>
__attribute__((target(TSR_VNNI_TARGET), always_inline))
inline __m512i dot_vectors(__m512i start, const __m512i* w, const int8_t* xq) {
  __m512i even = start, odd = _mm512_setzero_si512();
  for (int v = 0; v < V; v += 2) {
    even = _mm512_dpbusd_epi32(even, w[v], broadcast_i32(xq + 4 * v));
    odd = _mm512_dpbusd_epi32(odd, w[v + 1], broadcast_i32(xq + 4 * v + 4));
  }
  return _mm512_add_epi32(even, odd);
}

__attribute__((target(TSR_VNNI_TARGET), always_inline))
inline void prefetch_lines(const uint8_t* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + line), _MM_HINT_T0);
}

// Σ over a super-block per row of x: dx · (d · Σ_s scale_s · (q·x)_s − dmin · Σ_s min_s · Σx_s).
template <int NR>
__attribute__((target(TSR_VNNI_TARGET)))
void q4_k_rows(const uint8_t* group, const KquantX& x, int64_t r0, const Matrix& out, int64_t col0) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  __m512 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.blocks; ++b) {
    const uint8_t* blk = group + b * Q4KLayout::kBytes;
    prefetch_lines(blk, Q4KLayout::kQs);
    __m512i isum[NR];
    for (int r = 0; r < NR; ++r) isum[r] = _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
      const uint8_t* qs = blk + Q4KLayout::kQs + 256 * s;
      prefetch_lines(qs, 256);
      __m512i w[8];
      for (int v = 0; v < 4; ++v) {
        const __m512i packed = _mm512_load_si512(qs + 64 * v);
        w[v] = _mm512_and_si512(packed, nibble);
        w[v + 4] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
      }
      const __m512i scale = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(blk + Q4KLayout::kScales + 16 * s)));
      for (int r = 0; r < NR; ++r) {
        const int8_t* xq = x.q.data() + (r0 + r) * x.cols + kQK_K * b + 32 * s;
        isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(dot_vectors<8>(_mm512_setzero_si512(), w, xq), scale));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + Q4KLayout::kD)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + Q4KLayout::kDmin)));
    for (int r = 0; r < NR; ++r) {
      const int64_t i = (r0 + r) * x.blocks + b;
      const int32_t* pair_sums = x.sums.data() + i * sums_per_block(TSR_DTYPE_Q4_K);
      __m512i msum = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        const __m512i mins = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + Q4KLayout::kMins + 32 * p)));
        msum = _mm512_dpwssd_epi32(msum, mins, _mm512_set1_epi32(pair_sums[p]));
      }
      const __m512 dx = _mm512_set1_ps(x.d[size_t(i)]);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(d, dx), acc[r]);
      acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) _mm512_storeu_ps(out.row<float>(r0 + r) + col0, acc[r]);
}

// Σ over a super-block per row of x: dx · d · Σ_s scale_s · ((q·x)_s − 32 Σx_s), the
// second term as each dot product's start.
template <int NR>
__attribute__((target(TSR_VNNI_TARGET)))
void q6_k_rows(const uint8_t* group, const KquantX& x, int64_t r0, const Matrix& out, int64_t col0) {
  const __m512i nibble = _mm512_set1_epi8(0x0f), high = _mm512_set1_epi8(0x30);
  __m512 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.blocks; ++b) {
    const uint8_t* blk = group + b * Q6KLayout::kBytes;
    prefetch_lines(blk, Q6KLayout::kChunks);
    __m512i isum[NR];
    for (int r = 0; r < NR; ++r) isum[r] = _mm512_setzero_si512();
    for (int c = 0; c < 8; ++c) {
      const uint8_t* chunk = blk + Q6KLayout::kChunks + c * Q6KLayout::kChunkBytes;
      prefetch_lines(chunk, Q6KLayout::kChunkBytes);
      __m512i w[8];
      for (int v = 0; v < 4; ++v) {
        const __m512i packed = _mm512_load_si512(chunk + 64 * v);
        w[v] = _mm512_and_si512(packed, nibble);
        w[v + 4] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
      }
      // Pair q of each byte to bits 4-5 (16-bit shifts: the mask drops what crosses bytes),
      // OR-ed in by one ternary-logic op: w | (bits & 0x30).
      for (int h = 0; h < 2; ++h) {
        const __m512i pairs = _mm512_load_si512(chunk + 256 + 64 * h);
        const __m512i at4[4] = {_mm512_slli_epi16(pairs, 4), _mm512_slli_epi16(pairs, 2), pairs, _mm512_srli_epi16(pairs, 2)};
        for (int q = 0; q < 4; ++q) w[4 * h + q] = _mm512_ternarylogic_epi32(w[4 * h + q], at4[q], high, 0xF8);
      }
      const auto* scales = reinterpret_cast<const __m128i*>(blk + Q6KLayout::kScales + 32 * c);
      const __m512i scale_a = _mm512_cvtepi8_epi32(_mm_load_si128(scales));
      const __m512i scale_b = _mm512_cvtepi8_epi32(_mm_load_si128(scales + 1));
      for (int r = 0; r < NR; ++r) {
        const int64_t i = (r0 + r) * x.blocks + b;
        const int32_t* start = x.sums.data() + i * sums_per_block(TSR_DTYPE_Q6_K) + 2 * c;
        const int8_t* xq = x.q.data() + (r0 + r) * x.cols + kQK_K * b + 32 * c;
        const __m512i da = dot_vectors<4>(_mm512_set1_epi32(start[0]), w, xq);
        const __m512i db = dot_vectors<4>(_mm512_set1_epi32(start[1]), w + 4, xq + 16);
        isum[r] = _mm512_add_epi32(isum[r], _mm512_add_epi32(_mm512_mullo_epi32(da, scale_a), _mm512_mullo_epi32(db, scale_b)));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + Q6KLayout::kD)));
    for (int r = 0; r < NR; ++r) {
      const __m512 dx = _mm512_set1_ps(x.d[size_t((r0 + r) * x.blocks + b)]);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(d, dx), acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) _mm512_storeu_ps(out.row<float>(r0 + r) + col0, acc[r]);
}

// AVX2 (no AVX-512 VNNI), on the same layout: each 64-byte vector is two 32-byte halves
// (rows 0-7, 8-15), one pass per half. vpmaddubsw multiplies the u8 quants by the s8
// activations into int16 pairs and vpmaddwd by ones sums a row's pairs to int32. Q4_K's
// pairs reach 2·15·127 = 3810, so a sub-block's eight vectors (30480) add up in int16;
// Q6_K's reach 2·63·127 = 16002, so they go to int32 two vectors at a time.
template <int NR>
__attribute__((target(TSR_AVX2_TARGET)))
void q4_k_rows_avx2(const uint8_t* group, const KquantX& x, int64_t r0, const Matrix& out, int64_t col0) {
  const __m256i nibble = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  for (int h = 0; h < 2; ++h) {
    __m256 acc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < x.blocks; ++b) {
      const uint8_t* blk = group + b * Q4KLayout::kBytes;
      __m256i isum[NR];
      for (int r = 0; r < NR; ++r) isum[r] = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const uint8_t* qs = blk + Q4KLayout::kQs + 256 * s + 32 * h;
        __m256i w[8];
        for (int v = 0; v < 4; ++v) {
          const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 64 * v));
          w[v] = _mm256_and_si256(packed, nibble);
          w[v + 4] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
        }
        const __m256i scale = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + Q4KLayout::kScales + 16 * s + 8 * h)));
        for (int r = 0; r < NR; ++r) {
          const int8_t* xq = x.q.data() + (r0 + r) * x.cols + kQK_K * b + 32 * s;
          __m256i pairs = _mm256_setzero_si256();
          for (int v = 0; v < 8; ++v) pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w[v], _mm256_set1_epi32(load_i32(xq + 4 * v))));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_mullo_epi32(_mm256_madd_epi16(pairs, ones), scale));
        }
      }
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + Q4KLayout::kD + 16 * h)));
      const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + Q4KLayout::kDmin + 16 * h)));
      for (int r = 0; r < NR; ++r) {
        const int64_t i = (r0 + r) * x.blocks + b;
        const int32_t* pair_sums = x.sums.data() + i * sums_per_block(TSR_DTYPE_Q4_K);
        __m256i msum = _mm256_setzero_si256();
        for (int p = 0; p < 4; ++p) {
          const __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + Q4KLayout::kMins + 32 * p + 16 * h)));
          msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mins, _mm256_set1_epi32(pair_sums[p])));
        }
        const __m256 dx = _mm256_set1_ps(x.d[size_t(i)]);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(d, dx), acc[r]);
        acc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, dx), acc[r]);
      }
    }
    for (int r = 0; r < NR; ++r) _mm256_storeu_ps(out.row<float>(r0 + r) + col0 + 8 * h, acc[r]);
  }
}

// Σ over four vectors (16 columns) of one row, from `start`: two int16 pair sums at a
// time, then int32.
__attribute__((target(TSR_AVX2_TARGET), always_inline))
inline __m256i dot4_avx2(const __m256i* w, const int8_t* xq, int32_t start) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum = _mm256_set1_epi32(start);
  for (int v = 0; v < 4; v += 2) {
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(w[v], _mm256_set1_epi32(load_i32(xq + 4 * v))),
                                           _mm256_maddubs_epi16(w[v + 1], _mm256_set1_epi32(load_i32(xq + 4 * v + 4))));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, ones));
  }
  return sum;
}

template <int NR>
__attribute__((target(TSR_AVX2_TARGET)))
void q6_k_rows_avx2(const uint8_t* group, const KquantX& x, int64_t r0, const Matrix& out, int64_t col0) {
  const __m256i nibble = _mm256_set1_epi8(0x0f), high = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {
    __m256 acc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < x.blocks; ++b) {
      const uint8_t* blk = group + b * Q6KLayout::kBytes;
      __m256i isum[NR];
      for (int r = 0; r < NR; ++r) isum[r] = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        const uint8_t* chunk = blk + Q6KLayout::kChunks + c * Q6KLayout::kChunkBytes + 32 * h;
        __m256i w[8];
        for (int v = 0; v < 4; ++v) {
          const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 64 * v));
          w[v] = _mm256_and_si256(packed, nibble);
          w[v + 4] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
        }
        for (int hh = 0; hh < 2; ++hh) {
          const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 256 + 64 * hh));
          const __m256i at4[4] = {_mm256_slli_epi16(pairs, 4), _mm256_slli_epi16(pairs, 2), pairs, _mm256_srli_epi16(pairs, 2)};
          for (int q = 0; q < 4; ++q) w[4 * hh + q] = _mm256_or_si256(w[4 * hh + q], _mm256_and_si256(at4[q], high));
        }
        const uint8_t* scales = blk + Q6KLayout::kScales + 32 * c + 8 * h;
        const __m256i scale_a = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales)));
        const __m256i scale_b = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 16)));
        for (int r = 0; r < NR; ++r) {
          const int64_t i = (r0 + r) * x.blocks + b;
          const int32_t* start = x.sums.data() + i * sums_per_block(TSR_DTYPE_Q6_K) + 2 * c;
          const int8_t* xq = x.q.data() + (r0 + r) * x.cols + kQK_K * b + 32 * c;
          isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(_mm256_mullo_epi32(dot4_avx2(w, xq, start[0]), scale_a),
                                                               _mm256_mullo_epi32(dot4_avx2(w + 4, xq + 16, start[1]), scale_b)));
        }
      }
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + Q6KLayout::kD + 16 * h)));
      for (int r = 0; r < NR; ++r) {
        const __m256 dx = _mm256_set1_ps(x.d[size_t((r0 + r) * x.blocks + b)]);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(d, dx), acc[r]);
      }
    }
    for (int r = 0; r < NR; ++r) _mm256_storeu_ps(out.row<float>(r0 + r) + col0 + 8 * h, acc[r]);
  }
}

// Rows of x per kernel call: their accumulators and sub-block sums stay in registers with
// the eight weight vectors (sixteen registers on AVX2: two rows).
constexpr int kRowsPerKernel = 8;
constexpr int kAvx2RowsPerKernel = 2;

void quantize_row(tsr_dtype dtype, const float* src, KquantX& out, int64_t r, BlockQ8_K* tmp) {
  quant::quantize_row_q8_k(src, tmp, out.cols);
  const int64_t per = sums_per_block(dtype);
  for (int64_t b = 0; b < out.blocks; ++b) {
    const BlockQ8_K& q = tmp[b];
    const int64_t i = r * out.blocks + b;
    std::memcpy(&out.q[size_t(r * out.cols + b * kQK_K)], q.qs, kQK_K);
    out.d[size_t(i)] = q.d;
    int32_t* sums = &out.sums[size_t(i * per)];
    if (dtype == TSR_DTYPE_Q6_K) {
      for (int s = 0; s < 16; ++s) sums[s] = -32 * q.bsums[s];
      continue;
    }
    for (int p = 0; p < 4; ++p) {
      const auto lo = static_cast<uint16_t>(q.bsums[4 * p] + q.bsums[4 * p + 1]);
      const auto hi = static_cast<uint16_t>(q.bsums[4 * p + 2] + q.bsums[4 * p + 3]);
      sums[p] = static_cast<int32_t>(uint32_t(lo) | uint32_t(hi) << 16);
    }
  }
}

}  // namespace

bool is_packed_kquant(tsr_dtype dtype) { return dtype == TSR_DTYPE_Q4_K || dtype == TSR_DTYPE_Q6_K; }

int64_t kquant_group_bytes(tsr_dtype dtype, int64_t cols) {
  return cols / kQK_K * (dtype == TSR_DTYPE_Q4_K ? Q4KLayout::kBytes : Q6KLayout::kBytes);
}

void pack_kquant_group(const Matrix& w, int64_t g, uint8_t* dst) {
  const uint8_t* rows[kGroupRows];
  for (int r = 0; r < kGroupRows; ++r) rows[r] = w.row<uint8_t>(g * kGroupRows + r);
  const bool q4 = w.dtype == TSR_DTYPE_Q4_K;
  const int64_t bytes = q4 ? Q4KLayout::kBytes : Q6KLayout::kBytes;
  for (int64_t b = 0; b < w.cols / kQK_K; ++b) {
    if (q4) {
      pack_q4_k_block(rows, b, dst + b * bytes);
    } else {
      pack_q6_k_block(rows, b, dst + b * bytes);
    }
  }
}

void quantize_kquant_x(const OpContext& ctx, tsr_dtype dtype, const Matrix& x, KquantX& out) {
  out.cols = x.cols;
  out.blocks = x.cols / kQK_K;
  out.q.resize(size_t(x.rows * x.cols));
  out.d.resize(size_t(x.rows * out.blocks));
  out.sums.resize(size_t(x.rows * out.blocks * sums_per_block(dtype)));
#pragma omp parallel num_threads(ctx.n_threads) if (x.rows >= 16)  // prompts
  {
    std::vector<BlockQ8_K> tmp(size_t(out.blocks));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < x.rows; ++r) quantize_row(dtype, x.row<float>(r), out, r, tmp.data());
  }
}

void kquant_group_pass(tsr_dtype dtype, const uint8_t* group, const KquantX& x, int64_t r0, int nr,
                       const Matrix& out, int64_t col0) {
  if (!has_vnni()) {
    for (int r = 0; r < nr; r += kAvx2RowsPerKernel) {
      dispatch_rows<kAvx2RowsPerKernel>(std::min(kAvx2RowsPerKernel, nr - r), [&](auto n) {
        if (dtype == TSR_DTYPE_Q4_K) {
          q4_k_rows_avx2<decltype(n)::value>(group, x, r0 + r, out, col0);
        } else {
          q6_k_rows_avx2<decltype(n)::value>(group, x, r0 + r, out, col0);
        }
      });
    }
    return;
  }
  for (int r = 0; r < nr; r += kRowsPerKernel) {
    dispatch_rows<kRowsPerKernel>(std::min(kRowsPerKernel, nr - r), [&](auto n) {
      if (dtype == TSR_DTYPE_Q4_K) {
        q4_k_rows<decltype(n)::value>(group, x, r0 + r, out, col0);
      } else {
        q6_k_rows<decltype(n)::value>(group, x, r0 + r, out, col0);
      }
    });
  }
}

}  // namespace tsr::cpu
