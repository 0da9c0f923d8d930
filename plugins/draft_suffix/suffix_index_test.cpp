#include "suffix_index.h"

#include <gtest/gtest.h>

#include <vector>

namespace tsr::draft_suffix {
namespace {

SuffixIndex index_of(const std::vector<int32_t>& tokens) {
  SuffixIndex index;
  for (const int32_t t : tokens) index.append(t);
  return index;
}

SuffixLimits limits(int32_t k) {
  SuffixLimits l;
  l.max_tokens = k;
  return l;
}

TEST(SuffixIndex, ContinuesTheLongestMatch) {
  // "1 2 3 4 5" once, then the context ends in "2 3": the continuation is "4 5".
  const SuffixIndex index = index_of({1, 2, 3, 4, 5, 9, 9});
  const SuffixDraft d = index.propose(std::vector<int32_t>{7, 2, 3}, limits(4));
  EXPECT_EQ(d.match, 2);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{4, 5}));  // length capped at the match length
  EXPECT_EQ(d.probs, (std::vector<float>{1.0f, 1.0f}));
  EXPECT_DOUBLE_EQ(d.score, 2.0);
}

TEST(SuffixIndex, TheStreamNeverMatchesItsOwnEnd) {
  const std::vector<int32_t> history{5, 6, 7, 8};
  EXPECT_TRUE(index_of(history).propose(history, limits(4)).tokens.empty());
  // A repetition inside the history does match: "5 6" continues with "7 8 5 6".
  const std::vector<int32_t> repeated{5, 6, 7, 8, 5, 6};
  const SuffixDraft d = index_of(repeated).propose(repeated, limits(4));
  EXPECT_EQ(d.match, 2);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{7, 8}));
}

// The most frequent child wins, with its empirical probability; a longer match narrows the
// occurrences to those that share it.
TEST(SuffixIndex, FollowsTheMostFrequentContinuation) {
  // "3" is followed by 4 twice and by 6 once.
  const SuffixIndex index = index_of({3, 4, 0, 3, 6, 0, 3, 4, 0});
  const SuffixDraft d = index.propose(std::vector<int32_t>{3}, limits(1));
  EXPECT_EQ(d.match, 1);
  ASSERT_EQ(d.tokens, std::vector<int32_t>{4});
  EXPECT_FLOAT_EQ(d.probs[0], 2.0f / 3.0f);
  // Context "0 3" occurs twice (the first "3" has no 0 before it), followed by 6 and by 4:
  // a tie, which the latest occurrence breaks; "0 3 4" is then always followed by 0.
  const SuffixDraft longer = index.propose(std::vector<int32_t>{0, 3}, limits(2));
  EXPECT_EQ(longer.match, 2);
  EXPECT_EQ(longer.tokens, (std::vector<int32_t>{4, 0}));
  EXPECT_EQ(longer.probs, (std::vector<float>{0.5f, 0.5f}));
}

TEST(SuffixIndex, StopsWhereThePathBecomesUnlikely) {
  // After "1 2", ten different tokens follow once each: probability 0.1 each ... then below.
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 11; ++i) tokens.insert(tokens.end(), {1, 2, 100 + i, 0});
  const SuffixDraft d = index_of(tokens).propose(std::vector<int32_t>{1, 2}, limits(4));
  EXPECT_TRUE(d.tokens.empty()) << "1/11 is below the 0.1 floor";
  SuffixLimits loose = limits(4);
  loose.min_probability = 0.05;
  EXPECT_EQ(index_of(tokens).propose(std::vector<int32_t>{1, 2}, loose).tokens.size(), 2u);
}

TEST(SuffixIndex, SeparatorsEndMatchesAndWalks) {
  const int32_t sep = SuffixIndex::kSeparator;
  const SuffixIndex index = index_of({4, 5, sep, 6, 7, 8, sep});
  // "5 6" does not occur: the separator stands between them. "6" alone matches.
  const SuffixDraft d = index.propose(std::vector<int32_t>{5, 6}, limits(4));
  EXPECT_EQ(d.match, 1);
  EXPECT_EQ(d.tokens, std::vector<int32_t>{7});
  // "4 5" is followed by the separator: nothing to propose.
  EXPECT_TRUE(index.propose(std::vector<int32_t>{4, 5}, limits(4)).tokens.empty());
}

TEST(SuffixIndex, KeepNewestDropsWholeOldDocuments) {
  const int32_t sep = SuffixIndex::kSeparator;
  SuffixIndex index = index_of({1, 2, 3, sep, 4, 5, sep, 6, 7, sep});
  index.keep_newest(5);
  EXPECT_EQ(std::vector<int32_t>(index.tokens().begin(), index.tokens().end()), (std::vector<int32_t>{6, 7, sep}));
  EXPECT_TRUE(index.propose(std::vector<int32_t>{1, 2}, limits(2)).tokens.empty());
  EXPECT_EQ(index.propose(std::vector<int32_t>{6}, limits(2)).tokens, std::vector<int32_t>{7});
}

TEST(SuffixIndex, MatchesAreBoundedInLengthAndCandidates) {
  std::vector<int32_t> tokens(200, 3);  // a run of one token: every position matches
  tokens.push_back(8);
  SuffixLimits l = limits(8);
  l.max_match = 16;
  l.max_candidates = 10;
  const SuffixDraft d = index_of(tokens).propose(std::vector<int32_t>(50, 3), l);
  EXPECT_EQ(d.match, 16);
  EXPECT_EQ(d.tokens.size(), 8u);
}

}  // namespace
}  // namespace tsr::draft_suffix
