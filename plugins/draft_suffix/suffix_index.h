// SuffixIndex: the token streams suffix decoding drafts from (Oliaro et al., "SuffixDecoding",
// Arctic Inference), and the query a suffix tree over them answers: the longest suffix of a
// context that occurs in the streams, and from the node of that suffix the most frequent
// continuation, token by token, with its empirical probability.
//
// The tree is walked lazily instead of stored: the index keeps each token's positions, the
// occurrences of the longest match are found by comparing backwards from the positions of
// the context's last token, and each step of the walk counts the tokens that follow the
// occurrences still on the path. This answers exactly what the depth-bounded suffix tree of
// the paper answers, in O(n) memory instead of O(n · depth) nodes: a suffix tree of depth 64
// over a 4,096-token request is ~260k nodes, which at 128 running requests is gigabytes.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace tsr::draft_suffix {

struct SuffixLimits {
  int32_t max_tokens = 4;       // k: the most tokens proposed
  int32_t max_match = 32;       // the longest context suffix matched
  int32_t max_candidates = 4096;  // occurrences of the last token examined, latest first
  double min_probability = 0.1;   // stop when the path's estimated probability falls below
  double length_factor = 1.0;     // propose at most ceil(factor · match length) tokens
};

struct SuffixDraft {
  std::vector<int32_t> tokens;
  std::vector<float> probs;  // the estimated probability of the path up to each token
  double score = 0;          // sum of probs: the expected number of accepted tokens
  int32_t match = 0;         // length of the context suffix matched
};

class SuffixIndex {
 public:
  static constexpr int32_t kSeparator = -1;  // ends a document: no match or walk crosses it

  void append(int32_t token);  // a token id (>= 0) or kSeparator
  void clear();
  size_t size() const { return tokens_.size(); }
  std::span<const int32_t> tokens() const { return tokens_; }
  // Drops the oldest documents until at most `keep` tokens remain (whole documents only).
  void keep_newest(size_t keep);

  // The draft for `context` (which may itself be the indexed stream: its last position has
  // no successor yet, so it never matches itself). Empty when no suffix occurs.
  SuffixDraft propose(std::span<const int32_t> context, const SuffixLimits& limits) const;

 private:
  // Length of the common suffix of tokens_[..=end] and context, at most max_match.
  int32_t match_length(size_t end, std::span<const int32_t> context, int32_t max_match) const;
  std::vector<size_t> longest_matches(std::span<const int32_t> context, const SuffixLimits& limits,
                                      int32_t* length) const;

  std::vector<int32_t> tokens_;
  std::unordered_map<int32_t, std::vector<uint32_t>> positions_;  // token -> its positions
};

}  // namespace tsr::draft_suffix
