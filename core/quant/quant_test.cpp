// Reference quantization against blocks computed by hand from ggml's definitions.
#include "core/quant/quant.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"

namespace tsr::quant {
namespace {

constexpr uint16_t kF16One = 0x3c00, kF16MinusOne = 0xbc00;

// d = amax / 127 = 1 makes q = roundf(x): halves round away from zero, unlike nearbyint.
TEST(QuantQ8_0, UnitScaleRoundsHalvesAwayFromZero) {
  std::array<float, 32> x{};
  x[0] = 127.0f, x[1] = -127.0f, x[2] = 0.5f, x[3] = -0.5f, x[4] = 2.5f, x[5] = -2.5f;
  x[6] = 1.49f, x[7] = -100.51f;
  BlockQ8_0 b;
  quantize_row_q8_0_ref(x.data(), &b, 32);
  EXPECT_EQ(b.d, kF16One);
  const std::array<int8_t, 8> want{127, -127, 1, -1, 3, -3, 1, -101};
  for (size_t j = 0; j < want.size(); ++j) EXPECT_EQ(b.qs[j], want[j]) << j;
  for (size_t j = want.size(); j < 32; ++j) EXPECT_EQ(b.qs[j], 0) << j;
}

// amax = 1: d = 1/127 rounds to f16 0x2008 (2^-7 * (1 + 8/1024)), but q uses the f32 id = 127.
TEST(QuantQ8_0, ScaleIsStoredAsF16AndQuantizesWithF32Inverse) {
  std::array<float, 32> x{};
  x[0] = 1.0f, x[1] = -0.5f, x[2] = 0.25f;
  BlockQ8_0 b;
  quantize_row_q8_0_ref(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x2008);
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], -64);  // -63.5 rounds away from zero
  EXPECT_EQ(b.qs[2], 32);   // 31.75
  std::array<float, 32> y{};
  dequantize_row_q8_0(&b, y.data(), 32);
  const float d = 0x1.02p-7f;  // f16 0x2008
  EXPECT_EQ(y[0], 127 * d);
  EXPECT_EQ(y[1], -64 * d);
  EXPECT_EQ(y[3], 0.0f);
}

TEST(QuantQ8_0, ZeroBlockHasZeroScale) {
  std::array<float, 64> x{};
  std::array<BlockQ8_0, 2> b;
  std::memset(b.data(), 0xff, sizeof b);
  quantize_row_q8_0_ref(x.data(), b.data(), 64);
  for (const BlockQ8_0& blk : b) {
    EXPECT_EQ(blk.d, 0);
    for (int8_t q : blk.qs) EXPECT_EQ(q, 0);
  }
}

// Largest magnitude -8: d = 1, q = min(15, trunc(x + 8.5)).
TEST(QuantQ4_0, NegativeMaxGivesUnitScale) {
  std::array<float, 32> x{};
  x[0] = -8.0f, x[1] = 7.0f, x[2] = 7.9f, x[3] = -0.6f, x[4] = 0.4f, x[5] = 0.5f;
  x[16] = 1.0f, x[17] = -7.4f, x[31] = 3.2f;
  BlockQ4_0 b;
  quantize_row_q4_0_ref(x.data(), &b, 32);
  EXPECT_EQ(b.d, kF16One);
  // low nibble: element j; high nibble: element j + 16 (zeros quantize to 8).
  const std::array<uint8_t, 16> want{0x90, 0x1f, 0x8f, 0x87, 0x88, 0x89, 0x88, 0x88,
                                     0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0xb8};
  for (size_t j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], want[j]) << j;
  std::array<float, 32> y{};
  dequantize_row_q4_0(&b, y.data(), 32);
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[1], 7.0f);
  EXPECT_EQ(y[2], 7.0f);  // clamped at 15
  EXPECT_EQ(y[3], -1.0f);
  EXPECT_EQ(y[16], 1.0f);
  EXPECT_EQ(y[17], -7.0f);
  EXPECT_EQ(y[31], 3.0f);
}

// Largest magnitude +8: d = -1, so the codes run backwards; the first of equal
// magnitudes decides the sign.
TEST(QuantQ4_0, PositiveMaxGivesNegativeScale) {
  std::array<float, 32> x{};
  x[0] = 8.0f, x[1] = -8.0f, x[2] = 1.0f, x[3] = -7.0f;
  BlockQ4_0 b;
  quantize_row_q4_0_ref(x.data(), &b, 32);
  EXPECT_EQ(b.d, kF16MinusOne);
  EXPECT_EQ(b.qs[0] & 0x0f, 0);   // -8 + 8.5
  EXPECT_EQ(b.qs[1] & 0x0f, 15);  // 16.5 clamped
  EXPECT_EQ(b.qs[2] & 0x0f, 7);   // 7.5
  EXPECT_EQ(b.qs[3] & 0x0f, 15);  // 15.5
}

TEST(QuantQ4_0, ZeroBlockHasNegativeZeroScale) {
  std::array<float, 32> x{};
  BlockQ4_0 b;
  quantize_row_q4_0_ref(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x8000);  // 0.0f / -8 is -0: ggml stores a negative zero scale too
  for (uint8_t q : b.qs) EXPECT_EQ(q, 0x88);
}

TEST(QuantRows, HalfFloatRowsRoundToNearestEven) {
  const std::array<float, 3> x{1.0f, 1.0f + 0x1p-11f, -65504.0f};  // 1 + half an f16 ulp
  std::array<uint16_t, 3> h{}, bh{};
  f32_to_f16_row(x.data(), h.data(), 3);
  EXPECT_EQ(h[0], 0x3c00);
  EXPECT_EQ(h[1], 0x3c00);  // tie goes to the even mantissa
  EXPECT_EQ(h[2], 0xfbff);
  f32_to_bf16_row(x.data(), bh.data(), 3);
  EXPECT_EQ(bh[0], 0x3f80);
  std::array<float, 3> back{};
  f16_to_f32_row(h.data(), back.data(), 3);
  EXPECT_EQ(back[2], -65504.0f);
  bf16_to_f32_row(bh.data(), back.data(), 1);
  EXPECT_EQ(back[0], 1.0f);
}

TEST(QuantGeneric, MatchesRowFunctionsAndRoundTrips) {
  std::vector<float> x(96);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i * 37 % 101) - 0.5f;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    const std::vector<uint8_t> bytes = quantize(t, x);
    EXPECT_EQ(bytes.size(), byte_size(t, 96));
    const std::vector<float> y = dequantize(t, bytes, 96);
    // Requantizing dequantized values reproduces the bytes: the formats are fixed points.
    EXPECT_EQ(quantize(t, y), bytes) << static_cast<int>(t);
  }
  std::vector<BlockQ4_0> q4(3);
  quantize_row_q4_0_ref(x.data(), q4.data(), 96);
  const std::vector<uint8_t> bytes = quantize(GgmlType::Q4_0, x);
  EXPECT_EQ(std::memcmp(bytes.data(), q4.data(), bytes.size()), 0);
}

// The K-quant and IQ4 types through the generic entry points: ggml's bytes (the codecs are
// checked against ggml in quant_formats_test), and NaN or infinity refused by index.
TEST(QuantGeneric, KquantsAndIq4) {
  std::vector<float> x(512);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i));
  for (const GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                           GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1}) {
    const std::vector<uint8_t> bytes = quantize(t, x);
    EXPECT_EQ(bytes.size(), byte_size(t, 512));
    const std::vector<float> y = dequantize(t, bytes, 512);
    double err = 0;
    for (size_t i = 0; i < x.size(); ++i) err = std::max(err, double(std::fabs(x[i] - y[i])));
    EXPECT_LT(err, 0.5) << static_cast<int>(t);
    EXPECT_TRUE(row_fits(t, 512));
  }
  std::vector<BlockQ4_K> ref(2);
  quantize_row_q4_k_ref(x.data(), ref.data(), 512);
  EXPECT_EQ(std::memcmp(quantize(GgmlType::Q4_K, x).data(), ref.data(), sizeof(BlockQ4_K) * 2), 0);
  x[300] = std::numeric_limits<float>::infinity();
  try {
    quantize(GgmlType::Q4_K, x);
    ADD_FAILURE() << "an infinity was quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element 300 is inf"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(row_fits(GgmlType::Q4_K, 96));
  EXPECT_EQ(llama_file_type(GgmlType::IQ4_XS), 30u);
}

TEST(QuantGeneric, RefusesWhatDoesNotFit) {
  std::vector<float> x(40);
  EXPECT_THROW(quantize(GgmlType::Q8_0, x), Error);
  EXPECT_THROW(quantize(GgmlType::Q4_K, std::vector<float>(128)), Error);  // half a super-block
  EXPECT_THROW(quantize(GgmlType::Q8_K, std::vector<float>(256)), Error);  // activations only
  EXPECT_FALSE(row_fits(GgmlType::Q4_0, 172));
  EXPECT_TRUE(row_fits(GgmlType::F16, 172));
  EXPECT_TRUE(row_fits(GgmlType::Q8_0, 64));
  EXPECT_EQ(parse_type("Q4_0"), GgmlType::Q4_0);
  EXPECT_EQ(parse_type("q5_0"), GgmlType::Q5_0);
  EXPECT_EQ(parse_type("q8_1"), std::nullopt);
  EXPECT_EQ(parse_type("q4_k"), GgmlType::Q4_K);
  EXPECT_EQ(parse_type("IQ4_XS"), GgmlType::IQ4_XS);
  EXPECT_EQ(parse_type("q8_k"), std::nullopt);
  EXPECT_EQ(llama_file_type(GgmlType::Q8_0), 7u);
}

// quantize_rows: each row under the same importances, through the type's weighted
// quantizer; no matrix is plain quantize(), as is a type without a weighted form (Q8_0).
TEST(QuantGeneric, RowsUnderAnImportanceMatrix) {
  std::vector<float> x(512 * 3), qw(512);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.37f) * (i % 97 == 0 ? 9.0f : 1.0f);
  for (size_t i = 0; i < qw.size(); ++i) qw[i] = 1.0f + float(i % 7);
  std::vector<uint8_t> rows(byte_size(GgmlType::Q4_K, 512 * 3));
  quantize_rows(GgmlType::Q4_K, x, 512, qw.data(), rows);
  for (int r = 0; r < 3; ++r) {
    BlockQ4_K one[2];
    quantize_row_q4_k_imatrix(x.data() + 512 * r, one, 512, qw.data());
    EXPECT_EQ(std::memcmp(rows.data() + sizeof one * size_t(r), one, sizeof one), 0) << r;
  }
  EXPECT_NE(rows, quantize(GgmlType::Q4_K, x));
  quantize_rows(GgmlType::Q4_K, x, 512, nullptr, rows);
  EXPECT_EQ(rows, quantize(GgmlType::Q4_K, x));
  std::vector<uint8_t> q8(byte_size(GgmlType::Q8_0, 512 * 3));
  quantize_rows(GgmlType::Q8_0, x, 512, qw.data(), q8);
  EXPECT_EQ(q8, quantize(GgmlType::Q8_0, x));
}

}  // namespace
}  // namespace tsr::quant
