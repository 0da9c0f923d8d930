#include "server/beam_search.h"

#include <gtest/gtest.h>

namespace tsr::server {
namespace {

constexpr int32_t kEos = 0;

BeamSearch make(int32_t width, double length_penalty = 1.0) {
  return BeamSearch(width, length_penalty, [](int32_t t) { return t == kEos; });
}

TEST(BeamSearch, WidthOneFollowsTheBestTokenAndStopsAtEos) {
  BeamSearch s = make(1);
  s.step({{{5, -0.1}, {6, -0.2}}});
  ASSERT_EQ(s.beams().size(), 1u);
  EXPECT_EQ(s.beams()[0].tokens, std::vector<int32_t>{5});
  s.step({{{kEos, -0.3}, {7, -0.4}}});
  EXPECT_TRUE(s.done()) << "the best candidate ended: greedy stops";
  const std::vector<Hypothesis> best = s.best(1);
  EXPECT_EQ(best[0].tokens, (std::vector<int32_t>{5, kEos}));
  EXPECT_TRUE(best[0].ended);
  EXPECT_DOUBLE_EQ(best[0].logprob, -0.4);
}

// Candidates of all beams compete on their cumulative logprob; an end ranked below the
// width does not finish a hypothesis.
TEST(BeamSearch, CandidatesCompeteAcrossBeams) {
  BeamSearch s = make(2);
  s.step({{{1, -0.5}, {2, -1.0}, {3, -2.0}, {4, -3.0}}});
  ASSERT_EQ(s.beams().size(), 2u);
  s.step({{{11, -3.0}, {kEos, -4.0}}, {{21, -0.1}, {22, -0.2}}});
  ASSERT_EQ(s.beams().size(), 2u);
  EXPECT_EQ(s.beams()[0].tokens, (std::vector<int32_t>{2, 21}));  // -1.1
  EXPECT_EQ(s.beams()[1].tokens, (std::vector<int32_t>{2, 22}));  // -1.2
  EXPECT_FALSE(s.done());
  s.step({{{kEos, -0.1}, {31, -5.0}}, {{kEos, -0.1}, {41, -5.0}}});
  EXPECT_TRUE(s.done()) << "two hypotheses finished";
  const std::vector<Hypothesis> best = s.best(2);
  EXPECT_EQ(best[0].tokens, (std::vector<int32_t>{2, 21, kEos}));
  EXPECT_EQ(best[1].tokens, (std::vector<int32_t>{2, 22, kEos}));
}

// The length penalty divides by tokens^penalty: with 1, the longer hypothesis of equal
// per-token logprob ties; with 0, the shorter (higher total) wins.
TEST(BeamSearch, LengthPenaltyScoresHypotheses) {
  for (const double penalty : {0.0, 2.0}) {
    BeamSearch s = make(2, penalty);
    s.step({{{kEos, -1.0}, {1, -1.0}}});
    s.step({{{kEos, -1.5}, {2, -9.0}}});
    ASSERT_TRUE(s.done());
    const std::vector<Hypothesis> best = s.best(2);
    // -1 / 1^p against -2.5 / 2^p: p = 0 keeps the short one first, p = 2 the long one.
    EXPECT_EQ(best[0].tokens.size(), penalty == 0.0 ? 1u : 2u) << penalty;
  }
}

}  // namespace
}  // namespace tsr::server
