#include "core/sched/prompt_groups.h"

#include <gtest/gtest.h>

namespace tsr {
namespace {

TEST(PromptGroups, TheFirstLeadsAndTheRestFollowUntilItsPromptIsComputed) {
  PromptGroups g;
  EXPECT_FALSE(g.join(7, 1));
  EXPECT_TRUE(g.join(7, 2));
  EXPECT_TRUE(g.join(7, 3));
  EXPECT_FALSE(g.join(8, 4)) << "another prompt leads a group of its own";
  EXPECT_EQ(g.take_followers(1), (std::vector<RequestId>{2, 3}));
  EXPECT_TRUE(g.take_followers(1).empty()) << "once";
  EXPECT_FALSE(g.join(7, 5)) << "a closed group's key opens a new one";
}

TEST(PromptGroups, FollowersOfALeaderThatLeftRunOnTheirOwn) {
  PromptGroups g;
  g.join(1, 10);
  g.join(1, 11);
  g.join(2, 20);
  g.join(2, 21);
  EXPECT_EQ(g.take_orphans([](RequestId leader) { return leader == 20; }), std::vector<RequestId>{21});
  EXPECT_EQ(g.take_followers(10), std::vector<RequestId>{11});
  EXPECT_TRUE(g.empty());
}

}  // namespace
}  // namespace tsr
