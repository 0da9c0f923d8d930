#include "core/kv/streaming_window.h"

#include <gtest/gtest.h>

namespace tsr {
namespace {

TEST(StreamingWindow, SinksStayAndTheWindowIsARing) {
  const StreamingWindow w{4, 6};  // cache indices 0..3 sinks, 4..9 the ring
  for (int32_t pos = 0; pos < 10; ++pos) {
    EXPECT_EQ(w.cache_index(pos), pos);
    EXPECT_FALSE(w.evicts(pos));
  }
  EXPECT_EQ(w.cache_index(10), 4) << "position 10 overwrites the oldest window token, position 4";
  EXPECT_EQ(w.cache_index(15), 9);
  EXPECT_EQ(w.cache_index(16), 4);
  EXPECT_TRUE(w.evicts(10));
  EXPECT_EQ(w.cached(7), 7);
  EXPECT_EQ(w.cached(1000), 10);
}

TEST(StreamingWindow, SinksSitJustBeforeTheOldestWindowToken) {
  const StreamingWindow w{4, 6};
  // At position 12 the window holds 7..12; the sinks take 3..6.
  EXPECT_EQ(w.sink_position(12), 3);
  EXPECT_EQ(w.extra_rows(12), 4);
  EXPECT_EQ(w.extra_rows(9), 0);
}

TEST(StreamingWindow, StepsFillTheCacheThenComputeOnePosition) {
  const StreamingWindow w{4, 6};
  EXPECT_EQ(w.step_limit(0, 64), 10);
  EXPECT_EQ(w.step_limit(8, 1), 1);
  EXPECT_EQ(w.step_limit(10, 64), 1);
  const StreamingWindow off;
  EXPECT_EQ(off.step_limit(100000, 64), 64);
  EXPECT_EQ(off.cache_index(100000), 100000);
}

}  // namespace
}  // namespace tsr
