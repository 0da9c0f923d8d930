#include "quant_formats/kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include <immintrin.h>

#include "quant_formats/float_convert.h"
#include "quant_formats/kquant_search.h"

namespace tsr::quant {

namespace {

using namespace detail;

// Packs 256 2-bit values (Q2_K's quants, Q3_K's low bits): byte 32h + l holds elements
// 128h + l, +32, +64, +96 from the low bits up.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

// Eight 6-bit scales and mins into Q4_K/Q5_K's 12 bytes (the inverse of kquant_scale_min).
void pack_scale_min(const uint8_t ls[8], const uint8_t lm[8], uint8_t* scales) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Q2_K's quants from its stored scales and mins (both quantizers requantize), packed.
void finish_q2_k(const float* x, BlockQ2_K& b, uint8_t* L) {
  for (int j = 0; j < 16; ++j) {
    const float d = f16_to_f32(b.d) * (b.scales[j] & 0xF);
    if (!d) continue;
    const float dm = f16_to_f32(b.dmin) * (b.scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) {
      L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, nearest_int((x[16 * j + ii] + dm) / d))));
    }
  }
  pack_2bit(L, b.qs);
}

// Stores Q3_K sub-block j's 6-bit scale `l` (biased by 32) into b.scales, which starts zeroed.
void pack_q3_k_scale(BlockQ3_K& b, int j, int l) {
  if (j < 8) {
    b.scales[j] = static_cast<uint8_t>(l & 0xF);
  } else {
    b.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
  }
  b.scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
}

// Q3_K's quants (biased by 4) from its stored scales, split into hmask and the packed
// low bits. A sub-block whose scale is zero keeps the search's quants in L, as ggml's.
void finish_q3_k(const float* x, BlockQ3_K& b, int8_t* L) {
  int8_t sc[16];
  q3_k_scales(b, sc);
  for (int j = 0; j < 16; ++j) {
    const float d = f16_to_f32(b.d) * sc[j];
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii) {
      L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, nearest_int(x[16 * j + ii] / d))) + 4);
    }
  }
  // The third bit of element j goes to bit j / 32 of hmask[j % 32].
  std::fill(std::begin(b.hmask), std::end(b.hmask), uint8_t{0});
  uint8_t low[kQK_K];
  for (int j = 0; j < kQK_K; ++j) {
    if (L[j] > 3) b.hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
    low[j] = static_cast<uint8_t>(L[j] > 3 ? L[j] - 4 : L[j]);
  }
  pack_2bit(low, b.qs);
}

// Q4_K's and Q5_K's quants in [0, nmax] from the stored 6-bit scales and mins.
template <class Block>
void requantize_qkx(const float* x, const Block& y, int nmax, uint8_t* L) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    kquant_scale_min(j, y.scales, &sc, &m);
    const float d = f16_to_f32(y.d) * sc;
    if (!d) continue;
    const float dm = f16_to_f32(y.dmin) * m;
    for (int ii = 0; ii < 32; ++ii) {
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int((x[32 * j + ii] + dm) / d))));
    }
  }
}

// Q4_K and Q5_K share their scale search: eight sub-blocks of 32 with a 6-bit scale and
// min each, under two f16 super-scales; L receives the final quants in [0, nmax].
template <class Block>
void quantize_super_block_qkx(const float* x, Block& y, int nmax, const QkxSearch& search, uint8_t* L) {
  float mins[8], scales[8], weights[32];
  uint8_t Laux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float av_x = std::sqrt(sum_squares(x + 32 * j, 32) / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, search);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  pack_scale_min(ls, lm, y.scales);
  y.d = f32_to_f16(max_scale / 63.f);
  y.dmin = f32_to_f16(max_min / 63.f);
  requantize_qkx(x, y, nmax, L);
}

// The same layout under an importance matrix (ggml's quantize_row_q4_K_impl /
// q5_K_impl): weights qw·sqrt(σ² + x²) with σ² twice the super-block's mean square, and
// the sub-block scales and mins quantized by make_qp_quants weighted by each sub-block's
// total weight instead of by the largest.
template <class Block>
void quantize_super_block_qkx_weighted(const float* x, const float* qw, Block& y, int nmax, uint8_t* L) {
  float mins[8], scales[8], sw[8], weights[32];
  uint8_t Laux[32];
  const float sigma2 = 2 * sum_squares(x, kQK_K) / kQK_K;
  for (int j = 0; j < 8; ++j) {
    importance_weights(x + 32 * j, qw + 32 * j, sigma2, 32, weights);
    sw[j] = 0;
    for (int l = 0; l < 32; ++l) sw[j] += weights[l];
    scales[j] = make_qkx_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, kWeightedQkx);
  }
  uint8_t ls[8], lm[8];
  const float d_block = make_qp_quants(8, 63, scales, ls, sw);
  const float m_block = make_qp_quants(8, 63, mins, lm, sw);
  pack_scale_min(ls, lm, y.scales);
  y.d = f32_to_f16(d_block);
  y.dmin = f32_to_f16(m_block);
  requantize_qkx(x, y, nmax, L);
}

void pack_q4_k(const uint8_t* L, BlockQ4_K& y) {
  uint8_t* q = y.qs;
  for (int j = 0; j < kQK_K; j += 64, q += 32) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

void pack_q5_k(const uint8_t* L, BlockQ5_K& y) {
  uint8_t* qh = y.qh;
  uint8_t* ql = y.qs;
  std::fill(qh, qh + 32, uint8_t{0});
  for (int n = 0, c = 0; n < kQK_K; n += 64, ++c, ql += 32) {
    for (int j = 0; j < 32; ++j) {
      const int l1 = L[n + j], l2 = L[n + j + 32];
      if (l1 > 15) qh[j] |= static_cast<uint8_t>(1 << (2 * c));
      if (l2 > 15) qh[j] |= static_cast<uint8_t>(2 << (2 * c));
      ql[j] = static_cast<uint8_t>((l1 & 0xF) | ((l2 & 0xF) << 4));
    }
  }
}

// Q4_K or Q5_K super-blocks: with importances `qw` (one per element of the row) the
// weighted fit, else the reference one with `search`.
template <class Block>
void qkx_rows(const float* x, Block* y, int64_t k, int nmax, const QkxSearch& search, const float* qw,
              void (*pack)(const uint8_t*, Block&)) {
  for (int64_t i = 0; i < k / kQK_K; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    if (qw) {
      quantize_super_block_qkx_weighted(x, qw + kQK_K * i, y[i], nmax, L);
    } else {
      quantize_super_block_qkx(x, y[i], nmax, search, L);
    }
    pack(L, y[i]);
  }
}

// Q6_K blocks; `qw` (can be null) weights each sub-block's scale search directly, without
// ggml's σ² term (quantize_row_q6_K_impl's choice).
void quantize_q6_k_blocks(const float* x, BlockQ6_K* y, int64_t k, const float* qw) {
  for (int64_t i = 0; i < k / kQK_K; ++i, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + kQK_K * i + 16 * ib : nullptr);
    }
    const float max_scale = signed_max(scales, 16);
    BlockQ6_K& b = y[i];
    if (std::fabs(max_scale) < kGroupMaxEps) {
      std::memset(&b, 0, sizeof b);
      continue;
    }
    const float iscale = -128.f / max_scale;
    b.d = f32_to_f16(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) b.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(b.d) * b.scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, nearest_int(x[16 * j + ii] / d))) + 32);
      }
    }
    uint8_t* ql = b.ql;
    uint8_t* qh = b.qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

}  // namespace

void q3_k_scales(const BlockQ3_K& b, int8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? b.scales[j] & 0xF : b.scales[j - 8] >> 4;
    const int high = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

void quantize_row_q2_k_ref(const float* x, BlockQ2_K* y, int64_t k) {
  constexpr float q4scale = 15.f;
  constexpr QkxSearch search{-0.5f, 0.1f, 15, true};
  for (int64_t i = 0; i < k / kQK_K; ++i, x += kQK_K) {
    uint8_t L[kQK_K], Laux[16];
    float weights[16], mins[16], scales[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = make_qkx_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, search);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    BlockQ2_K& b = y[i];
    std::fill(std::begin(b.scales), std::end(b.scales), uint8_t{0});
    b.d = f32_to_f16(0.f);
    b.dmin = f32_to_f16(0.f);
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      b.d = f32_to_f16(max_scale / q4scale);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < 16; ++j) b.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      b.dmin = f32_to_f16(max_min / q4scale);
    }
    finish_q2_k(x, b, L);
  }
}

void quantize_row_q2_k_imatrix(const float* x, BlockQ2_K* y, int64_t n_per_row, const float* qw) {
  for (int64_t i = 0; i < n_per_row / kQK_K; ++i, x += kQK_K, qw += kQK_K) {
    uint8_t L[kQK_K], Laux[16], Ls[16], Lm[16];
    float weights[16], mins[16], scales[16], sw[16];
    const float sigma2 = sum_squares(x, kQK_K) / kQK_K;  // ggml's Q2_K alone omits the 2
    for (int j = 0; j < 16; ++j) {
      importance_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weights);
      sw[j] = 0;
      for (int l = 0; l < 16; ++l) sw[j] += weights[l];
      scales[j] = make_qkx_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, kWeightedQkx);
    }
    BlockQ2_K& b = y[i];
    b.d = f32_to_f16(make_qp_quants(16, 15, scales, Ls, sw));
    b.dmin = f32_to_f16(make_qp_quants(16, 15, mins, Lm, sw));
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
    finish_q2_k(x, b, L);
  }
}

void quantize_row_q3_k_ref(const float* x, BlockQ3_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
    const float max_scale = signed_max(scales, 16);
    BlockQ3_K& b = y[i];
    std::fill(std::begin(b.scales), std::end(b.scales), uint8_t{0});
    b.d = f32_to_f16(0.f);
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        // ggml narrows to int8_t before clamping; the value is within ±32 here anyway.
        const auto narrowed = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        pack_q3_k_scale(b, j, std::max<int>(-32, std::min<int>(31, narrowed)) + 32);
      }
      b.d = f32_to_f16(1 / iscale);
    }
    finish_q3_k(x, b, L);
  }
}

void quantize_row_q3_k_imatrix(const float* x, BlockQ3_K* y, int64_t n_per_row, const float* qw) {
  for (int64_t i = 0; i < n_per_row / kQK_K; ++i, x += kQK_K, qw += kQK_K) {
    int8_t L[kQK_K], Ls[16];
    float weights[16], scales[16], sw[16];
    const float sigma2 = 2 * sum_squares(x, kQK_K) / kQK_K;
    for (int j = 0; j < 16; ++j) {
      importance_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weights);
      sw[j] = 0;
      for (int l = 0; l < 16; ++l) sw[j] += weights[l];
      scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weights);
    }
    BlockQ3_K& b = y[i];
    std::fill(std::begin(b.scales), std::end(b.scales), uint8_t{0});
    const float d_block = make_qx_quants(16, 32, scales, Ls, sw);  // Ls: l + 32
    for (int j = 0; j < 16; ++j) pack_q3_k_scale(b, j, Ls[j]);
    b.d = f32_to_f16(d_block);
    finish_q3_k(x, b, L);
  }
}

void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t k) {
  qkx_rows(x, y, k, 15, QkxSearch{-1.f, 0.1f, 20, false}, nullptr, pack_q4_k);
}

void quantize_row_q4_k_imatrix(const float* x, BlockQ4_K* y, int64_t n_per_row, const float* qw) {
  qkx_rows(x, y, n_per_row, 15, kWeightedQkx, qw, pack_q4_k);
}

void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t k) {
  qkx_rows(x, y, k, 31, QkxSearch{-0.5f, 0.1f, 15, false}, nullptr, pack_q5_k);
}

void quantize_row_q5_k_imatrix(const float* x, BlockQ5_K* y, int64_t n_per_row, const float* qw) {
  qkx_rows(x, y, n_per_row, 31, kWeightedQkx, qw, pack_q5_k);
}

void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t k) { quantize_q6_k_blocks(x, y, k, nullptr); }

void quantize_row_q6_k_imatrix(const float* x, BlockQ6_K* y, int64_t n_per_row, const float* qw) {
  quantize_q6_k_blocks(x, y, n_per_row, qw);
}

void quantize_row_q8_k_ref(const float* x, BlockQ8_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i, x += kQK_K) {
    const float max = signed_max(x, kQK_K);
    BlockQ8_K& b = y[i];
    if (!max) {
      b.d = 0;
      std::fill(std::begin(b.qs), std::end(b.qs), int8_t{0});
      std::fill(std::begin(b.bsums), std::end(b.bsums), int16_t{0});
      continue;
    }
    // -127, not -128: ggml's choice, so that the quants stay within ±127.
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) b.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += b.qs[j * 16 + ii];
      b.bsums[j] = static_cast<int16_t>(sum);
    }
    b.d = 1 / iscale;
  }
}

namespace {

// quantize_row_q8_k_ref on one block in vectors: the same scale (-127 over the first value
// of largest magnitude) and round-to-nearest-even products (vcvtps2dq under the default
// rounding, as nearbyint), so the same bytes. A block holding a NaN or an infinity, or
// only zeros, goes to the reference, whatever it makes of them.
__attribute__((target("avx512f,avx512dq")))
void quantize_block_q8_k_avx512(const float* x, BlockQ8_K* y) {
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  __m512 v[16], amax = _mm512_setzero_ps();
  __mmask16 non_finite = 0;
  for (int i = 0; i < 16; ++i) {
    v[i] = _mm512_loadu_ps(x + 16 * i);
    non_finite |= _mm512_cmp_ps_mask(_mm512_abs_ps(v[i]), inf, _CMP_NLT_UQ);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(v[i]));
  }
  const float m = _mm512_reduce_max_ps(amax);
  if (non_finite != 0 || m == 0) return quantize_row_q8_k_ref(x, y, kQK_K);
  float max = 0;
  for (int i = 0; i < 16; ++i) {
    const __mmask16 at = _mm512_cmp_ps_mask(_mm512_abs_ps(v[i]), _mm512_set1_ps(m), _CMP_EQ_OQ);
    if (at != 0) {
      max = x[16 * i + __builtin_ctz(at)];
      break;
    }
  }
  const float iscale = -127.f / max;
  for (int i = 0; i < 16; ++i) {
    const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v[i], _mm512_set1_ps(iscale))), _mm512_set1_epi32(127));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y->qs + 16 * i), _mm512_cvtepi32_epi8(q));
    // The sums of the bytes as stored (the int8 narrowing keeps the low byte): the same as
    // q's unless a product overflowed, which a block of subnormal scale makes.
    y->bsums[i] = static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_srai_epi32(_mm512_slli_epi32(q, 24), 24)));
  }
  y->d = 1 / iscale;
}

}  // namespace

void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t k) {
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  if (!avx512) return quantize_row_q8_k_ref(x, y, k);
  for (int64_t i = 0; i < k / kQK_K; ++i) quantize_block_q8_k_avx512(x + i * kQK_K, y + i);
}

void dequantize_row_q2_k(const BlockQ2_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i) {
    const float d = f16_to_f32(x[i].d), min = f16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n = 0; n < kQK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = x[i].scales[is++];
          const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * ((q[16 * half + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_row_q3_k(const BlockQ3_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i) {
    const float d_all = f16_to_f32(x[i].d);
    int8_t scales[16];
    q3_k_scales(x[i], scales);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < kQK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * scales[is++];
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
          }
        }
      }
    }
  }
}

void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i) {
    const float d = f16_to_f32(x[i].d), min = f16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      kquant_scale_min(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      kquant_scale_min(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i) {
    const float d = f16_to_f32(x[i].d), min = f16_to_f32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 = static_cast<uint8_t>(u1 << 2), u2 = static_cast<uint8_t>(u2 << 2)) {
      uint8_t sc, m;
      kquant_scale_min(is, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      kquant_scale_min(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < kQK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void dequantize_row_q8_k(const BlockQ8_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i) {
    for (int j = 0; j < kQK_K; ++j) *y++ = x[i].d * x[i].qs[j];
  }
}

}  // namespace tsr::quant
