// The example constraint: kind "choice". The text lists literal strings, one per line
// (empty lines are ignored); the output must be exactly one of them. Copy this directory,
// rename "example", pick your kind and replace Grammar and Matcher.
//
// The mask is computed from the vocabulary's bytes, so it works for any tokenizer: a
// token may end inside a UTF-8 character, and a choice may be a prefix of another ("yes"
// and "yes!"). EOS is allowed only once the output is a whole choice; special tokens never.
#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/sdk/constraint.hpp"

namespace {

class ExampleConstraint {
 public:
  static constexpr const char* kKinds = "choice";

  // The vocabulary copied out of the descriptor, whose pointers are only borrowed.
  struct Vocab {
    std::vector<std::string> bytes;
    std::vector<uint8_t> kinds;  // tsr_token_kind
  };

  // The choices, sorted and unique: the choices that start with a given prefix are then
  // one contiguous run, found by binary search. Immutable, so matchers share it freely.
  struct Grammar {
    std::shared_ptr<const Vocab> vocab;
    std::vector<std::string> choices;

    std::span<const std::string> starting_with(std::string_view prefix) const {
      const auto first = std::lower_bound(choices.begin(), choices.end(), prefix);
      const auto last = std::partition_point(first, choices.end(), [&](const std::string& c) {
        return std::string_view(c).starts_with(prefix);
      });
      return {first, last};
    }
  };

  class Matcher {
   public:
    explicit Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {}

    void fill_mask(std::span<uint32_t> words) {
      if (terminated_) return;  // the SDK cleared the mask: nothing may follow EOS
      const auto candidates = g_->starting_with(out_);
      const Vocab& v = *g_->vocab;
      for (size_t id = 0; id < v.kinds.size(); ++id) {
        if (allowed(candidates, id)) words[id / 32] |= 1u << (id % 32);
      }
    }

    bool accept(int32_t token) {
      if (terminated_ || token < 0 || static_cast<size_t>(token) >= g_->vocab->kinds.size()) {
        return false;
      }
      const auto id = static_cast<size_t>(token);
      if (!allowed(g_->starting_with(out_), id)) return false;
      history_.push_back(out_.size());
      if (g_->vocab->kinds[id] == TSR_TOKEN_EOS) {
        terminated_ = true;
      } else {
        out_ += g_->vocab->bytes[id];
      }
      return true;
    }

    // Only the last step can be EOS, so undoing any step undoes the termination.
    bool rollback(size_t n) {
      if (n > history_.size()) return false;
      if (n == 0) return true;
      out_.resize(history_[history_.size() - n]);
      history_.resize(history_.size() - n);
      terminated_ = false;
      return true;
    }

    bool is_terminated() const { return terminated_; }
    bool can_terminate() const { return !terminated_ && complete(g_->starting_with(out_)); }

    // Optional entry (jump-forward decoding): the bytes all remaining choices share,
    // unless the output may already end here.
    size_t forced_bytes(std::span<char> buf) {
      const auto candidates = g_->starting_with(out_);
      if (terminated_ || candidates.empty() || complete(candidates)) return 0;
      const std::string_view first = std::string_view(candidates.front()).substr(out_.size());
      const std::string_view last = std::string_view(candidates.back()).substr(out_.size());
      size_t n = 0;  // sorted: what the first and last share, all in between share
      while (n < buf.size() && n < first.size() && n < last.size() && first[n] == last[n]) {
        buf[n] = first[n];
        ++n;
      }
      return n;
    }

   private:
    // The shortest string of a sorted run is first: the output is complete iff it is that.
    bool complete(std::span<const std::string> candidates) const {
      return !candidates.empty() && candidates.front() == out_;
    }

    // Whether token `id` may follow, given the choices that start with the output so far.
    bool allowed(std::span<const std::string> candidates, size_t id) const {
      const Vocab& v = *g_->vocab;
      if (v.kinds[id] == TSR_TOKEN_EOS) return complete(candidates);
      const std::string_view bytes = v.bytes[id];
      // A text token without bytes would let generation stall without progress.
      if (v.kinds[id] != TSR_TOKEN_TEXT || bytes.empty()) return false;
      const size_t at = out_.size();
      const auto it = std::lower_bound(
          candidates.begin(), candidates.end(), bytes,
          [at](const std::string& c, std::string_view b) { return std::string_view(c).substr(at) < b; });
      return it != candidates.end() && std::string_view(*it).substr(at).starts_with(bytes);
    }

    std::shared_ptr<const Grammar> g_;
    std::string out_;              // the bytes accepted so far
    std::vector<size_t> history_;  // out_.size() before each accepted token
    bool terminated_ = false;
  };

  static std::shared_ptr<Vocab> vocab_create(const tsr_vocab_desc& d) {
    auto v = std::make_shared<Vocab>();
    v->kinds.assign(d.token_kinds, d.token_kinds + d.n_tokens);
    v->bytes.resize(static_cast<size_t>(d.n_tokens));
    for (int32_t i = 0; i < d.n_tokens; ++i) {
      if (d.token_kinds[i] == TSR_TOKEN_TEXT && d.token_lens[i] > 0) {
        v->bytes[i].assign(d.token_bytes[i], d.token_lens[i]);
      }
    }
    return v;
  }

  // Thread-safe: builds a new object from its arguments only.
  static std::shared_ptr<Grammar> compile(const std::shared_ptr<Vocab>& vocab, std::string_view,
                                          std::string_view text) {
    auto g = std::make_shared<Grammar>();
    g->vocab = vocab;
    for (size_t start = 0; start <= text.size();) {
      const size_t end = std::min(text.find('\n', start), text.size());
      if (end > start) g->choices.emplace_back(text.substr(start, end - start));
      start = end + 1;
    }
    if (g->choices.empty()) {
      throw tsr::sdk::Failure(TSR_STATUS_INVALID_ARGUMENT,
                              "choice constraint lists no choices (one per line)");
    }
    std::sort(g->choices.begin(), g->choices.end());
    g->choices.erase(std::unique(g->choices.begin(), g->choices.end()), g->choices.end());
    return g;
  }

  static Matcher matcher_create(const std::shared_ptr<Grammar>& g) { return Matcher(g); }
};

}  // namespace

TSR_SDK_CONSTRAINT_PLUGIN(ExampleConstraint, "example", "0.1.0")
