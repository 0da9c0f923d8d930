#include "cpu_quant_matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu_dtype.h"
#include "cpu_ops.h"
#include "cpu_simd.h"
#include "quant_formats/ggml_blocks.h"
#include "quant_formats/iq4.h"
#include "quant_formats/mxfp4.h"

namespace tsr::cpu {

namespace {

// Rows of x handled per pass over a weight row: their accumulators stay in registers.
constexpr int kRowGroup = 8;
// Weight rows per parallel work item: large enough to amortize scheduling.
constexpr int64_t kRowsPerTask = 16;

// x quantized to blocks of 32 int8 with one float scale per block. For the VNNI kernels
// (quantize_rows' `biased`) the values are stored plus 128, as u8, and each pair of block
// scales is spread over a 16-float vector (8 lanes each), the layout those kernels multiply by.
struct QuantizedRows {
  int64_t blocks = 0;
  std::vector<int8_t> q;      // [rows][blocks * 32]
  std::vector<float> d;       // [rows][blocks]
  std::vector<float> d_pair;  // biased only: [rows][blocks / 2][16]
};

void quantize_rows_generic(const Matrix& x, QuantizedRows& out) {
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t b = 0; b < out.blocks; ++b) {
      out.d[size_t(r * out.blocks + b)] =
          quantize_block_portable(x.row<float>(r) + b * kQBlock, &out.q[size_t((r * out.blocks + b) * kQBlock)]);
    }
  }
}

// The same values as quantize_rows_generic (round to nearest even, as nearbyint), plus 128.
__attribute__((target(TSR_VNNI_TARGET)))
void quantize_rows_biased(const Matrix& x, QuantizedRows& out) {
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* src = x.row<float>(r);
    for (int64_t b = 0; b < out.blocks; ++b) {
      __m512i qlo, qhi;
      const float d = quantize_block_avx512(src + b * kQBlock, &qlo, &qhi);
      int8_t* q = &out.q[size_t((r * out.blocks + b) * kQBlock)];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm_xor_si128(_mm512_cvtsepi32_epi8(qlo), bias));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm_xor_si128(_mm512_cvtsepi32_epi8(qhi), bias));
      out.d[size_t(r * out.blocks + b)] = d;
    }
    for (int64_t p = 0; p < out.blocks / 2; ++p) {
      const float* d = &out.d[size_t(r * out.blocks + 2 * p)];
      float* pair = &out.d_pair[size_t((r * (out.blocks / 2) + p) * 16)];
      std::fill(pair, pair + 8, d[0]);
      std::fill(pair + 8, pair + 16, d[1]);
    }
  }
}

void quantize_rows(const Matrix& x, bool biased, QuantizedRows& out) {
  out.blocks = x.cols / kQBlock;
  out.q.resize(size_t(x.rows * out.blocks * kQBlock));
  out.d.resize(size_t(x.rows * out.blocks));
  if (!biased) return quantize_rows_generic(x, out);
  out.d_pair.resize(size_t(x.rows * (out.blocks / 2) * 16));
  quantize_rows_biased(x, out);
}

// The 32 weights of block b of a row as int8, and the block's scale. Q4_0 and IQ4_NL
// blocks share a layout (f16 scale, 16 bytes of nibbles); IQ4_NL's nibbles index its table.
// MXFP4's index its doubled E2M1 levels, under half its power-of-two scale (as ggml's).
inline float load_block(tsr_dtype dtype, const uint8_t* row, int64_t b, int8_t* w) {
  if (dtype == TSR_DTYPE_MXFP4) {
    const auto* blk = reinterpret_cast<const quant::BlockMXFP4*>(row) + b;
    for (int i = 0; i < kQBlock / 2; ++i) {
      w[i] = quant::kMXFP4Values[blk->qs[i] & 0x0f];
      w[i + kQBlock / 2] = quant::kMXFP4Values[blk->qs[i] >> 4];
    }
    return quant::e8m0_to_f32_half(blk->e);
  }
  if (dtype == TSR_DTYPE_Q8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    std::memcpy(w, blk->qs, kQBlock);
    return f16_to_f32(blk->d);
  }
  if (dtype == TSR_DTYPE_Q5_0) {
    const auto* blk = reinterpret_cast<const quant::BlockQ5_0*>(row) + b;
    for (int i = 0; i < kQBlock; ++i) w[i] = static_cast<int8_t>(quant::q5_value(blk->qs, blk->qh, i) - 16);
    return f16_to_f32(blk->d);
  }
  const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
  const auto level = [&](int nibble) {
    return dtype == TSR_DTYPE_IQ4_NL ? quant::kIQ4Values[nibble] : static_cast<int8_t>(nibble - 8);
  };
  for (int i = 0; i < kQBlock / 2; ++i) {
    w[i] = level(blk->qs[i] & 0x0f);
    w[i + kQBlock / 2] = level(blk->qs[i] >> 4);
  }
  return f16_to_f32(blk->d);
}

// Portable path: integer dot products per block, scaled in float.
void rows_generic(tsr_dtype dtype, const uint8_t* wrow, const QuantizedRows& xq, int64_t r0,
                  int nr, float* sums) {
  int8_t w[kQBlock];
  for (int r = 0; r < nr; ++r) sums[r] = 0;
  for (int64_t b = 0; b < xq.blocks; ++b) {
    const float dw = load_block(dtype, wrow, b, w);
    for (int r = 0; r < nr; ++r) {
      const int8_t* xv = &xq.q[size_t(((r0 + r) * xq.blocks + b) * kQBlock)];
      int32_t acc = 0;
      for (int i = 0; i < kQBlock; ++i) acc += int32_t(xv[i]) * w[i];
      sums[r] += float(acc) * dw * xq.d[size_t((r0 + r) * xq.blocks + b)];
    }
  }
}

// Loads block b's 32 weights into a register as int8. AVX2 only, a subset of the VNNI
// kernels' target, so that it inlines into those and into the AVX2 kernels alike.
template <tsr_dtype D>
__attribute__((target(TSR_AVX2_TARGET), always_inline))
inline __m256i load_block_avx2(const uint8_t* row, int64_t b, float* dw) {
  if constexpr (D == TSR_DTYPE_Q8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    *dw = _cvtsh_ss(blk->d);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
  } else if constexpr (D == TSR_DTYPE_Q5_0) {
    const auto* blk = reinterpret_cast<const quant::BlockQ5_0*>(row) + b;
    *dw = _cvtsh_ss(blk->d);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    const __m256i low = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0f)),
                                         _mm_and_si128(packed, _mm_set1_epi8(0x0f)));
    // Byte j takes bit j of qh: each byte gets its qh byte (j / 8), then tests bit j % 8.
    uint32_t bits;
    std::memcpy(&bits, blk->qh, sizeof bits);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    const __m256i fifth = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(low, fifth), _mm256_set1_epi8(16));
  } else if constexpr (D == TSR_DTYPE_MXFP4) {
    const auto* blk = reinterpret_cast<const quant::BlockMXFP4*>(row) + b;
    *dw = quant::e8m0_to_f32_half(blk->e);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    const __m128i lo = _mm_and_si128(packed, _mm_set1_epi8(0x0f));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0f));
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kMXFP4Values));
    return _mm256_set_m128i(_mm_shuffle_epi8(table, hi), _mm_shuffle_epi8(table, lo));
  } else {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    *dw = _cvtsh_ss(blk->d);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    const __m128i lo = _mm_and_si128(packed, _mm_set1_epi8(0x0f));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0f));
    if constexpr (D == TSR_DTYPE_IQ4_NL) {  // the nibbles index the 16-level table
      const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIQ4Values));
      return _mm256_set_m128i(_mm_shuffle_epi8(table, hi), _mm_shuffle_epi8(table, lo));
    }
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
  }
}

__attribute__((target(TSR_AVX2_TARGET), always_inline))
inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// Two consecutive weight blocks in one 512-bit register (a Q8_0 row interleaves scales and
// values, so the halves load separately).
template <tsr_dtype D>
__attribute__((target(TSR_VNNI_TARGET), always_inline))
inline __m512i load_pair_avx512(const uint8_t* row, int64_t b, float* dw0, float* dw1) {
  const __m256i lo = load_block_avx2<D>(row, b, dw0);
  const __m256i hi = load_block_avx2<D>(row, b + 1, dw1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// VNNI path, two blocks per instruction: lanes 0-7 sum block b, lanes 8-15 block b+1, each
// half scaled by its own dw·dx. vpdpbusd multiplies u8 by s8, so x comes biased, x + 128
// as u8, and the bias's share, 128·Σw, is subtracted by starting the accumulation from
// -128·Σw, computed once per weight pair for all rows of x. (A weight of -128, valid Q8_0
// that llama.cpp's quantizer never makes, needs no special case this way.)
// NR (the rows of x) is a compile-time constant, so that the accumulators live in
// registers: indexed by a run-time count they went to the stack, and every FMA waited for
// a store to forward.
template <tsr_dtype D, int NR>
__attribute__((target(TSR_VNNI_TARGET)))
void rows_vnni512(const uint8_t* wrow, const QuantizedRows& xq, int64_t r0, float* sums) {
  constexpr int nr = NR;
  const int64_t pairs = xq.blocks / 2;
  __m512 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  const int8_t* xbase = xq.q.data() + r0 * xq.blocks * kQBlock;
  const float* dbase = xq.d_pair.data() + r0 * pairs * 16;  // empty for a single block
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t p = 0; p < pairs; ++p) {
    float dw0, dw1;
    const __m512i w = load_pair_avx512<D>(wrow, 2 * p, &dw0, &dw1);
    const __m512i unbias = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, w));
    const __m512 dw = _mm512_insertf32x8(_mm512_set1_ps(dw0), _mm256_set1_ps(dw1), 1);
    for (int r = 0; r < nr; ++r) {
      const __m512i x = _mm512_loadu_si512(xbase + (r * xq.blocks + 2 * p) * kQBlock);
      const __m512i dot = _mm512_dpbusd_epi32(unbias, x, w);
      const __m512 scale = _mm512_mul_ps(dw, _mm512_loadu_ps(dbase + (r * pairs + p) * 16));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[r]);
    }
  }
  for (int r = 0; r < nr; ++r) sums[r] = _mm512_reduce_add_ps(acc[r]);
  if (const int64_t b = 2 * pairs; b < xq.blocks) {  // an odd last block
    float dw;
    const __m256i w = load_block_avx2<D>(wrow, b, &dw);
    const __m256i unbias = _mm256_sub_epi32(_mm256_setzero_si256(),
                                            _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(static_cast<char>(0x80)), w));
    for (int r = 0; r < nr; ++r) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xbase + (r * xq.blocks + b) * kQBlock));
      const __m256i dot = _mm256_dpbusd_epi32(unbias, x, w);
      sums[r] += hsum(_mm256_cvtepi32_ps(dot)) * dw * xq.d[size_t((r0 + r) * xq.blocks + b)];
    }
  }
}

template <tsr_dtype D>
void rows_vnni(const uint8_t* wrow, const QuantizedRows& xq, int64_t r0, int nr, float* sums) {
  dispatch_rows<kRowGroup>(nr, [&](auto n) { rows_vnni512<D, decltype(n)::value>(wrow, xq, r0, sums); });
}

// AVX2 path (no VNNI), a block per step as ggml's: _mm256_maddubs_epi16 multiplies u8 by
// s8, so |w| is the unsigned side and x takes w's sign (x is within ±127, so the pair sums
// stay below the int16 limit; |−128| read as u8 is 128, so a −128 weight is exact). With
// few rows, U partial sums over interleaved blocks keep the FMA latency from bounding a
// row (one chain: 4 cycles a block); AVX2's sixteen registers allow no more.
template <tsr_dtype D, int NR>
__attribute__((target(TSR_AVX2_TARGET), always_inline))
inline void block_avx2(const uint8_t* wrow, const QuantizedRows& xq, int64_t r0, int64_t b, __m256 (&acc)[NR]) {
  float dw;
  const __m256i w = load_block_avx2<D>(wrow, b, &dw);
  const __m256i w_abs = _mm256_sign_epi8(w, w);
  for (int r = 0; r < NR; ++r) {
    const int64_t i = (r0 + r) * xq.blocks + b;
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&xq.q[size_t(i * kQBlock)]));
    const __m256i pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w));
    const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    acc[r] = _mm256_fmadd_ps(dot, _mm256_set1_ps(dw * xq.d[size_t(i)]), acc[r]);
  }
}

template <tsr_dtype D, int NR>
__attribute__((target(TSR_AVX2_TARGET)))
void rows_avx2(const uint8_t* wrow, const QuantizedRows& xq, int64_t r0, float* sums) {
  constexpr int U = NR == 1 ? 4 : NR == 2 ? 2 : 1;
  __m256 acc[U][NR];
  for (int u = 0; u < U; ++u) {
    for (int r = 0; r < NR; ++r) acc[u][r] = _mm256_setzero_ps();
  }
  int64_t b = 0;
  for (; b + U <= xq.blocks; b += U) {
    for (int u = 0; u < U; ++u) block_avx2<D, NR>(wrow, xq, r0, b + u, acc[u]);
  }
  for (; b < xq.blocks; ++b) block_avx2<D, NR>(wrow, xq, r0, b, acc[0]);
  for (int r = 0; r < NR; ++r) {
    for (int u = 1; u < U; ++u) acc[0][r] = _mm256_add_ps(acc[0][r], acc[u][r]);
    sums[r] = hsum(acc[0][r]);
  }
}

template <class Kernel>
void for_weight_rows(OpContext& ctx, const Matrix& out, const Matrix& w, int64_t x_rows,
                     int64_t macs, Kernel&& kernel) {
  const int64_t tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
#pragma omp parallel for num_threads(ctx.n_threads) schedule(guided) if (macs >= (1 << 16))
  for (int64_t t = 0; t < tasks; ++t) {
    float sums[kRowGroup];
    const int64_t end = std::min(w.rows, (t + 1) * kRowsPerTask);
    for (int64_t r0 = 0; r0 < x_rows; r0 += kRowGroup) {
      const int nr = static_cast<int>(std::min<int64_t>(kRowGroup, x_rows - r0));
      for (int64_t j = t * kRowsPerTask; j < end; ++j) {
        kernel(j, r0, nr, sums);
        for (int r = 0; r < nr; ++r) out.row<float>(r0 + r)[j] = sums[r];
      }
    }
  }
}

// NR at compile time, as rows_vnni512, so that the accumulators stay in registers. Each
// row keeps U partial sums over interleaved 8-column chunks: with one, every FMA waited
// for the previous one (4 cycles per 16 bytes of weights, a third of the bandwidth).
template <int NR>
__attribute__((target(TSR_AVX2_TARGET)))
void f16_rows(const uint16_t* wrow, const Matrix& x, int64_t r0, float* sums) {
  constexpr int nr = NR;
  constexpr int U = NR >= 4 ? 1 : NR >= 2 ? 2 : 4;
  __m256 acc[NR][U];
  for (int r = 0; r < NR; ++r) {
    for (int u = 0; u < U; ++u) acc[r][u] = _mm256_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 8 * U <= x.cols; c += 8 * U) {
    for (int u = 0; u < U; ++u) {
      const __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wrow + c + 8 * u)));
      for (int r = 0; r < nr; ++r) {
        acc[r][u] = _mm256_fmadd_ps(_mm256_loadu_ps(x.row<float>(r0 + r) + c + 8 * u), wv, acc[r][u]);
      }
    }
  }
  for (int r = 0; r < nr; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = _mm256_add_ps(acc[r][0], acc[r][u]);
    sums[r] = hsum(acc[r][0]);
    for (int64_t k = c; k < x.cols; ++k) sums[r] += x.row<float>(r0 + r)[k] * f16_to_f32(wrow[k]);
  }
}

// Q4_1 and Q5_1 (a scale and a min per block: w = d·q + m) against Q8_1-style activations,
// as llama.cpp computes them: Σ_b d_w·d_x·Σ q_w q_x + m_w·s_x, where s_x is the block's
// Σq_x times its unrounded scale max|x|/127, stored as f16 (block_q8_1's s). One portable
// integer path: llama.cpp's mixes use these types only for rows that do not fill 256.
template <class Block>
float min_block_row(const uint8_t* wrow, const QuantizedRows& xq, const std::vector<float>& s, int64_t r) {
  const auto* blk = reinterpret_cast<const Block*>(wrow);
  float sum = 0;
  for (int64_t b = 0; b < xq.blocks; ++b) {
    const int8_t* xv = &xq.q[size_t((r * xq.blocks + b) * kQBlock)];
    int32_t acc = 0;
    for (int i = 0; i < kQBlock; ++i) {
      int q;
      if constexpr (std::is_same_v<Block, quant::BlockQ4_1>) {
        q = i < 16 ? blk[b].qs[i] & 0x0f : blk[b].qs[i - 16] >> 4;
      } else {
        q = quant::q5_value(blk[b].qs, blk[b].qh, i);
      }
      acc += q * xv[i];
    }
    const size_t xb = size_t(r * xq.blocks + b);
    sum += f16_to_f32(blk[b].d) * xq.d[xb] * float(acc) + f16_to_f32(blk[b].m) * s[xb];
  }
  return sum;
}

void min_matmul(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix& w) {
  QuantizedRows xq;
  quantize_rows(x, false, xq);
  std::vector<float> s(xq.d.size());
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t b = 0; b < xq.blocks; ++b) {
      const float* v = x.row<float>(r) + b * kQBlock;
      float amax = 0;
      int32_t qsum = 0;
      for (int i = 0; i < kQBlock; ++i) {
        amax = std::max(amax, std::fabs(v[i]));
        qsum += xq.q[size_t((r * xq.blocks + b) * kQBlock + i)];
      }
      s[size_t(r * xq.blocks + b)] = q8_block_scale(amax / 127.0f * float(qsum));
    }
  }
  const bool q4 = w.dtype == TSR_DTYPE_Q4_1;
  for_weight_rows(ctx, out, w, x.rows, w.rows * w.cols * x.rows, [&](int64_t j, int64_t r0, int nr, float* sums) {
    for (int r = 0; r < nr; ++r) {
      sums[r] = q4 ? min_block_row<quant::BlockQ4_1>(w.row<uint8_t>(j), xq, s, r0 + r)
                   : min_block_row<quant::BlockQ5_1>(w.row<uint8_t>(j), xq, s, r0 + r);
    }
  });
}

}  // namespace

bool quant_matmul_supported(tsr_dtype w) {
  return w == TSR_DTYPE_Q8_0 || w == TSR_DTYPE_Q4_0 || w == TSR_DTYPE_Q5_0 || w == TSR_DTYPE_IQ4_NL ||
         w == TSR_DTYPE_MXFP4 || w == TSR_DTYPE_Q4_1 || w == TSR_DTYPE_Q5_1;
}

template <tsr_dtype D>
void quant_matmul_of(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix& w) {
  const bool vnni = has_vnni(), avx2 = has_avx2();
  QuantizedRows xq;
  quantize_rows(x, vnni, xq);
  for_weight_rows(ctx, out, w, x.rows, w.rows * w.cols * x.rows,
                  [&](int64_t j, int64_t r0, int nr, float* sums) {
                    const uint8_t* wrow = w.row<uint8_t>(j);
                    if (vnni) {
                      rows_vnni<D>(wrow, xq, r0, nr, sums);
                    } else if (avx2) {
                      dispatch_rows<kRowGroup>(nr, [&](auto n) { rows_avx2<D, decltype(n)::value>(wrow, xq, r0, sums); });
                    } else {
                      rows_generic(w.dtype, wrow, xq, r0, nr, sums);
                    }
                  });
}

void quant_matmul(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix& w) {
  switch (w.dtype) {
    case TSR_DTYPE_Q8_0: return quant_matmul_of<TSR_DTYPE_Q8_0>(ctx, out, x, w);
    case TSR_DTYPE_Q4_0: return quant_matmul_of<TSR_DTYPE_Q4_0>(ctx, out, x, w);
    case TSR_DTYPE_Q5_0: return quant_matmul_of<TSR_DTYPE_Q5_0>(ctx, out, x, w);
    case TSR_DTYPE_MXFP4: return quant_matmul_of<TSR_DTYPE_MXFP4>(ctx, out, x, w);
    case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_1: return min_matmul(ctx, out, x, w);
    default: return quant_matmul_of<TSR_DTYPE_IQ4_NL>(ctx, out, x, w);
  }
}

void f16_matmul(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix& w) {
  for_weight_rows(ctx, out, w, x.rows, w.rows * w.cols * x.rows,
                  [&](int64_t j, int64_t r0, int nr, float* sums) {
                    dispatch_rows<kRowGroup>(nr, [&](auto n) { f16_rows<decltype(n)::value>(w.row<uint16_t>(j), x, r0, sums); });
                  });
}

}  // namespace tsr::cpu
