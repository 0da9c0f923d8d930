// Drafting with a second, smaller model of the same vocabulary (e.g. a Q4_0 copy of the
// target as a self-draft). The host runs the model (tsr_model_host); this plugin is the
// strategy: keep the draft model's sequence in step with the request's history, then
// propose its greedy continuation, or for a sampled request the tokens the target's own
// draws would pick from the draft's logits at the same uniforms (ABI 2.9,
// sdk/draft_sampling.hpp); verification treats them as point masses (exact).
// All running requests propose together (propose_batch), one draft pass per round.
// Written on the SDK's DraftPlugin, which checks handles and proposal buffers.
#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/sdk/draft.hpp"
#include "tessera/sdk/draft_sampling.hpp"

namespace {

using tsr::sdk::call_host;
using tsr::sdk::Failure;
using tsr::sdk::require;

class ModelDraft {
 public:
  static constexpr uint32_t kNeeds = TSR_DRAFT_NEEDS_TOKENS | TSR_DRAFT_NEEDS_MODEL;

  // One request's sequence in the draft model.
  struct Seq {
    Seq(const tsr_model_host* h, tsr_model* m) : host(h), model(m) {}
    ~Seq() { host->seq_destroy(model, seq); }  // NULL (a failed seq_create) is ignored
    Seq(const Seq&) = delete;
    Seq& operator=(const Seq&) = delete;

    const tsr_model_host* host;
    tsr_model* model;
    tsr_model_seq* seq = nullptr;
    std::vector<int32_t> known;  // tokens the draft model has computed
    std::vector<float> logits;   // after the last of them
  };

  explicit ModelDraft(const tsr_draft_params& p) : host_(p.model_host), max_draft_tokens_(p.max_draft_tokens) {
    require(host_ != nullptr, "draft model: the host offers no model services");
    require(p.model_path != nullptr && p.model_path[0] != '\0',
            "draft model: no model given ([speculative] draft_model = \"path.gguf\")");
    call_host(std::string("draft model ") + p.model_path,
              [&](tsr_error** e) { return host_->model_open(host_->context, p.model_path, &model_, e); });
    n_vocab_ = host_->model_n_vocab(model_);
    try {
      check_compatible(p);
    } catch (...) {
      host_->model_close(model_);
      throw;
    }
  }
  ~ModelDraft() { host_->model_close(model_); }
  ModelDraft(const ModelDraft&) = delete;
  ModelDraft& operator=(const ModelDraft&) = delete;

  std::unique_ptr<Seq> seq_create(std::span<const int32_t>) {
    auto s = std::make_unique<Seq>(host_, model_);
    call_host("draft model seq_create", [&](tsr_error** e) { return host_->seq_create(model_, &s->seq, e); });
    s->logits.resize(static_cast<size_t>(n_vocab_));
    return s;
  }

  // Every sequence's continuation, one forward pass of the draft model per round
  // for all of them (the host's seqs_decode): first each sequence's history past what it
  // computed, then one token each per round while any still proposes.
  void propose_batch(std::span<const tsr::sdk::BatchEntry<Seq>> batch) {
    std::vector<Pending> pending;
    for (const auto& e : batch) {
      require(!e.history.empty(), "draft model: empty history");
      if (std::span<const int32_t> rest = rollback(*e.seq, e.history); !rest.empty()) pending.push_back({e.seq, rest});
    }
    decode_all(pending);
    std::vector<int32_t> next(batch.size());
    for (int32_t i = 0;; ++i) {
      pending.clear();
      for (size_t j = 0; j < batch.size(); ++j) {
        const auto& e = batch[j];
        if (i >= capacity(e)) continue;
        float prob = 0;
        next[j] = tsr::sdk::draft_token(e.seq->logits, e.sampling, i, &prob);
        e.tokens[i] = next[j];
        if (!e.probs.empty()) e.probs[i] = prob;
        *e.n_tokens = i + 1;
        if (i + 1 < capacity(e)) pending.push_back({e.seq, std::span(&next[j], 1)});  // the last needs no logits
      }
      if (pending.empty()) return;
      decode_all(pending);
    }
  }

  // Nothing to do: the next propose() rolls back to the verified history.
  void on_verified(Seq&, int32_t, int32_t) {}

 private:
  // A draft must share the target's vocabulary token for token, and be smaller.
  void check_compatible(const tsr_draft_params& p) const {
#if TSR_SDK_ABI_AT_LEAST(2, 7)
    if (TSR_STRUCT_HAS(host_, tsr_model_host, model_n_features) && host_->model_n_features(model_) > 0) {
      throw Failure(TSR_STATUS_UNSUPPORTED, std::string(p.model_path) +
                                                " is an EAGLE-3 head, not a model: use [speculative] method = \"eagle\"");
    }
#endif
    if (n_vocab_ != p.n_vocab) {
      throw Failure(TSR_STATUS_UNSUPPORTED, "draft model vocabulary has " + std::to_string(n_vocab_) +
                                                " tokens, the target " + std::to_string(p.n_vocab));
    }
    for (int32_t i = 0; p.vocab != nullptr && i < p.n_vocab; ++i) {
      const char* ours = host_->model_token_text(model_, i);
      if (ours == nullptr || std::string(ours) != p.vocab[i]) {
        throw Failure(TSR_STATUS_UNSUPPORTED, "draft model vocabulary differs from the target's at token " +
                                                  std::to_string(i) + " ('" + (ours ? ours : "") + "' vs '" +
                                                  p.vocab[i] + "')");
      }
    }
    const uint64_t ours = host_->model_n_params(model_);
    if (p.target_n_params != 0 && ours > p.target_n_params) {
      throw Failure(TSR_STATUS_UNSUPPORTED, "draft model has " + std::to_string(ours) +
                                                " parameters, more than the target's " +
                                                std::to_string(p.target_n_params));
    }
  }

  // Tokens a sequence computes next.
  struct Pending {
    Seq* seq;
    std::span<const int32_t> tokens;
  };

  int32_t capacity(const tsr::sdk::BatchEntry<Seq>& e) const {
    return static_cast<int32_t>(std::min<int64_t>(static_cast<int64_t>(e.tokens.size()), max_draft_tokens_));
  }

  // Rolls the draft sequence back to the longest common prefix with `history` and returns
  // the rest of history, which computed leaves the logits of its last token.
  std::span<const int32_t> rollback(Seq& s, std::span<const int32_t> history) {
    const size_t n = history.size();
    size_t common = 0;
    while (common < s.known.size() && common < n && s.known[common] == history[common]) ++common;
    if (common == n && common == s.known.size()) return {};
    if (common == n) --common;  // recompute the last token to get its logits back
    call_host("draft model truncate", [&](tsr_error** e) { return host_->seq_truncate(model_, s.seq, common, e); });
    s.known.resize(common);
    return history.subspan(common);
  }

  // Computes each sequence's pending tokens: one forward pass for all of them where the
  // host has seqs_decode (ABI 2.6), else one per sequence.
  void decode_all(const std::vector<Pending>& pending) {
    if (pending.empty()) return;
    if (pending.size() == 1 || !batched_) {
      for (const Pending& p : pending) {
        call_host("draft model decode", [&](tsr_error** e) {
          return host_->seq_decode(model_, p.seq->seq, p.tokens.data(), p.tokens.size(), p.seq->logits.data(), e);
        });
      }
    } else {
      std::vector<tsr_model_seq*> seqs;
      std::vector<const int32_t*> tokens;
      std::vector<size_t> counts;
      for (const Pending& p : pending) {
        seqs.push_back(p.seq->seq), tokens.push_back(p.tokens.data()), counts.push_back(p.tokens.size());
      }
      logits_.resize(pending.size() * static_cast<size_t>(n_vocab_));
      call_host("draft model decode", [&](tsr_error** e) {
        return host_->seqs_decode(model_, seqs.data(), tokens.data(), counts.data(), seqs.size(), logits_.data(), e);
      });
      for (size_t i = 0; i < pending.size(); ++i) {
        const auto row = logits_.begin() + static_cast<std::ptrdiff_t>(i * size_t(n_vocab_));
        std::copy(row, row + n_vocab_, pending[i].seq->logits.begin());
      }
    }
    for (const Pending& p : pending) p.seq->known.insert(p.seq->known.end(), p.tokens.begin(), p.tokens.end());
  }

  const tsr_model_host* host_;
  // The host decodes several sequences in one pass (a host of ABI 2.6 or later).
  bool batched_ = host_ != nullptr && TSR_STRUCT_HAS(host_, tsr_model_host, seqs_decode) && host_->seqs_decode != nullptr;
  tsr_model* model_ = nullptr;
  int32_t n_vocab_ = 0;
  int32_t max_draft_tokens_;
  std::vector<float> logits_;  // seqs_decode's rows
};

}  // namespace

TSR_SDK_DRAFT_PLUGIN(ModelDraft, "model", "0.1.0")
