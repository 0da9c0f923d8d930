#include "samplers/token_draw.h"

#include <gtest/gtest.h>

#include <map>

namespace tsr {
namespace {

TEST(Verifier, GreedyAcceptsExactlyTheArgmax) {
  const Distribution greedy{{{7, 1.0}}};
  std::mt19937_64 rng(1);
  int32_t token = -1;
  EXPECT_TRUE(verify_draft_token(greedy, 7, rng, &token));
  EXPECT_EQ(token, 7);
  EXPECT_FALSE(verify_draft_token(greedy, 3, rng, &token));
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
      verify_draft_token(p, draft, rng, &token);
      counts[token]++;
    }
    for (const auto& [id, prob] : p.tokens) {
      EXPECT_NEAR(double(counts[id]) / n, prob, 0.005) << "draft " << draft << " token " << id;
    }
  }
}

TEST(Verifier, AcceptanceRateIsTargetProbabilityOfDraft) {
  const Distribution p{{{4, 0.7}, {9, 0.3}}};
  std::mt19937_64 rng(3);
  int accepted = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    int32_t token;
    accepted += verify_draft_token(p, 9, rng, &token);
  }
  EXPECT_NEAR(double(accepted) / n, 0.3, 0.006);
}

TEST(Verifier, SampleFromFollowsDistribution) {
  const Distribution p{{{1, 0.6}, {3, 0.4}}};
  std::mt19937_64 rng(5);
  int ones = 0;
  for (int i = 0; i < 100000; ++i) ones += sample_from(p, rng) == 1;
  EXPECT_NEAR(ones / 100000.0, 0.6, 0.006);
}

}  // namespace
}  // namespace tsr
