#include "quant_formats/kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

#include "quant_formats/float_convert.h"

namespace tsr::quant {

namespace {

// A sub-block whose largest magnitude is below this is all zeros (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round half to even, as ggml's nearest_int (its magic-number addition) for |v| < 2^22,
// the range every caller stays in.
inline int nearest_int(float v) { return static_cast<int>(std::nearbyint(v)); }

// The value of largest magnitude, the first of equals, as ggml's scans keep it.
float signed_max(const float* v, int n) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(v[i]) > amax) {
      amax = std::fabs(v[i]);
      max = v[i];
    }
  }
  return max;
}

// Symmetric quants in [-nmax, nmax) of n values, stored biased by nmax, and their scale:
// the scale minimizing the x²-weighted error over 19 candidate grids around nmax / max
// (ggml's make_qx_quants with rmse_type 1, the variant Q6_K uses).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.f;
  }
  const auto quant = [&](float iscale, int i) { return std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i]))); };
  const auto sums = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = quant(iscale, i);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  float iscale = -nmax / max;
  float sumlx, suml2;
  sums(iscale, sumlx, suml2);
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(quant(iscale, i) + nmax);
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sums(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + quant(iscale, i));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric 3-bit-style quants refined one value at a time to maximize (Σwxl)²/Σwl²
// (ggml's make_q3_quants with do_rmse): L holds l + nmax on return.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx <= 0) continue;
      float sl2 = suml2 - w * L[i] * L[i];
      const int new_l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
      if (new_l == L[i]) continue;
      slx += w * x[i] * new_l;
      sl2 += w * new_l * new_l;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sumlx = slx;
        suml2 = sl2;
        ++n_changed;
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric quants in [0, nmax] with a min: scale and min fitted by weighted least
// squares over nstep + 1 candidate grids (ggml's make_qkx2_quants). Returns the scale and
// stores the negated min in *the_min.
struct QkxSearch {
  float rmin, rdelta;
  int nstep;
  bool use_mad;  // absolute instead of squared errors
};

float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, const QkxSearch& s) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.f;
  }
  const auto error = [&](float scale, float mn, const uint8_t* q) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      float diff = scale * q[i] + mn - x[i];
      diff = s.use_mad ? std::fabs(diff) : diff * diff;
      e += weights[i] * diff;
    }
    return e;
  };
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min)))));
  float best_error = error(scale, min, L);
  for (int is = 0; is <= s.nstep; ++is) {
    iscale = (s.rmin + s.rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float cur_error = error(this_scale, this_min, Laux);
    if (cur_error < best_error) {
      std::copy(Laux, Laux + n, L);
      best_error = cur_error;
      scale = this_scale;
      min = this_min;
    }
  }
  *the_min = -min;
  return scale;
}

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

// Q4_K and Q5_K share their scale search: eight sub-blocks of 32 with a 6-bit scale and
// min each, under two f16 super-scales; L receives the final quants in [0, nmax].
template <class Block>
void quantize_super_block_qkx(const float* x, Block& y, int nmax, const QkxSearch& search, uint8_t* L) {
  float mins[8], scales[8], weights[32];
  uint8_t Laux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, search);
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
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, search);
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
        const int l = std::max<int>(-32, std::min<int>(31, narrowed)) + 32;
        if (j < 8) {
          b.scales[j] = static_cast<uint8_t>(l & 0xF);
        } else {
          b.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        }
        b.scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      b.d = f32_to_f16(1 / iscale);
    }
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
}

void quantize_row_q4_k_ref(const float* x, BlockQ4_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    quantize_super_block_qkx(x, y[i], 15, QkxSearch{-1.f, 0.1f, 20, false}, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void quantize_row_q5_k_ref(const float* x, BlockQ5_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    quantize_super_block_qkx(x, y[i], 31, QkxSearch{-0.5f, 0.1f, 15, false}, L);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
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
}

void quantize_row_q6_k_ref(const float* x, BlockQ6_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK_K; ++i, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[16];
    for (int ib = 0; ib < 16; ++ib) scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
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
