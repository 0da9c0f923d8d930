// The formats' reference codecs: exact values where the format can hold them, error
// bounds elsewhere, and the byte layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "quant_formats/fp8_e4m3.h"
#include "quant_formats/ggml_blocks.h"
#include "quant_formats/float_convert.h"
#include "quant_formats/int4_g128.h"

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

}  // namespace
}  // namespace tsr::quant
