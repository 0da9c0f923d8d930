// GPTQ against its definition: with no correlation between inputs it is round-to-nearest
// (ggml's bytes), its factor inverts the damped Hessian, and on correlated inputs it moves
// the layer's outputs less than round-to-nearest does.
#include "core/quant/gptq.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/error.h"
#include "core/quant/layer_error.h"
#include "core/quant/quant.h"
#include "quant_formats/int4_g128.h"

namespace tsr::quant {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0};

std::vector<float> gaussian(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// H = X^T X of `tokens` inputs mixed through a random matrix and scaled per channel, so
// that the inputs are correlated and of uneven size, as a layer's are.
std::vector<float> correlated_hessian(int64_t cols, int64_t tokens, uint32_t seed) {
  const std::vector<float> z = gaussian(size_t(tokens * cols), seed);
  std::vector<float> mix = gaussian(size_t(cols * cols), seed + 1, 0.3f);
  for (int64_t i = 0; i < cols; ++i) mix[size_t(i * cols + i)] += 1.0f;
  std::vector<float> x(size_t(tokens * cols));
  sgemm('N', 'N', tokens, cols, cols, 1.0f, z.data(), cols, mix.data(), cols, 0.0f, x.data(), cols);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < cols; ++c) x[size_t(t * cols + c)] *= 1.0f + 4.0f * float(c % 7 == 0);
  }
  std::vector<float> h(size_t(cols * cols));
  sgemm('T', 'N', cols, cols, tokens, 1.0f, x.data(), cols, x.data(), cols, 0.0f, h.data(), cols);
  return h;
}

TEST(Gptq, UncorrelatedInputsGiveGgmlRoundToNearestBytes) {
  const int64_t rows = 8, cols = 256;
  const std::vector<float> w = gaussian(size_t(rows * cols), 7);
  std::vector<float> h(size_t(cols * cols), 0.0f);
  for (int64_t i = 0; i < cols; ++i) h[size_t(i * cols + i)] = 1.0f + float(i % 5);
  const GptqFactor f = gptq_factor(h, cols);
  for (GgmlType t : kTypes) {
    EXPECT_EQ(gptq_quantize(*BlockGrid::of(t), w, rows, cols, f), quantize(t, w)) << ggml_type_traits(uint32_t(t))->name;
  }
}

TEST(Gptq, FactorInvertsTheDampedHessian) {
  const int64_t n = 64;
  const std::vector<float> h = correlated_hessian(n, 300, 3);
  const GptqFactor f = gptq_factor(h, n, 0.01);
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += h[size_t(i * n + i)] / double(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < i; ++j) EXPECT_EQ(f.u[size_t(i * n + j)], 0.0f);
  }
  // (U^T U)(H + damp mean I) = I
  for (int64_t i = 0; i < n; i += 7) {
    for (int64_t j = 0; j < n; j += 5) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) {
        double hinv_ik = 0;
        for (int64_t m = 0; m <= std::min(i, k); ++m) hinv_ik += double(f.u[size_t(m * n + i)]) * f.u[size_t(m * n + k)];
        s += hinv_ik * (h[size_t(k * n + j)] + (k == j ? 0.01 * mean : 0.0));
      }
      EXPECT_NEAR(s, i == j ? 1.0 : 0.0, 1e-3) << i << "," << j;
    }
  }
}

TEST(Gptq, MovesOutputsLessThanRoundToNearest) {
  const int64_t rows = 48, cols = 256;
  const std::vector<float> w = gaussian(size_t(rows * cols), 11, 0.05f);
  const std::vector<float> h = correlated_hessian(cols, 1024, 5);
  const GptqFactor f = gptq_factor(h, cols);
  for (GgmlType t : kTypes) {
    std::vector<float> q;
    const std::vector<uint8_t> bytes = gptq_quantize(*BlockGrid::of(t), w, rows, cols, f, &q);
    EXPECT_EQ(dequantize(t, bytes, rows * cols), q);  // the bytes say what GPTQ chose
    const std::vector<float> rtn = dequantize(t, quantize(t, w), rows * cols);
    const double e_gptq = layer_output_error(w, q, rows, cols, h), e_rtn = layer_output_error(w, rtn, rows, cols, h);
    EXPECT_LT(e_gptq, 0.8 * e_rtn) << ggml_type_traits(uint32_t(t))->name << ": " << e_gptq << " vs " << e_rtn;
  }
}

// Act-order: the factor orders the columns by decreasing H_ii (and still inverts H in that
// order), the bytes decode to what GPTQ chose, and on inputs of uneven size (every 7th
// channel 4x the others) the output error falls well below in-order GPTQ's. Measured at
// 48 x 256: Q4_0 0.48, Q4_1 0.50, Q5_0 0.43, Q5_1 0.48, Q8_0 0.46 of in-order's.
TEST(Gptq, ActOrderQuantizesTheLargestInputsFirst) {
  const int64_t rows = 48, cols = 256;
  const std::vector<float> w = gaussian(size_t(rows * cols), 11, 0.05f);
  const std::vector<float> h = correlated_hessian(cols, 1024, 5);
  const GptqFactor in_order = gptq_factor(h, cols), act = gptq_factor(h, cols, 0.01, /*act_order=*/true);
  ASSERT_EQ(act.order.size(), size_t(cols));
  for (int64_t p = 1; p < cols; ++p) {
    EXPECT_GE(h[size_t(act.order[p - 1] * cols + act.order[p - 1])], h[size_t(act.order[p] * cols + act.order[p])]);
  }
  for (GgmlType t : kTypes) {
    std::vector<float> q, q_act;
    gptq_quantize(*BlockGrid::of(t), w, rows, cols, in_order, &q);
    const std::vector<uint8_t> bytes = gptq_quantize(*BlockGrid::of(t), w, rows, cols, act, &q_act);
    EXPECT_EQ(dequantize(t, bytes, rows * cols), q_act);
    const double e = layer_output_error(w, q, rows, cols, h), e_act = layer_output_error(w, q_act, rows, cols, h);
    EXPECT_LT(e_act, 0.7 * e) << ggml_type_traits(uint32_t(t))->name << ": " << e_act << " vs " << e;
  }
}

// The int4_g128 grid (groups of 128 with a scale and zero point): GPTQ's values, quantized
// again by the load-time scheme, decode to themselves (each group keeps codes 0 and 15 where
// its range reaches them), and they move the outputs less than the scheme's own rounding.
TEST(Gptq, Int4G128ValuesSurviveTheSchemesQuantizer) {
  const int64_t rows = 48, cols = 256;
  const std::vector<float> w = gaussian(size_t(rows * cols), 11, 0.05f);
  const std::vector<float> h = correlated_hessian(cols, 1024, 5);
  const BlockGrid grid = BlockGrid::int4_g128();
  for (const bool act_order : {false, true}) {
    SCOPED_TRACE(act_order);
    std::vector<float> q;
    EXPECT_TRUE(gptq_quantize(grid, w, rows, cols, gptq_factor(h, cols, 0.01, act_order), &q).empty());
    std::vector<GroupInt4> g(size_t(rows * cols / kGroupInt4));
    quantize_row_int4_g128(q.data(), g.data(), rows * cols);
    std::vector<float> again(q.size());
    dequantize_row_int4_g128(g.data(), again.data(), rows * cols);
    EXPECT_EQ(again, q);
    std::vector<GroupInt4> r(g.size());
    std::vector<float> rtn(w.size());
    quantize_row_int4_g128(w.data(), r.data(), rows * cols);
    dequantize_row_int4_g128(r.data(), rtn.data(), rows * cols);
    const double e = layer_output_error(w, q, rows, cols, h), e_rtn = layer_output_error(w, rtn, rows, cols, h);
    EXPECT_LT(e, 0.8 * e_rtn) << e << " vs " << e_rtn;
  }
}

TEST(Gptq, UnusedInputsQuantizeToZero) {
  const int64_t rows = 4, cols = 64;
  std::vector<float> h = correlated_hessian(cols, 200, 9);
  for (int64_t i = 0; i < cols; ++i) h[size_t(i * cols + 5)] = h[size_t(5 * cols + i)] = 0.0f;
  const GptqFactor f = gptq_factor(h, cols);
  EXPECT_TRUE(f.dead[5]);
  std::vector<float> q;
  gptq_quantize(*BlockGrid::of(GgmlType::Q4_0), gaussian(size_t(rows * cols), 2), rows, cols, f, &q);
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(q[size_t(r * cols + 5)], 0.0f);
}

TEST(Gptq, RefusesNonFiniteWeightsAndMismatchedShapes) {
  const int64_t cols = 32;
  std::vector<float> h(size_t(cols * cols), 0.0f);
  for (int64_t i = 0; i < cols; ++i) h[size_t(i * cols + i)] = 1.0f;
  const GptqFactor f = gptq_factor(h, cols);
  std::vector<float> w(cols, 1.0f);
  w[3] = std::nanf("");
  EXPECT_THROW(gptq_quantize(*BlockGrid::of(GgmlType::Q4_0), w, 1, cols, f), Error);
  EXPECT_THROW(gptq_quantize(*BlockGrid::of(GgmlType::Q4_0), std::vector<float>(64, 1.0f), 1, 64, f), Error);
  EXPECT_FALSE(BlockGrid::of(GgmlType::Q4_K).has_value());
}

}  // namespace
}  // namespace tsr::quant
