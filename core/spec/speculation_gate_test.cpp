#include "core/spec/speculation_gate.h"

#include <gtest/gtest.h>

namespace tsr {
namespace {

// Runs `steps` decisions at `running`, each observed at the given rates; returns how many
// steps drafted.
int run(SpeculationGate& g, int32_t running, int steps, double on_rate, double off_rate) {
  int drafted = 0;
  for (int i = 0; i < steps; ++i) {
    const bool on = g.drafts(running);
    drafted += on;
    g.observe(running, on, 100, 100 / (on ? on_rate : off_rate));
  }
  return drafted;
}

// Both modes are sampled first, alternating, starting with drafting.
TEST(SpeculationGate, SamplesBothModesFirst) {
  SpeculationGate g(true);
  for (int i = 0; i < 2 * SpeculationGate::kWarmup; ++i) {
    const bool on = g.drafts(1);
    EXPECT_EQ(on, i % 2 == 0) << i;
    g.observe(1, on, 10, 0.1);
  }
}

// Drafting that pays keeps drafting, but for one plain step in kExploreOff; drafting that
// loses stops, but for one step in kExploreOn, which bounds what it costs.
TEST(SpeculationGate, DraftsWhereItPaysAndProbesWhereItDoesNot) {
  SpeculationGate g(true);
  const int steps = 6400;
  const int fast = run(g, 2, steps, 300, 100);
  EXPECT_GE(fast, steps - steps / SpeculationGate::kExploreOff - SpeculationGate::kWarmup);
  const int slow = run(g, 16, steps, 50, 100);
  EXPECT_LE(slow, steps / SpeculationGate::kExploreOn + SpeculationGate::kWarmup + 1);
  EXPECT_GT(slow, 0) << "it never probes";
  EXPECT_NEAR(g.rate(2, true), 300, 1e-9);
  EXPECT_NEAR(g.rate(16, false), 100, 1e-9);
}

// Batch sizes of one power of two share a class; others are measured apart.
TEST(SpeculationGate, EachBatchSizeClassIsMeasuredApart) {
  SpeculationGate g(true);
  run(g, 16, 200, 50, 100);
  EXPECT_GT(g.rate(31, false), 0);
  EXPECT_EQ(g.rate(15, false), 0);
  EXPECT_EQ(g.rate(32, false), 0);
  EXPECT_TRUE(g.drafts(8)) << "an unmeasured class starts by drafting";
}

// When drafting turns profitable again (the text became predictable), the probes notice.
TEST(SpeculationGate, FollowsAChangeOfBalance) {
  SpeculationGate g(true);
  run(g, 4, 500, 50, 100);
  EXPECT_FALSE(g.rate(4, true) >= g.rate(4, false));
  const int drafted = run(g, 4, 2000, 400, 100);
  EXPECT_GT(drafted, 1800);
}

// A model draft is not probed once it loses (a probe would recompute the pause).
TEST(SpeculationGate, AModelDraftThatLosesIsNotProbed) {
  SpeculationGate g(false);
  EXPECT_EQ(run(g, 16, 1000, 50, 100), SpeculationGate::kWarmup);
  EXPECT_GT(run(g, 2, 1000, 300, 100), 900);
}

}  // namespace
}  // namespace tsr
