#include "core/kv/kv_dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/error.h"
#include "quant_formats/ggml_blocks.h"

namespace tsr {
namespace {

TEST(KvFormat, NamesResolveToDtypesAndAutoRotatesQ4_0Only) {
  const KvFormat f16 = kv_format_resolve("f16", "f16", "auto", 64);
  EXPECT_EQ(f16.k, TSR_DTYPE_F16);
  EXPECT_FALSE(f16.rotated);
  const KvFormat mixed = kv_format_resolve("q8_0", "q4_0", "auto", 64);
  EXPECT_EQ(mixed.k, TSR_DTYPE_Q8_0);
  EXPECT_EQ(mixed.v, TSR_DTYPE_Q4_0);
  EXPECT_TRUE(mixed.rotated);
  EXPECT_FALSE(kv_format_resolve("q4_0", "q4_0", "none", 64).rotated);
  EXPECT_TRUE(kv_format_resolve("f32", "f32", "hadamard", 8).rotated);
  EXPECT_FALSE(kv_format_resolve("q4_0", "q4_0", "auto", 96).rotated) << "auto leaves a head of 96 unrotated";
  // fp8 rows carry their own scale, no blocks: any head size, 4 bytes more than its elements.
  const KvFormat fp8 = kv_format_resolve("fp8_e4m3", "fp8_e4m3", "auto", 8);
  EXPECT_EQ(fp8.k, TSR_DTYPE_FP8_E4M3);
  EXPECT_FALSE(fp8.rotated);
  EXPECT_EQ(kv_head_bytes(TSR_DTYPE_FP8_E4M3, 8), 12);
  EXPECT_EQ(kv_head_bytes(TSR_DTYPE_FP8_E4M3, 128), 132);
}

TEST(KvFormat, RefusalsNameTheProblem) {
  const auto says = [](auto f, const std::string& text) {
    try {
      f();
      ADD_FAILURE() << "no error; expected: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  says([] { kv_format_resolve("q9_0", "f16", "auto", 64); }, "unknown KV cache dtype 'q9_0'");
  says([] { kv_format_resolve("q8_0", "q8_0", "auto", 8); }, "heads have 8 elements: choose f16, bf16, f32 or fp8_e4m3");
  says([] { kv_format_resolve("f16", "f16", "hadamard", 96); }, "power-of-two size; this model's have 96");
  says([] { kv_format_resolve("f16", "f16", "walsh", 64); }, "unknown value 'walsh'");
}

TEST(KvFormat, HadamardIsSymmetricAndItsOwnInverse) {
  for (const int32_t n : {1, 8, 64, 128}) {
    const std::vector<float> h = hadamard_matrix(n);
    for (int32_t i = 0; i < n; ++i) {
      for (int32_t j = 0; j < n; ++j) {
        EXPECT_EQ(h[size_t(i) * n + j], h[size_t(j) * n + i]);
        double dot = 0;
        for (int32_t k = 0; k < n; ++k) dot += double(h[size_t(i) * n + k]) * h[size_t(k) * n + j];
        EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-6) << n << ": " << i << "," << j;
      }
    }
  }
}

// Why q4_0 caches are rotated: a head with an outlier channel (as real keys have) loses
// most of its other channels to a block scale set by the outlier; rotated, the outlier
// spreads over the head and the round trip's error drops.
TEST(KvFormat, RotationShrinksTheQ4_0ErrorOfAHeadWithAnOutlier) {
  constexpr int32_t n = 64;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const std::vector<float> h = hadamard_matrix(n);
  auto error = [&](const std::vector<float>& x, bool rotate) {
    std::vector<float> y(n), back(n), q(n);
    for (int32_t i = 0; i < n; ++i) {
      y[i] = 0;
      for (int32_t k = 0; k < n && rotate; ++k) y[i] += h[size_t(i) * n + k] * x[k];
      if (!rotate) y[i] = x[i];
    }
    std::vector<quant::BlockQ4_0> blocks(n / 32);
    quant::quantize_row_q4_0_ref(y.data(), blocks.data(), n);
    quant::dequantize_row_q4_0(blocks.data(), q.data(), n);
    double err = 0;
    for (int32_t i = 0; i < n; ++i) {
      back[i] = 0;
      for (int32_t k = 0; k < n && rotate; ++k) back[i] += h[size_t(i) * n + k] * q[k];
      if (!rotate) back[i] = q[i];
      err += (back[i] - x[i]) * (back[i] - x[i]);
    }
    return err;
  };
  double plain = 0, rotated = 0;
  for (int row = 0; row < 64; ++row) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    x[5] = 40;  // the outlier channel
    plain += error(x, false);
    rotated += error(x, true);
  }
  EXPECT_LT(rotated, 0.5 * plain) << "rotated " << rotated << " vs " << plain;
}

}  // namespace
}  // namespace tsr
