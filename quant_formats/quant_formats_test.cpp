// The formats' reference codecs: exact values where the format can hold them, error
// bounds elsewhere, and the byte layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "quant_formats/fp8_e4m3.h"
#include "quant_formats/ggml_blocks.h"
#include "quant_formats/float_convert.h"
#include "quant_formats/int4_g128.h"
#include "quant_formats/iq4.h"
#include "quant_formats/kquants.h"
#include "quant_formats/mxfp4.h"

namespace tsr::quant {
namespace {

std::vector<float> gaussian(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(Fp8E4m3, EveryByteRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const float v = e4m3_to_f32(static_cast<uint8_t>(b));
    if (std::isnan(v)) continue;
    if (v == 0.0f) continue;  // +0 and -0 both decode to zero
    EXPECT_EQ(f32_to_e4m3(v), b) << b;
  }
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), 0x1p-9f);  // the smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), 0x1p-6f);  // the smallest normal
  EXPECT_EQ(f32_to_e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(f32_to_e4m3(-1000.0f), 0xfe);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(f32_to_e4m3(NAN))));
  // Ties go to the even mantissa: 1.0625 lies between 1.0 (m 0) and 1.125 (m 1).
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(1.0625f)), 1.0f);
  EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(1.1875f)), 1.25f);
}

TEST(Fp8E4m3, RowsUsePerChannelScales) {
  std::vector<float> x = gaussian(256, 1);
  for (int j = 0; j < 128; ++j) x[j] *= 1000.0f;  // two rows of very different magnitude
  std::vector<uint8_t> q(2 * fp8_row_bytes(128));
  std::vector<float> y(256);
  for (int r = 0; r < 2; ++r) {
    quantize_row_fp8_e4m3(x.data() + r * 128, q.data() + r * fp8_row_bytes(128), 128);
    dequantize_row_fp8_e4m3(q.data() + r * fp8_row_bytes(128), y.data() + r * 128, 128);
  }
  for (int j = 0; j < 256; ++j) {
    EXPECT_NEAR(y[j], x[j], std::fabs(x[j]) * 0.0625f + (j < 128 ? 1000.0f : 1.0f) * 1e-3f) << j;
  }
}

TEST(Int4G128, GroupsHoldTheirRangeAndZero) {
  std::vector<float> x = gaussian(256, 2);
  x[5] = 0.0f;
  std::vector<GroupInt4> q(2);
  std::vector<float> y(256);
  quantize_row_int4_g128(x.data(), q.data(), 256);
  dequantize_row_int4_g128(q.data(), y.data(), 256);
  EXPECT_EQ(y[5], 0.0f);
  for (int g = 0; g < 2; ++g) {
    float lo = 0, hi = 0;
    for (int j = 0; j < 128; ++j) lo = std::min(lo, x[g * 128 + j]), hi = std::max(hi, x[g * 128 + j]);
    const float step = (hi - lo) / 15;
    for (int j = 0; j < 128; ++j) EXPECT_NEAR(y[g * 128 + j], x[g * 128 + j], step * 0.51f + 1e-3f);
  }
  // Element j sits in the low nibble of byte j, element j + 64 in its high nibble.
  const int q5 = q[0].qs[5] & 0x0f, q69 = q[0].qs[5] >> 4;
  EXPECT_EQ(q5, q[0].z);  // x[5] == 0
  EXPECT_EQ(y[69], float(q69 - q[0].z) * f16_to_f32(q[0].d));
}

TEST(Int4G128, ConstantAndZeroGroups) {
  std::vector<float> x(128, 0.0f);
  GroupInt4 q;
  std::vector<float> y(128);
  quantize_row_int4_g128(x.data(), &q, 128);
  dequantize_row_int4_g128(&q, y.data(), 128);
  for (float v : y) EXPECT_EQ(v, 0.0f);
  std::fill(x.begin(), x.end(), 3.0f);
  quantize_row_int4_g128(x.data(), &q, 128);
  dequantize_row_int4_g128(&q, y.data(), 128);
  for (float v : y) EXPECT_NEAR(v, 3.0f, 3.0f / 15 * 0.51f);
}

// Weights of a corrupt file: a block with a NaN or an infinity dequantizes to NaN, one whose
// scale would be subnormal to zeros; no value is converted to an integer out of range
// (UBSan). Finite blocks beside them keep ggml's values.
TEST(NonFiniteWeights, BlocksDequantizeToNaNOrZero) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  std::vector<float> x = gaussian(4 * 32, 7);
  x[5] = kNaN;                                        // block 0
  x[32 + 9] = -kInf;                                  // block 1
  std::fill(x.begin() + 64, x.begin() + 96, 1e-39f);  // block 2: subnormal scale
  std::vector<BlockQ8_0> q8(4);
  std::vector<BlockQ4_0> q4(4);
  quantize_row_q8_0_ref(x.data(), q8.data(), 128);
  quantize_row_q4_0_ref(x.data(), q4.data(), 128);
  std::vector<float> y8(128), y4(128);
  dequantize_row_q8_0(q8.data(), y8.data(), 128);
  dequantize_row_q4_0(q4.data(), y4.data(), 128);
  for (int j = 0; j < 64; ++j) {
    EXPECT_TRUE(std::isnan(y8[j]) && std::isnan(y4[j])) << j;
  }
  for (int j = 64; j < 96; ++j) {
    EXPECT_EQ(y8[j], 0.0f) << j;
    EXPECT_EQ(y4[j], 0.0f) << j;
  }
  for (int j = 96; j < 128; ++j) {
    EXPECT_NEAR(y8[j], x[j], 0.02f) << j;
    EXPECT_NEAR(y4[j], x[j], 0.35f) << j;
  }
  std::vector<float> g = gaussian(128, 8);
  g[3] = kNaN;
  g[4] = kInf;
  GroupInt4 q;
  quantize_row_int4_g128(g.data(), &q, 128);
  std::vector<float> y(128);
  dequantize_row_int4_g128(&q, y.data(), 128);
  for (float v : y) EXPECT_TRUE(std::isnan(v));
  std::vector<uint8_t> row(4 + 128);
  quantize_row_fp8_e4m3(g.data(), row.data(), 128);  // NaN -> 0x7f, infinity -> ±448: defined
}


namespace kquant_digests {

// The input quant_formats/ggml_oracle/digests.c generates (the same integer and float
// operations): 64 super-blocks of roughly normal values with outliers, one all zero and one
// all positive.
constexpr int64_t kN = 256 * 64;
uint64_t g_state = 0;
uint64_t next() {
  uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
float unit() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }

std::vector<float> input() {
  g_state = 1234;
  std::vector<float> x(kN);
  for (float& v : x) {
    float s = unit() + unit() + unit() + unit();
    if ((next() & 63) == 0) s *= 8;
    v = s * 0.05f;
  }
  std::fill(x.begin(), x.begin() + 256, 0.0f);
  for (int64_t i = 512; i < 768; ++i) x[size_t(i)] = std::fabs(x[size_t(i)]);
  return x;
}

uint64_t fnv1a(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

// The importance matrix digests.c draws after input(): rows of kRow columns.
constexpr int64_t kRow = 1024;
std::vector<float> imatrix() {
  std::vector<float> qw(kRow);
  for (float& v : qw) {
    const float a = unit() + 1.0f;
    v = a * (unit() + 1.0f);
  }
  for (int64_t j = 0; j < kRow; j += 97) qw[size_t(j)] = 0;
  qw[3] *= 50;
  return qw;
}

template <class Block, class Quantize>
uint64_t weighted_digest(Quantize quantize, int64_t block_elems) {
  const std::vector<float> x = input();
  const std::vector<float> qw = imatrix();
  std::vector<Block> q(size_t(kN / block_elems));
  for (int64_t r = 0; r < kN / kRow; ++r) quantize(x.data() + r * kRow, q.data() + r * kRow / block_elems, kRow, qw.data());
  return fnv1a(q.data(), q.size() * sizeof(Block));
}

template <class Block, class Quantize>
uint64_t digest(Quantize quantize, int64_t block_elems) {
  const std::vector<float> x = input();
  std::vector<Block> q(size_t(kN / block_elems));
  quantize(x.data(), q.data(), kN);
  return fnv1a(q.data(), q.size() * sizeof(Block));
}

}  // namespace kquant_digests

// Byte equality with llama.cpp's quantizers (the K-quants, IQ4 and the legacy 32-blocks) (what llama-quantize writes without an
// importance matrix): the digests are those of ggml-quants.c itself, printed by
// quant_formats/ggml_oracle/run.sh from the llama.cpp sources node-llama-cpp 3.21.1 ships.
TEST(Kquants, BytesEqualGgmlsQuantizers) {
  using namespace kquant_digests;
  EXPECT_EQ(digest<BlockQ4_1>(quantize_row_q4_1_ref, 32), 0xc851ed19ae876a56ull);
  EXPECT_EQ(digest<BlockQ5_0>(quantize_row_q5_0_ref, 32), 0xc20c5912a4270d96ull);
  EXPECT_EQ(digest<BlockQ5_1>(quantize_row_q5_1_ref, 32), 0x9948337e70a05ce7ull);
  EXPECT_EQ(digest<BlockQ2_K>(quantize_row_q2_k_ref, 256), 0xc6c5ebe8fbf79d9cull);
  EXPECT_EQ(digest<BlockQ3_K>(quantize_row_q3_k_ref, 256), 0xf3264651f5f4e996ull);
  EXPECT_EQ(digest<BlockQ4_K>(quantize_row_q4_k_ref, 256), 0x251f13623749feb2ull);
  EXPECT_EQ(digest<BlockQ5_K>(quantize_row_q5_k_ref, 256), 0x20fa69460d8dca9bull);
  EXPECT_EQ(digest<BlockQ6_K>(quantize_row_q6_k_ref, 256), 0xbb3c26c6c71db5c0ull);
  EXPECT_EQ(digest<BlockIQ4_NL>(quantize_row_iq4_nl, 32), 0x5a435cdebba89cdbull);
  EXPECT_EQ(digest<BlockIQ4_XS>(quantize_row_iq4_xs, 256), 0xc08d12b802e65db4ull);
  EXPECT_EQ(digest<BlockMXFP4>(quantize_row_mxfp4, 32), 0x1d82e1571cba7b46ull);
  // And the floats of ggml's dequantizer, bit for bit.
  const std::vector<float> x = input();
  std::vector<BlockQ4_K> q(kN / 256);
  quantize_row_q4_k_ref(x.data(), q.data(), kN);
  std::vector<float> y(kN);
  dequantize_row_q4_k(q.data(), y.data(), kN);
  EXPECT_EQ(fnv1a(y.data(), y.size() * sizeof(float)), 0xd1eabe657d6dcc14ull);
  std::vector<BlockMXFP4> m(kN / 32);
  quantize_row_mxfp4(x.data(), m.data(), kN);
  dequantize_row_mxfp4(m.data(), y.data(), kN);
  EXPECT_EQ(fnv1a(y.data(), y.size() * sizeof(float)), 0x7b2977eece67f1bcull);
}

// Byte equality with what llama-quantize --imatrix writes: ggml's quantize_q*(…, imatrix)
// on rows of 1024 with an importance matrix that has unused columns and an outlier.
TEST(Kquants, ImatrixBytesEqualGgmlsWeightedQuantizers) {
  using namespace kquant_digests;
  EXPECT_EQ(weighted_digest<BlockQ4_0>(quantize_row_q4_0_imatrix, 32), 0x90fa9bdbe48af061ull);
  EXPECT_EQ(weighted_digest<BlockQ4_1>(quantize_row_q4_1_imatrix, 32), 0x6deb6550e417f244ull);
  EXPECT_EQ(weighted_digest<BlockQ5_0>(quantize_row_q5_0_imatrix, 32), 0x3f58f609b6db0e9bull);
  EXPECT_EQ(weighted_digest<BlockQ5_1>(quantize_row_q5_1_imatrix, 32), 0xeace2d8d16eda3faull);
  EXPECT_EQ(weighted_digest<BlockQ2_K>(quantize_row_q2_k_imatrix, 256), 0xfd0f7404d507fb04ull);
  EXPECT_EQ(weighted_digest<BlockQ3_K>(quantize_row_q3_k_imatrix, 256), 0x6b98a11738f0f0c3ull);
  EXPECT_EQ(weighted_digest<BlockQ4_K>(quantize_row_q4_k_imatrix, 256), 0xd1dceecf35633e59ull);
  EXPECT_EQ(weighted_digest<BlockQ5_K>(quantize_row_q5_k_imatrix, 256), 0x87487e52f631fe32ull);
  EXPECT_EQ(weighted_digest<BlockQ6_K>(quantize_row_q6_k_imatrix, 256), 0xad482e34149c86daull);
  EXPECT_EQ(weighted_digest<BlockIQ4_NL>(quantize_row_iq4_nl_imatrix, 32), 0x5805baeeaa75774full);
  EXPECT_EQ(weighted_digest<BlockIQ4_XS>(quantize_row_iq4_xs_imatrix, 256), 0x22f672085469cc63ull);
}

// The vectorized Q8_K quantizer (every K-quant prefill's activations) writes the
// reference's bytes: gaussian blocks, blocks of exact halves (round to even), a negative
// extreme, +a before -a and -a before +a (the first one sets the sign), subnormal values
// (whose scale overflows), and the blocks the reference handles itself (zeros, a NaN, an
// infinity).
TEST(Kquants, Q8KVectorQuantizerWritesTheReferenceBytes) {
  std::vector<float> x = gaussian(256 * 12, 9);
  for (int i = 0; i < 256; ++i) x[256 + i] = 0.5f * float(i % 64 - 32);  // max -16: products ±k.5
  x[512 + 7] = -40.0f;
  x[768 + 3] = 40.0f, x[768 + 9] = -40.0f;
  x[1024 + 3] = -40.0f, x[1024 + 200] = 40.0f;
  std::fill(x.begin() + 1280, x.begin() + 1536, 0.0f);
  x[1536 + 17] = std::numeric_limits<float>::quiet_NaN();
  x[1792 + 255] = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < 256; ++i) x[2048 + i] = 1e-39f * float(i % 7 - 3);  // -127 / max overflows
  std::vector<BlockQ8_K> ref(x.size() / 256), got(ref.size());
  quantize_row_q8_k_ref(x.data(), ref.data(), int64_t(x.size()));
  quantize_row_q8_k(x.data(), got.data(), int64_t(x.size()));
  for (size_t b = 0; b < ref.size(); ++b) {
    SCOPED_TRACE("block " + std::to_string(b));
    EXPECT_EQ(0, std::memcmp(ref[b].qs, got[b].qs, sizeof(ref[b].qs)));
    EXPECT_EQ(0, std::memcmp(ref[b].bsums, got[b].bsums, sizeof(ref[b].bsums)));
    EXPECT_EQ(0, std::memcmp(&ref[b].d, &got[b].d, sizeof(float)));
  }
}

// Each format's dequantized values stay within its resolution of the input: the error of
// a 256-block scales with the block's range over the format's levels.
TEST(Kquants, RoundTripWithinEachFormatsResolution) {
  const std::vector<float> x = gaussian(256 * 16, 5);
  const auto rms_error = [&](auto quantize, auto dequantize, auto block, size_t block_elems = 256) {
    std::vector<decltype(block)> q(x.size() / block_elems);
    quantize(x.data(), q.data(), int64_t(x.size()));
    std::vector<float> y(x.size());
    dequantize(q.data(), y.data(), int64_t(x.size()));
    double e = 0;
    for (size_t i = 0; i < x.size(); ++i) e += (x[i] - y[i]) * (x[i] - y[i]);
    return std::sqrt(e / double(x.size()));
  };
  // Unit-variance input: llama.cpp's figures for these formats are near these bounds.
  EXPECT_LT(rms_error(quantize_row_q2_k_ref, dequantize_row_q2_k, BlockQ2_K{}), 0.45);
  EXPECT_LT(rms_error(quantize_row_q4_1_ref, dequantize_row_q4_1, BlockQ4_1{}, 32), 0.15);
  EXPECT_LT(rms_error(quantize_row_q5_0_ref, dequantize_row_q5_0, BlockQ5_0{}, 32), 0.08);
  EXPECT_LT(rms_error(quantize_row_q5_1_ref, dequantize_row_q5_1, BlockQ5_1{}, 32), 0.08);
  EXPECT_LT(rms_error(quantize_row_q3_k_ref, dequantize_row_q3_k, BlockQ3_K{}), 0.25);
  EXPECT_LT(rms_error(quantize_row_q4_k_ref, dequantize_row_q4_k, BlockQ4_K{}), 0.12);
  EXPECT_LT(rms_error(quantize_row_q5_k_ref, dequantize_row_q5_k, BlockQ5_K{}), 0.06);
  EXPECT_LT(rms_error(quantize_row_q6_k_ref, dequantize_row_q6_k, BlockQ6_K{}), 0.03);
  EXPECT_LT(rms_error(quantize_row_iq4_nl, dequantize_row_iq4_nl, BlockIQ4_NL{}, 32), 0.12);
  EXPECT_LT(rms_error(quantize_row_iq4_xs, dequantize_row_iq4_xs, BlockIQ4_XS{}), 0.12);
  EXPECT_LT(rms_error(quantize_row_mxfp4, dequantize_row_mxfp4, BlockMXFP4{}, 32), 0.2);
}

// Hand-made blocks decode as ggml-common.h lays them out.
TEST(Kquants, LayoutsDecodeByHand) {
  BlockQ4_K b{};
  b.d = f32_to_f16(0.5f);
  b.dmin = f32_to_f16(0.25f);
  b.scales[0] = 3;              // sub-block 0: scale 3
  b.scales[4] = 2;              // sub-block 0: min 2
  b.scales[8] = 0x5 | (0x1 << 4);  // sub-block 4: scale low bits 5, min low bits 1
  b.scales[0] |= 1 << 6;        // sub-block 4's scale gains 16 (bits 4-5 from scales[0])
  b.qs[0] = 0x97;               // element 0: 7; element 32: 9
  b.qs[64] = 0x0a;              // element 128 (sub-block 4): 10
  float y[256];
  dequantize_row_q4_k(&b, y, 256);
  EXPECT_EQ(y[0], 0.5f * 3 * 7 - 0.25f * 2);
  EXPECT_EQ(y[128], 0.5f * 21 * 10 - 0.25f * 1);
  uint8_t sc, m;
  kquant_scale_min(4, b.scales, &sc, &m);
  EXPECT_EQ(sc, 21);
  EXPECT_EQ(m, 1);

  BlockQ6_K c{};
  c.d = f32_to_f16(1.0f);
  c.scales[2] = -3;   // group 2: elements 32-47
  c.ql[32] = 0x05;    // element 32: low bits 5
  c.qh[0] = 0x3 << 2;  // element 32: high bits 3 -> 53 - 32 = 21
  float z[256];
  dequantize_row_q6_k(&c, z, 256);
  EXPECT_EQ(z[32], -3.0f * 21);
  EXPECT_EQ(z[0], 0.0f);  // scale 0

  BlockIQ4_XS e{};
  e.d = f32_to_f16(2.0f);
  e.scales_l[0] = 0x0 | (0x1 << 4);  // sub-block 0 low 0, sub-block 1 low 1
  e.scales_h = 0x2 | (0x2 << 2);     // both: high bits 2 -> 32 and 33, i.e. 0 and 1
  e.qs[16] = 0xf0;                   // sub-block 1: element 32 index 0, element 48 index 15
  float w[256];
  dequantize_row_iq4_xs(&e, w, 256);
  EXPECT_EQ(w[32], 2.0f * kIQ4Values[0]);
  EXPECT_EQ(w[48], 2.0f * kIQ4Values[15]);
  EXPECT_EQ(w[0], 0.0f);
}

}  // namespace
}  // namespace tsr::quant
