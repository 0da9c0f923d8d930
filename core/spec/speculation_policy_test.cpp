#include "core/spec/speculation_policy.h"

#include <gtest/gtest.h>

namespace tsr {
namespace {

SpeculationPolicy policy(bool adaptive = true, int32_t budget = 2048) {
  SpeculativeConfig spec;
  spec.num_draft_tokens = 4;
  spec.adaptive = adaptive;
  SchedulerConfig sched;
  sched.max_batch_tokens = budget;
  return SpeculationPolicy(spec, sched);
}

TEST(SpeculationPolicy, FollowsTheAcceptanceRate) {
  const SpeculationPolicy p = policy();
  SpeculationPolicy::State s;
  EXPECT_EQ(p.num_drafts(s, 1), 4);
  s.acceptance = 0.45;
  EXPECT_EQ(p.num_drafts(s, 1), 2);
  s.acceptance = 0.2;
  EXPECT_EQ(p.num_drafts(s, 1), 1);
}

TEST(SpeculationPolicy, HopelessRequestsOnlyProbe) {
  const SpeculationPolicy p = policy();
  SpeculationPolicy::State s;
  s.acceptance = 0.05;
  int drafted_steps = 0;
  for (int step = 0; step < 32; ++step) drafted_steps += p.num_drafts(s, 1) > 0;
  EXPECT_EQ(drafted_steps, 4);  // one probe every 8 steps
}

TEST(SpeculationPolicy, ObservationsMoveTheAverage) {
  const SpeculationPolicy p = policy();
  SpeculationPolicy::State s;
  for (int i = 0; i < 20; ++i) p.observe(s, 4, 0);
  EXPECT_LT(s.acceptance, 0.1);
  for (int i = 0; i < 20; ++i) p.observe(s, 4, 4);
  EXPECT_GT(s.acceptance, 0.9);
}

TEST(SpeculationPolicy, LargeBatchesDraftLessAndFitTheBudget) {
  SpeculationPolicy::State s;
  EXPECT_EQ(policy().num_drafts(s, 16), 2);           // halved at 16 running
  EXPECT_EQ(policy(true, 64).num_drafts(s, 16), 2);   // 64 / 16 - 1 = 3, halved k is 2
  EXPECT_EQ(policy(true, 32).num_drafts(s, 16), 1);   // 32 / 16 - 1 = 1
  EXPECT_EQ(policy(false, 16).num_drafts(s, 16), 0);  // no room for any draft
  EXPECT_EQ(policy(false).num_drafts(s, 16), 4);      // not adaptive: k unless the budget binds
}

}  // namespace
}  // namespace tsr
