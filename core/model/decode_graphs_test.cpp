#include "core/model/decode_graphs.h"

#include <gtest/gtest.h>

namespace tsr {
namespace {

// A decode step of `n` sequences, sequence s at position 10 + s with `blocks` blocks each.
StepBatch decode_step(int32_t n, int32_t blocks) {
  StepBatch b;
  b.max_blocks = blocks;
  b.query_start_loc.push_back(0);
  for (int32_t s = 0; s < n; ++s) {
    b.tokens.push_back(100 + s);
    b.positions.push_back(10 + s);
    b.cache_positions.push_back(10 + s);
    b.slot_mapping.push_back(1000 + s);
    b.query_start_loc.push_back(s + 1);
    b.seq_lens.push_back(11 + s);
    b.logit_rows.push_back(s);
    for (int32_t k = 0; k < blocks; ++k) b.block_tables.push_back(7 * s + k + 1);
  }
  return b;
}

TEST(DecodeGraphs, BucketsAreSingleBelowSixteenThenMultiplesOfEight) {
  const DecodeGraphs g(40, 8);
  for (int32_t n = 1; n <= 15; ++n) EXPECT_EQ(g.bucket(decode_step(n, 2)), n);
  EXPECT_EQ(g.bucket(decode_step(16, 2)), 16);
  EXPECT_EQ(g.bucket(decode_step(17, 2)), 24);
  EXPECT_EQ(g.bucket(decode_step(33, 2)), 40);
  EXPECT_EQ(g.bucket(decode_step(40, 2)), 40);
  EXPECT_EQ(DecodeGraphs(36, 8).bucket(decode_step(33, 2)), 36) << "the last bucket is max_batch";
}

TEST(DecodeGraphs, OnlyDecodeStepsWithinTheLimitsQualify) {
  const DecodeGraphs g(8, 4);
  EXPECT_EQ(g.bucket(decode_step(9, 2)), 0) << "more sequences than max_batch";
  EXPECT_EQ(g.bucket(decode_step(3, 5)), 0) << "a block table wider than max_blocks";
  StepBatch prefill = decode_step(2, 2);
  prefill.tokens.push_back(5);
  prefill.positions.push_back(12);
  prefill.cache_positions.push_back(12);
  prefill.slot_mapping.push_back(1002);
  prefill.query_start_loc.back() = 3;  // the second sequence brings two tokens
  prefill.logit_rows = {0, 2};
  EXPECT_EQ(g.bucket(prefill), 0);
  StepBatch chunk = decode_step(2, 2);
  chunk.logit_rows = {1};  // a step that samples from one row only
  EXPECT_EQ(g.bucket(chunk), 0);
}

TEST(DecodeGraphs, PaddingWritesNoSlotAndReadsBlockZero) {
  const DecodeGraphs g(16, 4);
  const StepBatch b = decode_step(3, 2);
  const StepBatch p = g.pad(b, 5);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{100, 101, 102, 0, 0}));
  EXPECT_EQ(p.positions, (std::vector<int32_t>{10, 11, 12, 0, 0}));
  EXPECT_EQ(p.cache_positions, (std::vector<int32_t>{10, 11, 12, 0, 0}));
  EXPECT_EQ(p.slot_mapping, (std::vector<int32_t>{1000, 1001, 1002, -1, -1}));
  EXPECT_EQ(p.seq_lens, (std::vector<int32_t>{11, 12, 13, 1, 1}));
  EXPECT_EQ(p.query_start_loc, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(p.logit_rows, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(p.max_blocks, 4);
  EXPECT_EQ(p.block_tables, (std::vector<int32_t>{1, 2, 0, 0, 8, 9, 0, 0, 15, 16, 0, 0,  //
                                                  0, 0, 0, 0, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace tsr
