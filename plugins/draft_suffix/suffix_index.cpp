#include "suffix_index.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tsr::draft_suffix {

void SuffixIndex::append(int32_t token) {
  if (tokens_.size() >= UINT32_MAX) throw std::length_error("suffix index: more than 2^32 tokens");
  if (token != kSeparator) positions_[token].push_back(static_cast<uint32_t>(tokens_.size()));
  tokens_.push_back(token);
}

void SuffixIndex::clear() {
  tokens_.clear();
  positions_.clear();
}

void SuffixIndex::keep_newest(size_t keep) {
  if (tokens_.size() <= keep) return;
  // Cut after the first separator at or past the point that leaves `keep` tokens.
  auto cut = std::find(tokens_.begin() + static_cast<std::ptrdiff_t>(tokens_.size() - keep), tokens_.end(), kSeparator);
  const std::vector<int32_t> rest(cut == tokens_.end() ? cut : cut + 1, tokens_.end());
  clear();
  for (const int32_t t : rest) append(t);
}

int32_t SuffixIndex::match_length(size_t end, std::span<const int32_t> context, int32_t max_match) const {
  int32_t n = 0;
  while (n < max_match && size_t(n) <= end && size_t(n) < context.size()) {
    const int32_t t = tokens_[end - size_t(n)];
    if (t == kSeparator || t != context[context.size() - 1 - size_t(n)]) break;
    ++n;
  }
  return n;
}

std::vector<size_t> SuffixIndex::longest_matches(std::span<const int32_t> context, const SuffixLimits& limits,
                                                 int32_t* length) const {
  *length = 0;
  std::vector<size_t> ends;
  if (context.empty()) return ends;
  const auto it = positions_.find(context.back());
  if (it == positions_.end()) return ends;
  const std::vector<uint32_t>& at = it->second;
  const size_t first = at.size() > size_t(limits.max_candidates) ? at.size() - size_t(limits.max_candidates) : 0;
  for (size_t i = at.size(); i-- > first;) {
    const size_t end = at[i];
    if (end + 1 >= tokens_.size() || tokens_[end + 1] == kSeparator) continue;  // nothing follows
    const int32_t n = match_length(end, context, limits.max_match);
    if (n > *length) {
      *length = n;
      ends.clear();
    }
    if (n == *length) ends.push_back(end);
  }
  return ends;
}

SuffixDraft SuffixIndex::propose(std::span<const int32_t> context, const SuffixLimits& limits) const {
  SuffixDraft d;
  std::vector<size_t> path = longest_matches(context, limits, &d.match);
  if (path.empty()) return d;
  const auto cap = static_cast<int32_t>(std::ceil(limits.length_factor * d.match));
  const int32_t max_tokens = std::min(limits.max_tokens, std::max(cap, 1));
  double probability = 1.0;
  std::unordered_map<int32_t, int32_t> counts;
  for (size_t step = 1; d.tokens.size() < size_t(max_tokens); ++step) {
    // The children of the path's node: what follows each occurrence still on it. Ties go to
    // the latest occurrence (path is latest first), as prompt lookup would choose.
    counts.clear();
    int32_t total = 0, best = kSeparator, best_count = 0;
    for (const size_t end : path) {
      const size_t at = end + step;
      if (at >= tokens_.size() || tokens_[at] == kSeparator) continue;
      const int32_t c = ++counts[tokens_[at]];
      ++total;
      if (c > best_count) best = tokens_[at], best_count = c;
    }
    if (total == 0) break;
    probability *= double(best_count) / total;
    if (probability < limits.min_probability) break;
    d.tokens.push_back(best);
    d.probs.push_back(static_cast<float>(probability));
    d.score += probability;
    std::erase_if(path, [&](size_t end) {
      const size_t at = end + step;
      return at >= tokens_.size() || tokens_[at] != best;
    });
  }
  return d;
}

}  // namespace tsr::draft_suffix
