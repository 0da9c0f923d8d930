#include "core/request/embedding_pool.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"

namespace tsr {
namespace {

using Rows = std::pair<int32_t, int32_t>;

TEST(EmbeddingPool, EachPoolingReadsItsRowsOfEveryChunk) {
  const EmbeddingPool mean(Pooling::MEAN, 10), cls(Pooling::CLS, 10), last(Pooling::LAST, 10);
  EXPECT_EQ(mean.rows(0, 4), Rows(0, 4));
  EXPECT_EQ(mean.rows(4, 16), Rows(4, 10));  // a chunk never reads past the prompt
  EXPECT_EQ(cls.rows(0, 4), Rows(0, 1));
  EXPECT_EQ(cls.rows(4, 6), Rows(0, 0));
  EXPECT_EQ(last.rows(0, 4), Rows(0, 0));
  EXPECT_EQ(last.rows(4, 6), Rows(9, 10));
}

TEST(EmbeddingPool, MeanIsNormalizedOverAllChunks) {
  EmbeddingPool pool(Pooling::MEAN, 3);
  pool.add(std::vector<float>{1, 0, 2, 0}, 2);
  EXPECT_FALSE(pool.complete());
  pool.add(std::vector<float>{0, 4}, 1);
  ASSERT_TRUE(pool.complete());
  const std::vector<float> v = pool.normalized();  // mean (1, 4/3) has direction (3, 4) / 5
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
}

TEST(EmbeddingPool, AResetStartsOverAndZeroStaysZero) {
  EmbeddingPool pool(Pooling::LAST, 5);
  pool.add(std::vector<float>{3, 4}, 1);
  pool.reset();
  EXPECT_FALSE(pool.complete());
  EXPECT_THROW(pool.normalized(), Error);
  pool.add(std::vector<float>{0, 0}, 1);
  EXPECT_EQ(pool.normalized(), (std::vector<float>{0, 0}));
}

TEST(EmbeddingPool, MismatchedStatesAndRankPoolingAreRefused) {
  EmbeddingPool pool(Pooling::CLS, 5);
  EXPECT_THROW(pool.add(std::vector<float>{1, 2, 3}, 2), Error);     // not whole rows
  EXPECT_THROW(pool.add(std::vector<float>{1, 2, 3, 4}, 2), Error);  // more rows than it reads
  EXPECT_THROW(EmbeddingPool(Pooling::RANK, 5), Error);
  EmbeddingPool mean(Pooling::MEAN, 5);
  mean.add(std::vector<float>{1, 2}, 1);
  EXPECT_THROW(mean.add(std::vector<float>{1, 2, 3}, 1), Error);     // another width
}

}  // namespace
}  // namespace tsr
