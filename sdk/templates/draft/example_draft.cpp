// The example draft: bigram lookup. Each request remembers which token last followed each
// token of its history and proposes the chain that starts at the last token. Verification
// is exact, so even a poor guess never changes the output; a good one saves steps on
// repetitive text. Copy this directory, rename "example" and replace propose().
#include <algorithm>
#include <memory>
#include <span>
#include <unordered_map>

#include "tessera/sdk/draft.hpp"

namespace {

class ExampleDraft {
 public:
  static constexpr uint32_t kNeeds = TSR_DRAFT_NEEDS_TOKENS;

  // Per-request state: the bigram table of the history indexed so far.
  struct Seq {
    std::unordered_map<int32_t, int32_t> next;
    size_t indexed = 0;  // history tokens already in `next`
  };

  explicit ExampleDraft(const tsr_draft_params& p) : max_tokens_(p.max_draft_tokens) {}

  std::unique_ptr<Seq> seq_create(std::span<const int32_t> prompt) {
    auto seq = std::make_unique<Seq>();
    index(*seq, prompt);
    return seq;
  }

  int32_t propose(Seq& seq, std::span<const int32_t> history, std::span<int32_t> tokens,
                  std::span<float> probs) {
    index(seq, history);
    if (history.empty()) return 0;
    const auto k = std::min<size_t>(tokens.size(), static_cast<size_t>(max_tokens_));
    int32_t n = 0;
    for (int32_t last = history.back(); static_cast<size_t>(n) < k; ++n) {
      const auto it = seq.next.find(last);
      if (it == seq.next.end()) break;
      last = tokens[n] = it->second;
      if (!probs.empty()) probs[n] = 1.0f;  // a point mass: this draft has no distribution
    }
    return n;
  }

  // Nothing to roll back: rejected tokens never enter the table, which is built from the
  // verified history that the next propose() receives.
  void on_verified(Seq&, int32_t, int32_t) {}

 private:
  // Adds the bigrams of history[seq.indexed - 1 ...]; a shorter history than last time
  // (a new request reusing the state) starts the table over.
  static void index(Seq& seq, std::span<const int32_t> history) {
    if (history.size() < seq.indexed) seq = Seq{};
    for (size_t i = std::max<size_t>(seq.indexed, 1); i < history.size(); ++i) {
      seq.next[history[i - 1]] = history[i];
    }
    seq.indexed = history.size();
  }

  int32_t max_tokens_;
};

}  // namespace

TSR_SDK_DRAFT_PLUGIN(ExampleDraft, "example", "0.1.0")
