// Suffix decoding (Oliaro et al. 2024, Arctic Inference): drafts from two suffix indexes,
// one over the request's own prompt and output and one over the outputs of recent requests
// to the same model, and proposes whichever continuation has the higher expected number of
// accepted tokens (the sum of its path probabilities). Unlike prompt lookup, a proposal is
// the most frequent continuation over every occurrence of the longest matched suffix, and
// its length follows the match: at most the match length (factor 1), cut where the path's
// empirical probability falls below 0.1. No model, so it costs microseconds per step.
#include <algorithm>
#include <memory>
#include <span>
#include <string>

#include "suffix_index.h"
#include "tessera/sdk/draft.hpp"

namespace {

using tsr::draft_suffix::SuffixDraft;
using tsr::draft_suffix::SuffixIndex;
using tsr::draft_suffix::SuffixLimits;

// Outputs of finished requests kept for drafting, at most this many tokens (4 MiB of ids
// plus their positions); the oldest outputs go first.
constexpr size_t kSharedTokens = size_t(1) << 20;

class SuffixDraftPlugin {
 public:
  static constexpr uint32_t kNeeds = TSR_DRAFT_NEEDS_TOKENS;

  struct Seq {
    SuffixIndex own;        // the request's history, indexed as far as it was seen
    size_t n_prompt = 0;
  };

  // Matches up to 32 tokens (SuffixLimits), whatever ngram_max says: the length rule
  // needs long matches to propose long drafts.
  explicit SuffixDraftPlugin(const tsr_draft_params& p) { limits_.max_tokens = p.max_draft_tokens; }

  std::unique_ptr<Seq> seq_create(std::span<const int32_t> prompt) {
    auto seq = std::make_unique<Seq>();
    seq->n_prompt = prompt.size();
    for (const int32_t t : prompt) seq->own.append(t);
    return seq;
  }

  int32_t propose(Seq& seq, std::span<const int32_t> history, std::span<int32_t> tokens, std::span<float> probs) {
    sync(seq, history);
    SuffixLimits limits = limits_;
    limits.max_tokens = std::min<int32_t>(limits.max_tokens, static_cast<int32_t>(tokens.size()));
    if (limits.max_tokens <= 0) return 0;
    const SuffixDraft own = seq.own.propose(history, limits);
    const SuffixDraft shared = shared_.propose(history, limits);
    const SuffixDraft& best = shared.score > own.score ? shared : own;
    std::copy(best.tokens.begin(), best.tokens.end(), tokens.begin());
    if (!probs.empty()) std::copy(best.probs.begin(), best.probs.end(), probs.begin());
    return static_cast<int32_t>(best.tokens.size());
  }

  void on_verified(Seq&, int32_t, int32_t) {}  // propose's history is the authority

  // The request's output joins the shared index when the request ends.
  void seq_destroy(Seq& seq) {
    const std::span<const int32_t> all = seq.own.tokens();
    if (all.size() <= seq.n_prompt) return;
    for (size_t i = seq.n_prompt; i < all.size(); ++i) shared_.append(all[i]);
    shared_.append(SuffixIndex::kSeparator);
    // Halving when full rebuilds the index once per kSharedTokens / 2 tokens added, not at
    // every request's end.
    if (shared_.size() > kSharedTokens) shared_.keep_newest(kSharedTokens / 2);
  }

 private:
  // Indexes the tokens of `history` the sequence has not seen; a history that is not an
  // extension of what was indexed (a new prompt in the same state) starts it over.
  static void sync(Seq& seq, std::span<const int32_t> history) {
    const std::span<const int32_t> seen = seq.own.tokens();
    if (history.size() < seen.size() || (!seen.empty() && history[seen.size() - 1] != seen.back())) {
      seq.own.clear();
      seq.n_prompt = 0;
    }
    for (size_t i = seq.own.size(); i < history.size(); ++i) seq.own.append(history[i]);
  }

  SuffixLimits limits_;
  SuffixIndex shared_;
};

}  // namespace

TSR_SDK_DRAFT_PLUGIN(SuffixDraftPlugin, "suffix", "0.1.0")
