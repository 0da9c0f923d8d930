// SmoothQuant's scales against the paper's definition: at alpha 0.5 each channel's largest
// activation and largest weight meet at the same magnitude after scaling; the scales fold
// into the norms before Q/K/V and gate/up only (folding keeps the float model, as
// awq_test's Awq.FoldingKeepsTheFloatModel checks for the same code), and unused channels
// keep scale 1.
#include "core/quant/smoothquant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tsr::quant {
namespace {

TEST(SmoothQuant, HalfAlphaBalancesActivationAndWeightRanges) {
  const int64_t cols = 32, rows = 8;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.1f);
  FloatTensor w{rows, cols, std::vector<float>(size_t(rows * cols))};
  for (float& v : w.data) v = dist(rng);
  InputStats st{cols, 1, std::vector<float>(size_t(cols * cols)), std::vector<double>(size_t(cols)),
                std::vector<float>(size_t(cols)), {}, {}};
  for (int64_t c = 0; c < cols; ++c) st.abs_max[size_t(c)] = c % 8 == 0 ? 60.0f : 1.0f + 0.1f * float(c);
  st.abs_max[5] = 0.0f;  // no token used it
  const std::vector<float> s = smooth_scales({&w}, st, 0.5);
  for (int64_t c = 0; c < cols; ++c) {
    float w_max = 0;
    for (int64_t r = 0; r < rows; ++r) w_max = std::max(w_max, std::fabs(w.data[size_t(r * cols + c)]));
    if (c == 5) {
      EXPECT_EQ(s[size_t(c)], 1.0f);
      continue;
    }
    EXPECT_NEAR(st.abs_max[size_t(c)] / s[size_t(c)], w_max * s[size_t(c)], 1e-4f * st.abs_max[size_t(c)]) << c;
  }
}

TEST(SmoothQuant, FoldsIntoTheNormBeforeQkvAndGateUp) {
  const int64_t d = 16, f = 24;
  FloatTensors t;
  auto add = [&](const std::string& n, int64_t rows, int64_t cols) {
    t["blk.0." + n] = {rows, cols, std::vector<float>(size_t(rows * cols), 0.5f)};
  };
  add("attn_norm.weight", 1, d), add("attn_q.weight", d, d), add("attn_k.weight", d, d), add("attn_v.weight", d, d);
  add("attn_output.weight", d, d), add("ffn_norm.weight", 1, d), add("ffn_gate.weight", f, d), add("ffn_up.weight", f, d);
  add("ffn_down.weight", d, f);
  auto in = std::make_shared<InputStats>(InputStats{d, 1, std::vector<float>(size_t(d * d)), std::vector<double>(size_t(d)),
                                                    std::vector<float>(size_t(d), 4.0f), {}, {}});
  CalibrationStats stats;
  for (const char* n : {"attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"}) stats[std::string("blk.0.") + n + ".weight"] = in;
  const FloatTensors before = t;
  const std::vector<SmoothGroup> groups = smooth_apply(t, stats, 1);
  ASSERT_EQ(groups.size(), 2u);  // the two norms; SmoothQuant's Llama recipe leaves down and the output projection
  EXPECT_EQ(groups[0].group.down, "blk.0.attn_norm.weight");
  EXPECT_EQ(groups[1].group.down, "blk.0.ffn_norm.weight");
  const float s = std::sqrt(4.0f) / std::sqrt(0.5f);
  EXPECT_FLOAT_EQ(t.at("blk.0.attn_norm.weight").data[3], 0.5f / s);
  EXPECT_FLOAT_EQ(t.at("blk.0.attn_q.weight").data[7], 0.5f * s);
  EXPECT_EQ(t.at("blk.0.ffn_down.weight").data, before.at("blk.0.ffn_down.weight").data);
  EXPECT_EQ(t.at("blk.0.attn_output.weight").data, before.at("blk.0.attn_output.weight").data);
}

}  // namespace
}  // namespace tsr::quant
