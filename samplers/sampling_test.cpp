#include "samplers/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tsr {
namespace {

TEST(Sampling, GreedyTakesLargestLowestIndexOnTies) {
  std::vector<float> logits{0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(sample_greedy(logits), 1);
}

TEST(Sampling, TemperatureMatchesSoftmaxFrequencies) {
  // softmax([0, ln 2, ln 3] / 1) = [1/6, 2/6, 3/6]
  std::vector<float> logits{0.0f, std::log(2.0f), std::log(3.0f)};
  std::mt19937_64 rng(42);
  std::vector<int> counts(3, 0);
  const int n = 60000;
  for (int i = 0; i < n; ++i) counts[sample_temperature(logits, 1.0f, rng)]++;
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(double(counts[k]) / n, (k + 1) / 6.0, 0.01) << k;
}

TEST(Sampling, LowTemperatureConcentratesOnArgmax) {
  std::vector<float> logits{1.0f, 1.5f, 0.2f};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(sample_temperature(logits, 0.01f, rng), 1);
}

TEST(Sampling, SameSeedSameDraws) {
  std::vector<float> logits{0.1f, 0.2f, 0.3f, 0.4f};
  std::mt19937_64 a(123), b(123);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_temperature(logits, 0.8f, a), sample_temperature(logits, 0.8f, b));
}

}  // namespace
}  // namespace tsr
