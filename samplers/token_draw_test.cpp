#include "samplers/token_draw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

namespace tsr {
namespace {

double uniform(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1p-53; }

TEST(Verifier, GreedyAcceptsExactlyTheArgmax) {
  const Distribution greedy{{{7, 1.0}}};
  int32_t token = -1;
  EXPECT_TRUE(verify_draft_token(greedy, 7, 0.99, &token));
  EXPECT_EQ(token, 7);
  EXPECT_FALSE(verify_draft_token(greedy, 3, 0.01, &token));
  EXPECT_EQ(token, 7);
}

// Whatever the draft proposes, the emitted token is distributed as p.
TEST(Verifier, OutputIsDistributedAsTargetForAnyDraft) {
  const Distribution p{{{0, 0.3}, {1, 0.2}, {2, 0.5}}};
  for (int32_t draft : {0, 1, 2, 5}) {
    std::mt19937_64 rng(42 + draft);
    std::map<int32_t, int> counts;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
      int32_t token = -1;
      verify_draft_token(p, draft, uniform(rng), &token);
      counts[token]++;
    }
    for (const auto& [id, prob] : p.tokens) {
      EXPECT_NEAR(double(counts[id]) / n, prob, 0.005) << "draft " << draft << " token " << id;
    }
  }
}

// Rejections follow p with the draft's mass removed and renormalized (Leviathan et al.).
TEST(Verifier, RejectionsFollowTheResidualDistribution) {
  const Distribution p{{{0, 0.3}, {1, 0.2}, {2, 0.5}}};
  std::mt19937_64 rng(8);
  std::map<int32_t, int> counts;
  int rejected = 0;
  for (int i = 0; i < 200000; ++i) {
    int32_t token = -1;
    if (verify_draft_token(p, 2, uniform(rng), &token)) continue;
    ++rejected;
    counts[token]++;
  }
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(double(counts[0]) / rejected, 0.6, 0.006);
  EXPECT_NEAR(double(counts[1]) / rejected, 0.4, 0.006);
}

TEST(Verifier, AcceptanceRateIsTargetProbabilityOfDraft) {
  const Distribution p{{{4, 0.7}, {9, 0.3}}};
  std::mt19937_64 rng(3);
  int accepted = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    int32_t token;
    accepted += verify_draft_token(p, 9, uniform(rng), &token);
  }
  EXPECT_NEAR(double(accepted) / n, 0.3, 0.006);
}

// The coupling that makes speculation batch-invariant: at a given uniform, the emitted
// token is the plain draw whatever the draft was.
TEST(Verifier, EmittedTokenIsThePlainDrawForEveryDraft) {
  const Distribution p{{{3, 0.25}, {8, 0.25}, {1, 0.4}, {6, 0.1}}};
  std::mt19937_64 rng(11);
  for (int i = 0; i < 1000; ++i) {
    const double u = uniform(rng);
    for (int32_t draft : {3, 8, 1, 6, 42}) {
      int32_t token = -1;
      const bool accepted = verify_draft_token(p, draft, u, &token);
      ASSERT_EQ(token, sample_from(p, u)) << "u = " << u << ", draft " << draft;
      ASSERT_EQ(accepted, token == draft);
    }
  }
}

TEST(Verifier, SampleFromFollowsDistribution) {
  const Distribution p{{{1, 0.6}, {3, 0.4}}};
  std::mt19937_64 rng(5);
  int ones = 0;
  for (int i = 0; i < 100000; ++i) ones += sample_from(p, uniform(rng)) == 1;
  EXPECT_NEAR(ones / 100000.0, 0.6, 0.006);
}

TEST(PositionUniform, IsAFunctionOfSeedAndPosition) {
  EXPECT_EQ(position_uniform(7, 3), position_uniform(7, 3));
  EXPECT_NE(position_uniform(7, 3), position_uniform(7, 4));
  EXPECT_NE(position_uniform(7, 3), position_uniform(8, 3));
}

// Neighbouring seeds (the n choices of a request) and positions give uniform, uncorrelated
// values: mean 1/2, variance 1/12, lag-1 and cross-seed correlations near 0.
TEST(PositionUniform, NeighbouringSeedsAndPositionsAreUncorrelated) {
  const int n = 200000;
  double sum = 0, sum_sq = 0, lag = 0, cross = 0;
  double previous = position_uniform(100, 0);
  for (int t = 0; t < n; ++t) {
    const double u = position_uniform(100, uint64_t(t));
    const double v = position_uniform(101, uint64_t(t));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
    if (t > 0) lag += (u - 0.5) * (previous - 0.5);
    cross += (u - 0.5) * (v - 0.5);
    previous = u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.003);
  EXPECT_NEAR(sum_sq / n - (sum / n) * (sum / n), 1.0 / 12, 0.002);
  // Correlation = covariance / (1/12); its standard error is 1/sqrt(n) ≈ 0.0022.
  EXPECT_NEAR(lag / (n - 1) * 12, 0.0, 0.012);
  EXPECT_NEAR(cross / n * 12, 0.0, 0.012);
}

}  // namespace
}  // namespace tsr
