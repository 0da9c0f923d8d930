// Prompt-lookup drafting: the longest suffix of the history (ngram_max down to ngram_min
// tokens) that occurred before proposes the tokens that followed its latest earlier
// occurrence. Free to compute and exact to verify; strong on repetitive text and code.
// Written on the SDK's DraftPlugin, which checks handles and proposal buffers.
#include <algorithm>
#include <memory>
#include <span>
#include <string>

#include "tessera/sdk/draft.hpp"

namespace {

using tsr::sdk::require;

// Start of the latest earlier occurrence of the last n tokens of h, or -1.
int64_t find_earlier(std::span<const int32_t> h, int32_t n) {
  const auto size = static_cast<int64_t>(h.size());
  const auto suffix = h.subspan(static_cast<size_t>(size - n));
  for (int64_t start = size - n - 1; start >= 0; --start) {
    if (std::equal(suffix.begin(), suffix.end(), h.begin() + start)) return start;
  }
  return -1;
}

class NgramDraft {
 public:
  static constexpr uint32_t kNeeds = TSR_DRAFT_NEEDS_TOKENS;
  struct Seq {};  // prompt lookup reads the history it is given; no state

  explicit NgramDraft(const tsr_draft_params& p)
      : ngram_min_(p.ngram_min), ngram_max_(p.ngram_max), max_draft_tokens_(p.max_draft_tokens) {
    require(p.ngram_min >= 1 && p.ngram_max >= p.ngram_min,
            "ngram: need 1 <= ngram_min <= ngram_max (got " + std::to_string(p.ngram_min) + ", " +
                std::to_string(p.ngram_max) + ")");
  }

  std::unique_ptr<Seq> seq_create(std::span<const int32_t>) { return std::make_unique<Seq>(); }

  int32_t propose(Seq&, std::span<const int32_t> history, std::span<int32_t> tokens, std::span<float> probs) {
    const auto size = static_cast<int64_t>(history.size());
    const auto k = std::min<int64_t>(static_cast<int64_t>(tokens.size()), max_draft_tokens_);
    for (int32_t n = static_cast<int32_t>(std::min<int64_t>(ngram_max_, size - 1)); n >= ngram_min_; --n) {
      const int64_t start = find_earlier(history, n);
      if (start < 0) continue;
      const int64_t from = start + n;  // the tokens that followed the match
      const auto count = static_cast<int32_t>(std::min<int64_t>(k, size - from));
      std::copy_n(history.begin() + from, count, tokens.begin());
      if (!probs.empty()) std::fill_n(probs.begin(), count, 1.0f);
      return count;
    }
    return 0;
  }

  void on_verified(Seq&, int32_t, int32_t) {}

 private:
  int32_t ngram_min_, ngram_max_, max_draft_tokens_;
};

}  // namespace

TSR_SDK_DRAFT_PLUGIN(NgramDraft, "ngram", "0.1.0")
