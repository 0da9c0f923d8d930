// Verification of drafts by Request::append_verified: chains and trees (a draft tree's walk
// from the last token's row through the drafts that proposed each drawn token).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/request/draft_tree.h"
#include "core/request/request.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/common/letter_tokenizer.h"

namespace tsr {
namespace {

constexpr int32_t kVocab = 16, kCtx = 64;

class DraftTree : public ::testing::Test {
 protected:
  // A greedy request whose prompt (3 tokens) is computed but for its last token.
  Request& request() {
    RequestParams p;
    p.prompt = {1, 2, 3};
    p.max_tokens = 32;
    p.sampling.temperature = 0;
    p.ignore_eos = true;
    request_ = std::make_unique<Request>(1, std::move(p), *tokenizer_, Clock::now());
    request_->set_num_computed(2);
    return *request_;
  }
  // One logits row per listed argmax.
  static std::vector<float> rows(const std::vector<int32_t>& argmax) {
    std::vector<float> logits(argmax.size() * kVocab, 0.0f);
    for (size_t i = 0; i < argmax.size(); ++i) logits[i * kVocab + size_t(argmax[i])] = 5.0f;
    return logits;
  }
  std::vector<int32_t> output(const Request& r) const { return {r.tokens().begin() + 3, r.tokens().end()}; }

  std::unique_ptr<Tokenizer> tokenizer_ = testing::letter_tokenizer(kVocab);
  std::unique_ptr<Request> request_;
};

TEST(DraftTreeShape, DepthsCountTheTokensOfEachPath) {
  EXPECT_EQ(draft_tree_depths(std::vector<int32_t>{-1, 0, 1, 2, 0, 1, 4, 2}), (std::vector<int32_t>{1, 2, 3, 4, 2, 3, 3, 4}));
  EXPECT_EQ(draft_tree_depths(std::vector<int32_t>{-1, -1, 1}), (std::vector<int32_t>{1, 1, 2}));
  EXPECT_TRUE(draft_tree_depths({}).empty());
}

TEST_F(DraftTree, ChainAcceptsItsPrefixAndDrawsTheCorrection) {
  Request& r = request();
  r.set_drafts({5, 6, 7});
  r.on_computed(4);  // the last token and three drafts
  EXPECT_EQ(r.append_verified(rows({5, 6, 9, 10}), kVocab, kCtx, Clock::now()), 2);
  EXPECT_EQ(output(r), (std::vector<int32_t>{5, 6, 9}));
  EXPECT_EQ(r.num_computed(), 5);  // the last token and both accepted drafts
  EXPECT_TRUE(r.caught_up());
  EXPECT_TRUE(r.drafts().empty());
}

// Drafts 0 -> 1 -> 2 are the first chain; 3 follows the last token beside 0, 4 follows 0
// beside 1, 5 follows 4. The target draws 5, then 9 (draft 4, off the chain), then 12
// (draft 5), then 13 from draft 5's row, which no draft proposed: the bonus.
TEST_F(DraftTree, WalkFollowsTheDraftsThatProposedEachDraw) {
  Request& r = request();
  r.set_drafts({5, 6, 7, 8, 9, 12}, {-1, 0, 1, -1, 0, 4});
  EXPECT_EQ(r.draft_depth(), 3);
  r.on_computed(7);
  //                          last  d0  d1  d2  d3  d4  d5
  EXPECT_EQ(r.append_verified(rows({5, 9, 1, 1, 1, 12, 13}), kVocab, kCtx, Clock::now()), 3);
  EXPECT_EQ(output(r), (std::vector<int32_t>{5, 9, 12, 13}));
  EXPECT_EQ(std::vector<int32_t>(r.accepted_path().begin(), r.accepted_path().end()), (std::vector<int32_t>{0, 4, 5}));
  // Draft 0's KV lies at its position; 9 and 12 were computed at other slots, so the next
  // step computes them again, and the request may draft meanwhile.
  EXPECT_EQ(r.num_computed(), 4);
  EXPECT_TRUE(r.caught_up());
  r.on_computed(2);
  EXPECT_TRUE(r.caught_up());
}

TEST_F(DraftTree, NoDraftProposedTheFirstDraw) {
  Request& r = request();
  r.set_drafts({5, 6, 8}, {-1, 0, -1});
  r.on_computed(4);
  EXPECT_EQ(r.append_verified(rows({7, 1, 1, 1}), kVocab, kCtx, Clock::now()), 0);
  EXPECT_EQ(output(r), (std::vector<int32_t>{7}));
  EXPECT_EQ(r.num_computed(), 3);
  EXPECT_TRUE(r.accepted_path().empty());
}

TEST_F(DraftTree, ASiblingLeafBringsItsBonusToken) {
  Request& r = request();
  r.set_drafts({5, 6, 8}, {-1, 0, -1});
  r.on_computed(4);
  EXPECT_EQ(r.append_verified(rows({8, 1, 1, 11}), kVocab, kCtx, Clock::now()), 1);
  EXPECT_EQ(output(r), (std::vector<int32_t>{8, 11}));
  EXPECT_EQ(r.num_computed(), 3);  // draft 2 was computed at the slot after draft 1's
  EXPECT_FALSE(r.num_computed() == r.num_tokens() - 1);
  EXPECT_TRUE(r.caught_up());
}

TEST_F(DraftTree, TruncationKeepsATreesPrefix) {
  Request& r = request();
  r.set_drafts({5, 6, 8, 9}, {-1, 0, -1, 1});
  r.truncate_drafts(3);
  EXPECT_EQ(r.drafts().size(), 3u);
  EXPECT_EQ(r.draft_parents().size(), 3u);
  EXPECT_EQ(r.draft_depth(), 2);
}

TEST_F(DraftTree, PreemptionForgetsTheRecomputation) {
  Request& r = request();
  r.set_drafts({5, 8}, {-1, -1});
  r.on_computed(3);
  r.append_verified(rows({8, 1, 2}), kVocab, kCtx, Clock::now());
  EXPECT_TRUE(r.caught_up());
  r.on_preempted();
  EXPECT_FALSE(r.caught_up());
}

}  // namespace
}  // namespace tsr
