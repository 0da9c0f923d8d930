#include "cpu_kquant_matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_ops.h"
#include "cpu_simd.h"
#include "quant_formats/iq4.h"
#include "quant_formats/kquants.h"

namespace tsr::cpu {

namespace {

using quant::BlockQ8_K;
using quant::kQK_K;

// One weight super-block unpacked to a common form: element i is
// d · s[g] · (u[i] − off) − dmin · m[g] for its group g = i / 16. Every format above fits:
// off is 0 for the formats with a min (Q2_K, Q4_K, Q5_K) and the bias that makes the
// signed ones unsigned otherwise (Q3_K 4, Q6_K 32, IQ4_XS 128), so that the VNNI kernel's
// u8 × s8 products take u as is.
struct SuperBlock {
  alignas(64) uint8_t u[kQK_K];
  alignas(64) int32_t s[16];
  // −(d · off · s[g] + dmin · m[g]): what each group's Σx contributes, as a float.
  alignas(64) float bias[16];
  float d;
};

struct Unpacked {
  int32_t off = 0;
  int32_t m[16] = {};
  float dmin = 0;
};

void finish(SuperBlock& sb, const Unpacked& up) {
  for (int g = 0; g < 16; ++g) sb.bias[g] = -(sb.d * float(up.off * sb.s[g]) + up.dmin * float(up.m[g]));
}

void unpack(const quant::BlockQ2_K& b, SuperBlock& sb) {
  Unpacked up;
  for (int e = 0; e < kQK_K; ++e) sb.u[e] = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
  for (int g = 0; g < 16; ++g) {
    sb.s[g] = b.scales[g] & 0xF;
    up.m[g] = b.scales[g] >> 4;
  }
  sb.d = f16_to_f32(b.d);
  up.dmin = f16_to_f32(b.dmin);
  finish(sb, up);
}

void unpack(const quant::BlockQ3_K& b, SuperBlock& sb) {
  Unpacked up;
  up.off = 4;
  for (int e = 0; e < kQK_K; ++e) {
    const int n = e / 128, j = (e % 128) / 32, l = e % 32;
    const int low = (b.qs[32 * n + l] >> (2 * j)) & 3;
    const int high = (b.hmask[l] >> (4 * n + j)) & 1;
    sb.u[e] = static_cast<uint8_t>(low | (high << 2));
  }
  int8_t scales[16];
  quant::q3_k_scales(b, scales);
  for (int g = 0; g < 16; ++g) sb.s[g] = scales[g];
  sb.d = f16_to_f32(b.d);
  finish(sb, up);
}

template <class Block>
void unpack_scale_min(const Block& b, SuperBlock& sb, Unpacked& up) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    quant::kquant_scale_min(j, b.scales, &sc, &m);
    sb.s[2 * j] = sb.s[2 * j + 1] = sc;
    up.m[2 * j] = up.m[2 * j + 1] = m;
  }
  sb.d = f16_to_f32(b.d);
  up.dmin = f16_to_f32(b.dmin);
}

void unpack(const quant::BlockQ4_K& b, SuperBlock& sb) {
  Unpacked up;
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      sb.u[64 * c + l] = b.qs[32 * c + l] & 0xF;
      sb.u[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
  }
  unpack_scale_min(b, sb, up);
  finish(sb, up);
}

void unpack(const quant::BlockQ5_K& b, SuperBlock& sb) {
  Unpacked up;
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      sb.u[64 * c + l] = static_cast<uint8_t>((b.qs[32 * c + l] & 0xF) | (((b.qh[l] >> (2 * c)) & 1) << 4));
      sb.u[64 * c + 32 + l] = static_cast<uint8_t>((b.qs[32 * c + l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4));
    }
  }
  unpack_scale_min(b, sb, up);
  finish(sb, up);
}

void unpack(const quant::BlockQ6_K& b, SuperBlock& sb) {
  Unpacked up;
  up.off = 32;
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    uint8_t* u = sb.u + 128 * n;
    for (int l = 0; l < 32; ++l) {
      u[l] = static_cast<uint8_t>((ql[l] & 0xF) | ((qh[l] & 3) << 4));
      u[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      u[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      u[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
  for (int g = 0; g < 16; ++g) sb.s[g] = b.scales[g];
  sb.d = f16_to_f32(b.d);
  finish(sb, up);
}

void unpack(const quant::BlockIQ4_XS& b, SuperBlock& sb) {
  Unpacked up;
  up.off = 128;
  for (int ib = 0; ib < 8; ++ib) {
    for (int j = 0; j < 16; ++j) {
      sb.u[32 * ib + j] = static_cast<uint8_t>(quant::kIQ4Values[b.qs[16 * ib + j] & 0xF] + 128);
      sb.u[32 * ib + 16 + j] = static_cast<uint8_t>(quant::kIQ4Values[b.qs[16 * ib + j] >> 4] + 128);
    }
    sb.s[2 * ib] = sb.s[2 * ib + 1] = quant::iq4_xs_scale(b, ib);
  }
  sb.d = f16_to_f32(b.d);
  finish(sb, up);
}

template <class Block>
void unpack_row(const uint8_t* row, int64_t blocks, SuperBlock* out) {
  const auto* b = reinterpret_cast<const Block*>(row);
  for (int64_t i = 0; i < blocks; ++i) unpack(b[i], out[i]);
}

void unpack_row(tsr_dtype dtype, const uint8_t* row, int64_t blocks, SuperBlock* out) {
  switch (dtype) {
    case TSR_DTYPE_Q2_K: return unpack_row<quant::BlockQ2_K>(row, blocks, out);
    case TSR_DTYPE_Q3_K: return unpack_row<quant::BlockQ3_K>(row, blocks, out);
    case TSR_DTYPE_Q4_K: return unpack_row<quant::BlockQ4_K>(row, blocks, out);
    case TSR_DTYPE_Q5_K: return unpack_row<quant::BlockQ5_K>(row, blocks, out);
    case TSR_DTYPE_Q6_K: return unpack_row<quant::BlockQ6_K>(row, blocks, out);
    default: return unpack_row<quant::BlockIQ4_XS>(row, blocks, out);
  }
}

// Portable path. Per super-block: Σ_g d·s[g]·Σ(u·x) + bias[g]·Σx, times the row's scale.
float dot_portable(const SuperBlock* w, const BlockQ8_K* x, int64_t blocks) {
  float sum = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    int32_t isum = 0;
    float bsum = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t dot = 0;
      for (int i = 16 * g; i < 16 * g + 16; ++i) dot += int32_t(w[b].u[i]) * x[b].qs[i];
      isum += w[b].s[g] * dot;
      bsum += w[b].bias[g] * float(x[b].bsums[g]);
    }
    sum += x[b].d * (w[b].d * float(isum) + bsum);
  }
  return sum;
}

// VNNI path: 64 weights per vpdpbusd, whose 16 lanes each sum 4 products, so lanes 4k..4k+3
// of chunk c belong to group 4c + k; each lane takes its group's scale before the chunks
// add up, and the float accumulator takes the block's d·dx once.
__attribute__((target(TSR_VNNI_TARGET)))
float dot_vnni(const SuperBlock* w, const BlockQ8_K* x, int64_t blocks) {
  __m512 acc = _mm512_setzero_ps();
  const __m512i lane_group = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  for (int64_t b = 0; b < blocks; ++b) {
    const __m512i scales = _mm512_load_si512(w[b].s);
    __m512i isum = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i u = _mm512_load_si512(w[b].u + 64 * c);
      const __m512i q = _mm512_loadu_si512(x[b].qs + 64 * c);
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, q);
      const __m512i s = _mm512_permutexvar_epi32(_mm512_add_epi32(lane_group, _mm512_set1_epi32(4 * c)), scales);
      isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dot, s));
    }
    const __m512 bsums = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums))));
    const __m512 block = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(w[b].d),
                                         _mm512_mul_ps(bsums, _mm512_load_ps(w[b].bias)));
    acc = _mm512_fmadd_ps(block, _mm512_set1_ps(x[b].d), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// AVX2 path, as the VNNI one on 32 weights per step: vpmaddubsw's u8 × s8 pair sums stay
// within int16 for every format's u but IQ4_XS's biased levels (up to 241 · 127 · 2), so
// IQ4_XS takes the portable path on AVX2 machines.
__attribute__((target(TSR_AVX2_TARGET)))
float dot_avx2(const SuperBlock* w, const BlockQ8_K* x, int64_t blocks) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {  // 32 weights: groups 2c (lanes 0-3) and 2c + 1 (lanes 4-7)
      const __m256i u = _mm256_load_si256(reinterpret_cast<const __m256i*>(w[b].u + 32 * c));
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * c));
      const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), ones);
      const __m256i s = _mm256_set_m128i(_mm_set1_epi32(w[b].s[2 * c + 1]), _mm_set1_epi32(w[b].s[2 * c]));
      isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(dot, s));
    }
    const __m256i bs16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums));
    const __m256 bs_lo = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(bs16)));
    const __m256 bs_hi = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(bs16, 1)));
    __m256 block = _mm256_mul_ps(bs_lo, _mm256_load_ps(w[b].bias));
    block = _mm256_fmadd_ps(bs_hi, _mm256_load_ps(w[b].bias + 8), block);
    block = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(w[b].d), block);
    acc = _mm256_fmadd_ps(block, _mm256_set1_ps(x[b].d), acc);
  }
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// Q4_K and Q6_K (what Q4_K_M files are made of) read in place on VNNI machines, without
// the unpacking above: decode is bound by it otherwise (a scalar pass over every
// super-block's scales and bytes per step).

// The eight 6-bit scales (bytes 0-7 of *sc) and mins (*mins) of a Q4_K block, four at a
// time through 32-bit masks (kquant_scale_min's layout).
inline void q4_k_scales(const uint8_t* packed, uint64_t* sc, uint64_t* mins) {
  uint32_t a[3];
  std::memcpy(a, packed, sizeof a);
  const uint32_t sc_lo = a[0] & 0x3f3f3f3f, m_lo = a[1] & 0x3f3f3f3f;
  const uint32_t sc_hi = (a[2] & 0x0f0f0f0f) | (((a[0] >> 6) & 0x03030303) << 4);
  const uint32_t m_hi = ((a[2] >> 4) & 0x0f0f0f0f) | (((a[1] >> 6) & 0x03030303) << 4);
  *sc = uint64_t(sc_lo) | uint64_t(sc_hi) << 32;
  *mins = uint64_t(m_lo) | uint64_t(m_hi) << 32;
}

__attribute__((target(TSR_VNNI_TARGET), always_inline))
inline float reduce_pair(__m512 a, __m256 b) {
  const __m256 s = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  return _mm512_reduce_add_ps(_mm512_castps256_ps512(_mm256_add_ps(s, b))) ;
}

// 32 bytes at `lo` and 32 at `hi` in one register.
__attribute__((target(TSR_VNNI_TARGET), always_inline))
inline __m512i load_halves(const int8_t* lo, const int8_t* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi)), 1);
}

// Each 64 bytes of qs hold 128 elements: low nibbles of bytes 0-31 are sub-block 4h, of
// bytes 32-63 sub-block 4h + 2; high nibbles 4h + 1 and 4h + 3. So x is loaded in the same
// pairs of 32, and the dot's lanes 0-7 / 8-15 take the two sub-blocks' scales.
__attribute__((target(TSR_VNNI_TARGET)))
float dot_q4_k_vnni(const uint8_t* wrow, const BlockQ8_K* x, int64_t blocks) {
  const auto* w = reinterpret_cast<const quant::BlockQ4_K*>(wrow);
  const __m512i nibble = _mm512_set1_epi8(0x0F), zero = _mm512_setzero_si512();
  const __m512i pair = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    uint64_t sc8, min8;
    q4_k_scales(w[b].scales, &sc8, &min8);
    const __m512i sc = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc8)));
    __m512i isum = zero;
    for (int h = 0; h < 2; ++h) {
      const __m512i q = _mm512_loadu_si512(w[b].qs + 64 * h);
      const int8_t* xq = x[b].qs + 128 * h;
      const __m512i dlo = _mm512_dpbusd_epi32(zero, _mm512_and_si512(q, nibble), load_halves(xq, xq + 64));
      const __m512i dhi = _mm512_dpbusd_epi32(zero, _mm512_and_si512(_mm512_srli_epi16(q, 4), nibble), load_halves(xq + 32, xq + 96));
      const __m512i slo = _mm512_permutexvar_epi32(_mm512_add_epi32(pair, _mm512_set1_epi32(4 * h)), sc);
      const __m512i shi = _mm512_permutexvar_epi32(_mm512_add_epi32(pair, _mm512_set1_epi32(4 * h + 1)), sc);
      isum = _mm512_add_epi32(isum, _mm512_add_epi32(_mm512_mullo_epi32(dlo, slo), _mm512_mullo_epi32(dhi, shi)));
    }
    // Σ_j min_j · (bsum[2j] + bsum[2j + 1]): the bsums' pairs against each min twice.
    const __m128i mins = _mm_cvtsi64_si128(static_cast<long long>(min8));
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins, mins));
    const __m256i msum = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums)), m16);
    const float dx = x[b].d;
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(dx * f16_to_f32(w[b].d)), acc);
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-dx * f16_to_f32(w[b].dmin)), acc_min);
  }
  return reduce_pair(acc, acc_min);
}

// Each 64 bytes of ql and 32 of qh hold 128 consecutive elements: the low nibbles of ql
// are elements 0-63 (their high bits: qh's bits 0-1 for bytes 0-31, 2-3 for 32-63), the
// high nibbles 64-127 (bits 4-5, 6-7). The bias of 32 comes off through the bsums.
__attribute__((target(TSR_VNNI_TARGET)))
float dot_q6_k_vnni(const uint8_t* wrow, const BlockQ8_K* x, int64_t blocks) {
  const auto* w = reinterpret_cast<const quant::BlockQ6_K*>(wrow);
  const __m512i nibble = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(3), zero = _mm512_setzero_si512();
  const __m512i group = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_bias = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    const __m512i sc = _mm512_cvtepi8_epi32(sc8);
    __m512i isum = zero;
    for (int n = 0; n < 2; ++n) {
      const __m512i ql = _mm512_loadu_si512(w[b].ql + 64 * n);
      const __m256i qh256 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * n));
      const __m512i qh = _mm512_inserti64x4(_mm512_castsi256_si512(qh256), qh256, 1);
      const __m512i high_a = _mm512_mask_blend_epi64(0xF0, qh, _mm512_srli_epi16(qh, 2));
      const __m512i high_b = _mm512_mask_blend_epi64(0xF0, _mm512_srli_epi16(qh, 4), _mm512_srli_epi16(qh, 6));
      const __m512i ua = _mm512_or_si512(_mm512_and_si512(ql, nibble), _mm512_slli_epi16(_mm512_and_si512(high_a, two), 4));
      const __m512i ub = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nibble),
                                         _mm512_slli_epi16(_mm512_and_si512(high_b, two), 4));
      const int8_t* xq = x[b].qs + 128 * n;
      const __m512i da = _mm512_dpbusd_epi32(zero, ua, _mm512_loadu_si512(xq));
      const __m512i db = _mm512_dpbusd_epi32(zero, ub, _mm512_loadu_si512(xq + 64));
      const __m512i sa = _mm512_permutexvar_epi32(_mm512_add_epi32(group, _mm512_set1_epi32(8 * n)), sc);
      const __m512i sb = _mm512_permutexvar_epi32(_mm512_add_epi32(group, _mm512_set1_epi32(8 * n + 4)), sc);
      isum = _mm512_add_epi32(isum, _mm512_add_epi32(_mm512_mullo_epi32(da, sa), _mm512_mullo_epi32(db, sb)));
    }
    const __m256i bias = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsums)),
                                           _mm256_cvtepi8_epi16(sc8));
    const float dd = x[b].d * f16_to_f32(w[b].d);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(dd), acc);
    acc_bias = _mm256_fmadd_ps(_mm256_cvtepi32_ps(bias), _mm256_set1_ps(-32.0f * dd), acc_bias);
  }
  return reduce_pair(acc, acc_bias);
}

using DotKernel = float (*)(const SuperBlock*, const BlockQ8_K*, int64_t);
using InPlaceKernel = float (*)(const uint8_t*, const BlockQ8_K*, int64_t);

InPlaceKernel in_place_kernel(tsr_dtype dtype) {
  if (!has_vnni()) return nullptr;
  if (dtype == TSR_DTYPE_Q4_K) return dot_q4_k_vnni;
  if (dtype == TSR_DTYPE_Q6_K) return dot_q6_k_vnni;
  return nullptr;
}

DotKernel dot_kernel(tsr_dtype dtype) {
  if (has_vnni()) return dot_vnni;
  if (has_avx2() && dtype != TSR_DTYPE_IQ4_XS) return dot_avx2;
  return dot_portable;
}

}  // namespace

bool kquant_matmul_supported(tsr_dtype w) {
  switch (w) {
    case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K: case TSR_DTYPE_Q5_K: case TSR_DTYPE_Q6_K:
    case TSR_DTYPE_IQ4_XS: return true;
    default: return false;
  }
}

void kquant_matmul(OpContext& ctx, const Matrix& out, const Matrix& x, const Matrix& w) {
  const int64_t blocks = w.cols / kQK_K;
  std::vector<BlockQ8_K> xq(static_cast<size_t>(x.rows * blocks));
  for (int64_t r = 0; r < x.rows; ++r) quant::quantize_row_q8_k_ref(x.row<float>(r), &xq[size_t(r * blocks)], w.cols);
  const DotKernel dot = dot_kernel(w.dtype);
  const InPlaceKernel in_place = in_place_kernel(w.dtype);
  const int64_t macs = w.rows * w.cols * x.rows;
#pragma omp parallel num_threads(ctx.n_threads) if (macs >= (1 << 16))
  {
    std::vector<SuperBlock> row(in_place != nullptr ? 0 : static_cast<size_t>(blocks));
#pragma omp for schedule(static)
    for (int64_t j = 0; j < w.rows; ++j) {
      if (in_place != nullptr) {
        for (int64_t r = 0; r < x.rows; ++r) out.row<float>(r)[j] = in_place(w.row<uint8_t>(j), &xq[size_t(r * blocks)], blocks);
        continue;
      }
      // Unpacked once per weight row, for every row of x.
      unpack_row(w.dtype, w.row<uint8_t>(j), blocks, row.data());
      for (int64_t r = 0; r < x.rows; ++r) {
        const BlockQ8_K* xr = &xq[size_t(r * blocks)];
        out.row<float>(r)[j] = dot(row.data(), xr, blocks);
      }
    }
  }
}

}  // namespace tsr::cpu
