#include "cpu_packed_matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cpu_dtype.h"
#include "cpu_packed_kquant.h"
#include "cpu_simd.h"
#include "quant_formats/mxfp4.h"
#include "tessera/sdk/status.hpp"

namespace tsr::cpu {

using sdk::require;

namespace {

// Layout: a 64-byte header, then rows / 16 groups; a group holds, for each block of 32
// columns, the sixteen rows' f16 scales (32 bytes; MXFP4: E8M0 exponents, 16 bytes) and
// their weights as eight (Q8_0) or four (Q4_0, MXFP4) 64-byte vectors. In vector v, bytes
// 4r..4r+3 are row r's weights at columns 4v..4v+3 of the block: Q8_0 as w + 128 (u8, the
// operand vpdpbusd wants unsigned), Q4_0 and MXFP4 as their stored bytes, whose low
// nibbles are columns 4v..4v+3 and high nibbles 16 + 4v.. (so a mask and a shift give
// vectors v and v + 4; MXFP4's nibbles then index its levels plus 12 with one shuffle).
// An F16 group holds, for each column, the sixteen rows' values (32 bytes): one conversion
// gives a vector to multiply by one broadcast activation. The sizes equal the stored
// weights' (Q4_K and Q6_K: cpu_packed_kquant.cpp).
struct PackedHeader {
  uint32_t magic;
  uint32_t dtype;
  int64_t rows, cols;
  uint8_t reserved[40];
};
static_assert(sizeof(PackedHeader) == 64);

constexpr uint32_t kMagic = 0x50525354;  // "TSRP"
constexpr int64_t kGroupRows = 16;
// Rows of x per kernel call (their accumulators stay in registers; one pass of sixteen
// rows beats two of eight by 13 % for Q8_0 and 3 % for Q4_0 at B=16) and per cache chunk
// (their quantized blocks, or f32 values, stay in L2 while every weight group passes;
// F16 prompts: 64 rows ~100 tok/s pp512, 512 rows ~85).
constexpr int64_t kRowsPerCall = 16;
constexpr int64_t kRowsPerChunk = 64;
// How far ahead of the kernel the weight stream is prefetched (see group_rows).
constexpr int64_t kPrefetchBytes = 4096;

constexpr int64_t block_bytes(tsr_dtype d) {
  return d == TSR_DTYPE_MXFP4 ? 16 + 256 : 32 + (d == TSR_DTYPE_Q8_0 ? 512 : 256);
}
// What each packed weight is stored plus, as an unsigned operand: Q8_0 128, Q4_0 its
// offset 8, MXFP4's doubled E2M1 levels (-12 .. 12) 12.
constexpr int32_t weight_offset(tsr_dtype d) { return d == TSR_DTYPE_Q8_0 ? 128 : d == TSR_DTYPE_MXFP4 ? 12 : 8; }

int64_t group_bytes(tsr_dtype d, int64_t cols) {
  if (is_packed_kquant(d)) return kquant_group_bytes(d, cols);
  return d == TSR_DTYPE_F16 ? cols * kGroupRows * 2 : cols / kQBlock * block_bytes(d);
}

// x quantized to Q8_0 blocks, with each block's start value for the dot product: the
// weights' offset (128 for Q8_0, 8 for Q4_0) times minus the block's sum of values, which
// removes the offset's share exactly.
struct PackedX {
  int64_t blocks = 0;
  std::vector<int8_t> q;      // [rows][blocks * 32]
  std::vector<float> d;       // [rows][blocks]
  std::vector<int32_t> init;  // [rows][blocks]
};

__attribute__((target(TSR_VNNI_TARGET)))
void quantize_row_avx512(const float* x, int32_t offset, PackedX& out, int64_t r) {
  for (int64_t b = 0; b < out.blocks; ++b) {
    const int64_t i = r * out.blocks + b;
    __m512i lo, hi;
    out.d[i] = quantize_block_avx512(x + b * kQBlock, &lo, &hi);
    out.init[i] = -offset * _mm512_reduce_add_epi32(_mm512_add_epi32(lo, hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&out.q[i * kQBlock]), _mm512_cvtsepi32_epi8(lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&out.q[i * kQBlock + 16]), _mm512_cvtsepi32_epi8(hi));
  }
}

// The same values without AVX-512, and each block's start value.
void quantize_row_portable(const float* x, int32_t offset, PackedX& out, int64_t r) {
  for (int64_t b = 0; b < out.blocks; ++b) {
    const int64_t i = r * out.blocks + b;
    out.d[i] = quantize_block_portable(x + b * kQBlock, &out.q[i * kQBlock]);
    int32_t sum = 0;
    for (int k = 0; k < kQBlock; ++k) sum += out.q[i * kQBlock + k];
    out.init[i] = -offset * sum;
  }
}

void quantize_x(const OpContext& ctx, const Matrix& x, int32_t offset, PackedX& out) {
  out.blocks = x.cols / kQBlock;
  out.q.resize(size_t(x.rows * x.cols));
  out.d.resize(size_t(x.rows * out.blocks));
  out.init.resize(out.d.size());
  const auto quantize_row = has_avx512() ? quantize_row_avx512 : quantize_row_portable;
#pragma omp parallel for num_threads(ctx.n_threads) if (x.rows >= kRowsPerCall)  // prompts
  for (int64_t r = 0; r < x.rows; ++r) quantize_row(x.row<float>(r), offset, out, r);
}

__attribute__((target(TSR_VNNI_TARGET), always_inline))
inline __m512i broadcast_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// MXFP4's sixteen levels plus 12 (0 .. 24), in each 128-bit lane for vpshufb.
__attribute__((target(TSR_VNNI_TARGET), always_inline))
inline __m512i mxfp4_levels() {
  alignas(16) uint8_t biased[16];
  for (int i = 0; i < 16; ++i) biased[i] = static_cast<uint8_t>(quant::kMXFP4Values[i] + 12);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(biased)));
}

// The sixteen rows' scales of a block: f16, or MXFP4's E8M0 exponents as half the power
// of two they code (its levels are doubled), as quant::e8m0_to_f32_half: (e - 1) << 23 as
// a float's bits, 0x00200000 << e below 2.
template <tsr_dtype D>
__attribute__((target(TSR_VNNI_TARGET), always_inline))
inline __m512 block_scales(const uint8_t* blk) {
  if constexpr (D == TSR_DTYPE_MXFP4) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), normal, tiny));
  } else {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
  }
}

// out[r0 + r][col0 .. col0 + 15] for NR rows of x against one group of sixteen weight rows.
template <tsr_dtype D, int NR>
__attribute__((target(TSR_VNNI_TARGET)))
void group_rows(const uint8_t* group, const PackedX& x, int64_t r0, const Matrix& out, int64_t col0) {
  const __m512i levels = D == TSR_DTYPE_MXFP4 ? mxfp4_levels() : _mm512_setzero_si512();
  __m512 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.blocks; ++b) {
    const uint8_t* blk = group + b * block_bytes(D);
    // Where the kernel spends long on each block (several rows of x, or Q4_0's unpacking)
    // the out-of-order window spans few blocks; asking for the lines kPrefetchBytes ahead
    // keeps the weight stream in flight (1.1B Q8_0 B=16: 101 -> 158-168 tok/s). A single
    // row of Q8_0 streams faster without (the hardware prefetcher keeps up, A/B measured).
    if constexpr (NR > 1 || D != TSR_DTYPE_Q8_0) {
      for (int64_t line = 0; line < block_bytes(D); line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchBytes + line), _MM_HINT_T0);
      }
    }
    const __m512 dw = block_scales<D>(blk);
    constexpr int64_t kQuants = block_bytes(D) - 256 * (D == TSR_DTYPE_Q8_0 ? 2 : 1);
    __m512i w[8];
    if constexpr (D == TSR_DTYPE_Q8_0) {
      for (int v = 0; v < 8; ++v) w[v] = _mm512_loadu_si512(blk + kQuants + 64 * v);
    } else {
      const __m512i nibble = _mm512_set1_epi8(0x0f);
      for (int v = 0; v < 4; ++v) {
        const __m512i packed = _mm512_loadu_si512(blk + kQuants + 64 * v);
        w[v] = _mm512_and_si512(packed, nibble);
        w[v + 4] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
      }
      if constexpr (D == TSR_DTYPE_MXFP4) {
        for (int v = 0; v < 8; ++v) w[v] = _mm512_shuffle_epi8(levels, w[v]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      const int64_t i = (r0 + r) * x.blocks + b;
      const int8_t* xq = &x.q[i * kQBlock];
      // Two chains, so that each dot product waits on half as many others.
      __m512i even = _mm512_set1_epi32(x.init[i]), odd = _mm512_setzero_si512();
      for (int v = 0; v < 8; v += 2) {
        even = _mm512_dpbusd_epi32(even, w[v], broadcast_i32(xq + 4 * v));
        odd = _mm512_dpbusd_epi32(odd, w[v + 1], broadcast_i32(xq + 4 * v + 4));
      }
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(x.d[i]));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)), scale, acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) _mm512_storeu_ps(out.row<float>(r0 + r) + col0, acc[r]);
}

template <tsr_dtype D>
void group_pass(const uint8_t* group, const PackedX& x, int64_t r0, int nr, const Matrix& out, int64_t col0) {
  dispatch_rows<kRowsPerCall>(nr, [&](auto n) { group_rows<D, decltype(n)::value>(group, x, r0, out, col0); });
}

// Q8_0 and Q4_0 on CPUs with AVX2 but no AVX-512 VNNI, on the same layout: each 64-byte
// vector of a block is two 32-byte halves (rows 0-7, 8-15), and _mm256_maddubs_epi16
// multiplies u8 by s8 into int16 pairs. Q4_0: the nibbles (0..15) by x (±127), pairs of at
// most 3810, whose sum over a block's eight vectors (30480) is still an int16; the -8 offset
// is x.init. Q8_0: |w| by x carrying w's sign (w is the stored byte - 128; |-128| read as
// u8 is 128), pairs of at most 32512, so each vector's go to int32 at once (no offset).
// _mm256_madd_epi16 by ones sums a row's pairs. AVX2 has sixteen registers: one or two
// rows of x take both halves in one pass over the group (decode: a second pass would read
// the group again after the memory stream, not during it); more rows take a pass per
// half, the second reading the group from cache.
constexpr int kAvx2RowsPerCall = 4;

template <tsr_dtype D, int NR>
__attribute__((target(TSR_AVX2_TARGET)))
void group_rows_avx2(const uint8_t* group, const PackedX& x, int64_t r0, const Matrix& out, int64_t col0) {
  constexpr int H = NR <= 2 ? 2 : 1;  // halves per pass
  constexpr int kVectors = D == TSR_DTYPE_Q8_0 ? 8 : 4;
  const __m256i nibble = _mm256_set1_epi8(0x0f), bias = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  for (int h0 = 0; h0 < 2; h0 += H) {
    __m256 acc[NR][H];
    for (int r = 0; r < NR; ++r) {
      for (int h = 0; h < H; ++h) acc[r][h] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < x.blocks; ++b) {
      const uint8_t* blk = group + b * block_bytes(D);
      __m256i sums[NR][H];  // Q4_0: int16 pairs; Q8_0: int32
      for (int r = 0; r < NR; ++r) {
        for (int h = 0; h < H; ++h) sums[r][h] = _mm256_setzero_si256();
      }
      for (int v = 0; v < kVectors; ++v) {
        for (int h = 0; h < H; ++h) {
          const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32 + 64 * v + 32 * (h0 + h)));
          if constexpr (D == TSR_DTYPE_Q4_0) {
            const __m256i lo = _mm256_and_si256(packed, nibble);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
            for (int r = 0; r < NR; ++r) {
              const int32_t* xq = reinterpret_cast<const int32_t*>(&x.q[((r0 + r) * x.blocks + b) * kQBlock]);
              sums[r][h] = _mm256_add_epi16(sums[r][h], _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(xq[v])),
                                                                       _mm256_maddubs_epi16(hi, _mm256_set1_epi32(xq[v + 4]))));
            }
          } else {
            const __m256i w = _mm256_xor_si256(packed, bias), w_abs = _mm256_abs_epi8(w);
            for (int r = 0; r < NR; ++r) {
              const int32_t* xq = reinterpret_cast<const int32_t*>(&x.q[((r0 + r) * x.blocks + b) * kQBlock]);
              const __m256i pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(_mm256_set1_epi32(xq[v]), w));
              sums[r][h] = _mm256_add_epi32(sums[r][h], _mm256_madd_epi16(pairs, ones));
            }
          }
        }
      }
      for (int r = 0; r < NR; ++r) {
        const int64_t i = (r0 + r) * x.blocks + b;
        for (int h = 0; h < H; ++h) {
          const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * (h0 + h))));
          __m256i sum = sums[r][h];
          if constexpr (D == TSR_DTYPE_Q4_0) sum = _mm256_add_epi32(_mm256_madd_epi16(sum, ones), _mm256_set1_epi32(x.init[i]));
          acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(x.d[i])), acc[r][h]);
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int h = 0; h < H; ++h) _mm256_storeu_ps(out.row<float>(r0 + r) + col0 + 8 * (h0 + h), acc[r][h]);
    }
  }
}

template <tsr_dtype D>
void group_pass_avx2(const uint8_t* group, const PackedX& x, int64_t r0, int nr, const Matrix& out, int64_t col0) {
  for (int r = 0; r < nr; r += kAvx2RowsPerCall) {
    dispatch_rows<kAvx2RowsPerCall>(std::min(kAvx2RowsPerCall, nr - r), [&](auto n) {
      group_rows_avx2<D, decltype(n)::value>(group, x, r0 + r, out, col0);
    });
  }
}

// x for the F16 kernel: tiles of up to kRowsPerCall rows, each stored column-major
// ([cols][n], n the tile's rows), so that the n activations one weight column multiplies
// are adjacent. Row-major rows a power of two apart in bytes share L1 sets, and eight or
// more of them at once evict each other (1.1B F16 B=16 ran at ~60 % of the FMA rate).
struct TransposedX {
  int64_t cols = 0;
  std::vector<float> v;  // tile t starts at t * kRowsPerCall * cols
  const float* tile(int64_t r0) const { return v.data() + r0 * cols; }
};

void transpose_x(const OpContext& ctx, const Matrix& x, TransposedX& out) {
  out.cols = x.cols;
  out.v.resize(size_t(x.rows * x.cols));
  const int64_t tiles = (x.rows + kRowsPerCall - 1) / kRowsPerCall;
#pragma omp parallel for num_threads(ctx.n_threads) if (x.rows >= 2 * kRowsPerCall)  // prompts
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t r0 = t * kRowsPerCall, n = std::min(kRowsPerCall, x.rows - r0);
    float* dst = out.v.data() + r0 * x.cols;
    for (int64_t r = 0; r < n; ++r) {
      const float* src = x.row<float>(r0 + r);
      for (int64_t k = 0; k < x.cols; ++k) dst[k * n + r] = src[k];
    }
  }
}

// As group_rows, for F16: out[r0 + r][col0 .. col0 + 15] = Σ_k x[r][k] · w[16 rows][k],
// with xt the tile of NR rows from r0. One conversion per column serves NR rows; with few
// rows, U partial sums over interleaved columns keep FMA latency from bounding the row
// (four chains of four cycles cover a 32-byte column per cycle).
template <int NR>
__attribute__((target(TSR_AVX512_TARGET ",f16c")))
void group_rows_f16(const uint8_t* group, const float* xt, int64_t cols, const Matrix& out, int64_t r0, int64_t col0) {
  constexpr int U = NR >= 4 ? 1 : NR >= 2 ? 2 : 4;
  __m512 acc[NR][U];
  for (int r = 0; r < NR; ++r) {
    for (int u = 0; u < U; ++u) acc[r][u] = _mm512_setzero_ps();
  }
  const auto* w = reinterpret_cast<const __m256i*>(group);  // one column of 16 f16 each
  int64_t k = 0;
  for (; k + U <= cols; k += U) {
    // Once per 64-byte line; a lone row streams fast enough on the hardware prefetcher.
    if (NR > 1 && (k * 32) % 64 == 0) _mm_prefetch(reinterpret_cast<const char*>(w + k) + kPrefetchBytes, _MM_HINT_T0);
    for (int u = 0; u < U; ++u) {
      const __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256(w + k + u));
      for (int r = 0; r < NR; ++r) acc[r][u] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xt[(k + u) * NR + r]), acc[r][u]);
    }
  }
  for (; k < cols; ++k) {
    const __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256(w + k));
    for (int r = 0; r < NR; ++r) acc[r][0] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xt[k * NR + r]), acc[r][0]);
  }
  for (int r = 0; r < NR; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = _mm512_add_ps(acc[r][0], acc[r][u]);
    _mm512_storeu_ps(out.row<float>(r0 + r) + col0, acc[r][0]);
  }
}

}  // namespace

bool packs(tsr_dtype dtype) {
  if (dtype == TSR_DTYPE_Q8_0 || dtype == TSR_DTYPE_Q4_0 || is_packed_kquant(dtype)) return has_avx2();
  return (dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_MXFP4) && has_vnni();
}

uint64_t packed_size(const Matrix& w) {
  const int64_t block = is_packed_kquant(w.dtype) ? 256 : w.dtype == TSR_DTYPE_F16 ? 1 : kQBlock;
  if (!packs(w.dtype) || w.rows % kGroupRows != 0 || w.cols % block != 0) return 0;
  return sizeof(PackedHeader) + uint64_t(w.rows / kGroupRows) * uint64_t(group_bytes(w.dtype, w.cols));
}

void pack_weight(OpContext& ctx, const Matrix& w, uint8_t* dst) {
  const PackedHeader header{kMagic, static_cast<uint32_t>(w.dtype), w.rows, w.cols, {}};
  std::memcpy(dst, &header, sizeof(header));
  const int64_t blocks = w.cols / kQBlock, bytes = block_bytes(w.dtype);
  uint8_t* groups = dst + sizeof(PackedHeader);
#pragma omp parallel for num_threads(ctx.n_threads)
  for (int64_t g = 0; g < w.rows / kGroupRows; ++g) {
    if (is_packed_kquant(w.dtype)) {
      pack_kquant_group(w, g, groups + g * group_bytes(w.dtype, w.cols));
      continue;
    }
    if (w.dtype == TSR_DTYPE_F16) {
      auto* out = reinterpret_cast<uint16_t*>(groups + g * group_bytes(w.dtype, w.cols));
      for (int r = 0; r < kGroupRows; ++r) {
        const auto* row = w.row<uint16_t>(g * kGroupRows + r);
        for (int64_t k = 0; k < w.cols; ++k) out[k * kGroupRows + r] = row[k];
      }
      continue;
    }
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* blk = groups + (g * blocks + b) * bytes;
      for (int r = 0; r < kGroupRows; ++r) {
        const uint8_t* row = w.row<uint8_t>(g * kGroupRows + r);
        // Four bytes of a row at a time: quants 4j..4j+3 of row r go to word r of group j.
        // Q8_0's int8 quants become uint8 + 128, which for a byte is flipping its top bit.
        if (w.dtype == TSR_DTYPE_Q8_0) {
          BlockQ8_0 src;
          std::memcpy(&src, row + b * sizeof(BlockQ8_0), sizeof(src));
          std::memcpy(blk + 2 * r, &src.d, 2);
          for (int j = 0; j < kQBlock / 4; ++j) {
            uint32_t word;
            std::memcpy(&word, src.qs + 4 * j, 4);
            word ^= 0x80808080u;
            std::memcpy(blk + 32 + 64 * j + 4 * r, &word, 4);
          }
        } else if (w.dtype == TSR_DTYPE_MXFP4) {
          quant::BlockMXFP4 src;
          std::memcpy(&src, row + b * sizeof(src), sizeof(src));
          blk[r] = src.e;
          for (int j = 0; j < kQBlock / 8; ++j) std::memcpy(blk + 16 + 64 * j + 4 * r, src.qs + 4 * j, 4);
        } else {
          BlockQ4_0 src;
          std::memcpy(&src, row + b * sizeof(BlockQ4_0), sizeof(src));
          std::memcpy(blk + 2 * r, &src.d, 2);
          for (int j = 0; j < kQBlock / 8; ++j) std::memcpy(blk + 32 + 64 * j + 4 * r, src.qs + 4 * j, 4);
        }
      }
    }
  }
}

PackedWeight as_packed(const tsr_tensor* t, const char* what) {
  const auto fail = [what](const char* problem) { return std::string(what) + problem; };
  require(t != nullptr && t->struct_size >= sizeof(tsr_tensor) && t->data != nullptr,
          [&] { return fail(": NULL, or a tensor without data"); });
  PackedHeader h;
  std::memcpy(&h, t->data, sizeof(h));
  const bool experts = t->ndim == 3 && t->shape[0] > 0 && t->shape[1] % kGroupRows == 0;
  require(h.magic == kMagic && packs(static_cast<tsr_dtype>(h.dtype)) && (t->ndim == 2 || experts) &&
              t->shape[0] * (experts ? t->shape[1] : 1) == h.rows && t->shape[t->ndim - 1] == h.cols,
          [&] { return fail(": not a weight this backend packed, or its shape changed"); });
  return {static_cast<tsr_dtype>(h.dtype), h.rows, h.cols, static_cast<const uint8_t*>(t->data) + sizeof(h)};
}

PackedWeight packed_rows(const PackedWeight& w, int64_t first, int64_t rows) {
  return {w.dtype, rows, w.cols, w.groups + first / kGroupRows * group_bytes(w.dtype, w.cols)};
}

namespace {

// Every (chunk of x rows, weight group) pair: a chunk's x stays in cache while the weight
// groups stream past, and call(group, g, r0, nr) takes up to kRowsPerCall rows at a time.
template <class Call>
void for_chunks_and_groups(OpContext& ctx, const Matrix& x, const PackedWeight& w, Call&& call) {
  const int64_t groups = w.rows / kGroupRows, bytes = group_bytes(w.dtype, w.cols);
  const int64_t chunks = (x.rows + kRowsPerChunk - 1) / kRowsPerChunk;
#pragma omp parallel for collapse(2) num_threads(ctx.n_threads) schedule(guided) if (w.rows * w.cols * x.rows >= (1 << 16))
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t end = std::min(x.rows, (c + 1) * kRowsPerChunk);
      for (int64_t r0 = c * kRowsPerChunk; r0 < end; r0 += kRowsPerCall) {
        call(w.groups + g * bytes, g, r0, static_cast<int>(std::min(kRowsPerCall, end - r0)));
      }
    }
  }
}

}  // namespace

void packed_matmul(OpContext& ctx, const Matrix& out, const Matrix& x, const PackedWeight& w) {
  if (w.dtype == TSR_DTYPE_F16) {
    TransposedX xt;
    transpose_x(ctx, x, xt);
    return for_chunks_and_groups(ctx, x, w, [&](const uint8_t* group, int64_t g, int64_t r0, int nr) {
      dispatch_rows<kRowsPerCall>(nr, [&](auto n) {
        group_rows_f16<decltype(n)::value>(group, xt.tile(r0), w.cols, out, r0, g * kGroupRows);
      });
    });
  }
  if (is_packed_kquant(w.dtype)) {
    KquantX xq;
    quantize_kquant_x(ctx, w.dtype, x, xq);
    return for_chunks_and_groups(ctx, x, w, [&](const uint8_t* group, int64_t g, int64_t r0, int nr) {
      kquant_group_pass(w.dtype, group, xq, r0, nr, out, g * kGroupRows);
    });
  }
  // The VNNI kernels take Q8_0 as w + 128 (u8), whose share x.init removes; the AVX2
  // kernel restores w's sign itself.
  const bool vnni = has_vnni(), q8 = w.dtype == TSR_DTYPE_Q8_0;
  PackedX xq;
  quantize_x(ctx, x, q8 && !vnni ? 0 : weight_offset(w.dtype), xq);
  const auto pass = w.dtype == TSR_DTYPE_MXFP4 ? &group_pass<TSR_DTYPE_MXFP4>  // packed with VNNI only
                    : vnni ? (q8 ? &group_pass<TSR_DTYPE_Q8_0> : &group_pass<TSR_DTYPE_Q4_0>)
                           : (q8 ? &group_pass_avx2<TSR_DTYPE_Q8_0> : &group_pass_avx2<TSR_DTYPE_Q4_0>);
  for_chunks_and_groups(ctx, x, w, [&](const uint8_t* group, int64_t g, int64_t r0, int nr) {
    pass(group, xq, r0, nr, out, g * kGroupRows);
  });
}

}  // namespace tsr::cpu
