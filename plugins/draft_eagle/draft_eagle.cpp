// EAGLE-3 drafting: a one-layer head (an `eagle3` GGUF, as llama.cpp's converter writes it)
// predicts the target's next tokens from the target's own hidden states at a few layers
// and the tokens. The host runs the head as a feature model (tsr_model_host, ABI 2.7) with
// a KV cache of its own; this plugin keeps each request's target features and the head's
// sequence in step with the history:
//   head row j takes token history[j + 1] and the target's features at position j (the
//   states that produced history[j + 1]), and its logits predict history[j + 2];
//   after the last target row, the chain feeds each draft token back with the head's own
//   output state (before its output norm) in place of target features.
// After verification the rows fed with the head's states are dropped and the accepted
// positions are recomputed from the target's features (EAGLE's rule). Proposals are the
// head's greedy tokens, or for a sampled request the token the target's own draw would
// pick from the head's logits at the same uniform (ABI 2.9, sdk/draft_sampling.hpp), mapped
// to target ids through d2t where the head's vocabulary is reduced; verification treats
// them as a point mass, which keeps sampling exact. Where the
// host verifies trees ([speculative] tree_budget), the chain is followed by the likeliest
// other candidates of each of its steps as leaves, ranked by EAGLE-2's confidence (the
// head's probability of the path to the leaf): a leaf the target accepts brings the bonus
// token its row draws. (EAGLE-2 also expands below such candidates; that needs the head to
// run tree attention over its own KV, which the host's feature models do not offer yet.) All
// running requests propose together (propose_batch): one head pass catches every request
// up, then one per further draft token for all of them.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tessera/sdk/draft.hpp"
#include "tessera/sdk/draft_sampling.hpp"

namespace {

using tsr::sdk::call_host;
using tsr::sdk::Failure;
using tsr::sdk::require;

class EagleDraft {
 public:
  static constexpr uint32_t kNeeds = TSR_DRAFT_NEEDS_TOKENS | TSR_DRAFT_NEEDS_MODEL | TSR_DRAFT_NEEDS_HIDDEN;
  static constexpr bool kProposesTrees = true;

  struct Seq {
    Seq(const tsr_model_host* h, tsr_model* m) : host(h), model(m) {}
    ~Seq() { host->seq_destroy(model, seq); }
    Seq(const Seq&) = delete;
    Seq& operator=(const Seq&) = delete;

    const tsr_model_host* host;
    tsr_model* model;
    tsr_model_seq* seq = nullptr;
    int64_t base = -1;            // the position of the head's row 0 (-1: no features yet)
    // Target features from position `kept` on, n_features each. Rows the head has consumed
    // are dropped (all but the last, which a recomputation of its logits reads), so a
    // request keeps a few rows rather than its whole context's.
    int64_t kept = 0;
    std::vector<float> features;
    std::vector<int32_t> fed;     // the token of each head row computed from target features
    std::vector<float> logits;    // after the head's last row
    std::vector<float> state;     // its output state
    size_t width = 1;
    int64_t rows() const { return base < 0 ? 0 : kept + int64_t(features.size() / width); }  // positions with features

    // The head starts again at `first`: no rows, no features.
    void restart(int64_t first) {
      base = kept = first;
      features.clear();
      fed.clear();
    }
    // Drops the feature rows before the last consumed one.
    void drop_consumed() {
      const int64_t from = base + int64_t(fed.size()) - 1;
      if (from <= kept) return;
      features.erase(features.begin(), features.begin() + std::ptrdiff_t(size_t(from - kept) * width));
      kept = from;
    }
  };

  explicit EagleDraft(const tsr_draft_params& p) : host_(p.model_host), max_draft_tokens_(p.max_draft_tokens) {
    require(host_ != nullptr && TSR_STRUCT_HAS(host_, tsr_model_host, states_read) &&
                host_->seqs_decode_features != nullptr && host_->states_read != nullptr,
            "eagle: the host runs no feature models (a host of ABI 2.7 or later does)");
    require(TSR_STRUCT_HAS(&p, tsr_draft_params, target_n_embd) && p.target_n_embd > 0,
            "eagle: the host gave no target shape");
    require(p.model_path != nullptr && p.model_path[0] != '\0',
            "eagle: no head given ([speculative] draft_model = \"head.gguf\", an eagle3 GGUF)");
    call_host(std::string("eagle head ") + p.model_path,
              [&](tsr_error** e) { return host_->model_open(host_->context, p.model_path, &model_, e); });
    try {
      describe_head(p);
    } catch (...) {
      host_->model_close(model_);
      throw;
    }
  }
  ~EagleDraft() { host_->model_close(model_); }
  EagleDraft(const EagleDraft&) = delete;
  EagleDraft& operator=(const EagleDraft&) = delete;

  std::vector<int32_t> hidden_layers() { return layers_; }

  std::unique_ptr<Seq> seq_create(std::span<const int32_t>) {
    auto s = std::make_unique<Seq>(host_, model_);
    call_host("eagle seq_create", [&](tsr_error** e) { return host_->seq_create(model_, &s->seq, e); });
    s->width = size_t(n_features_);
    s->logits.resize(size_t(n_vocab_));
    s->state.resize(size_t(n_embd_));
    return s;
  }

  // The target's states for positions first.. as feature rows ([layer | layer | ...] per
  // position), replacing those from `first` on (a recomputation). States after a gap, or
  // before the rows kept, restart the head there.
  void on_hidden(Seq& s, const tsr_tensor& states, int64_t first) {
    require(states.ndim == 3 && states.shape[0] == int64_t(layers_.size()) && states.shape[2] == target_embd_,
            "eagle: states of the wrong shape");
    const int64_t rows = states.shape[1], n_layers = states.shape[0];
    host_states_.resize(size_t(n_layers * rows * target_embd_));
    call_host("eagle states_read", [&](tsr_error** e) { return host_->states_read(host_->context, &states, host_states_.data(), e); });
    if (s.base < 0 || first < s.kept || first > s.rows()) s.restart(first);  // a gap, or states already dropped
    s.features.resize(size_t(first - s.kept) * s.width);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t l = 0; l < n_layers; ++l) {
        const float* src = host_states_.data() + (l * rows + r) * target_embd_;
        s.features.insert(s.features.end(), src, src + target_embd_);
      }
    }
    const auto valid = static_cast<size_t>(first - s.base);
    if (s.fed.size() > valid) s.fed.resize(valid);  // head rows from `first` on are recomputed
  }

  void propose_batch(std::span<const tsr::sdk::BatchEntry<Seq>> batch) {
    std::vector<Pending> pending;
    std::vector<const tsr::sdk::BatchEntry<Seq>*> drafting;
    for (const auto& e : batch) {
      *e.n_tokens = 0;
      if (capacity(e) == 0) continue;
      if (std::optional<Pending> p = catch_up(*e.seq, e.history)) {
        pending.push_back(*p);
        drafting.push_back(&e);
      }
    }
    decode(pending, n_features_);
    std::vector<int32_t> next(drafting.size());
    std::vector<Leaves> leaves(drafting.size());
    for (int32_t i = 0;; ++i) {
      pending.clear();
      for (size_t j = 0; j < drafting.size(); ++j) {
        const auto& e = *drafting[j];
        if (i >= capacity(e)) continue;
        float prob = 0;
        const int32_t head_id = tsr::sdk::draft_token(e.seq->logits, e.sampling, i, &prob, target_ids_);
        next[j] = target_id(head_id);
        e.tokens[size_t(i)] = next[j];
        if (!e.probs.empty()) e.probs[size_t(i)] = prob;
        *e.n_tokens = i + 1;
        if (!e.parents.empty()) leaves[j].rank(e.seq->logits, head_id, i, int32_t(e.tokens.size()) - capacity(e));
        leaves[j].path_prob *= prob;
        if (i + 1 < capacity(e)) pending.push_back({e.seq, std::span(&next[j], 1), e.seq->state.data()});
      }
      if (pending.empty()) break;
      decode(pending, n_embd_);
    }
    for (size_t j = 0; j < drafting.size(); ++j) add_leaves(*drafting[j], leaves[j]);
  }

  void on_verified(Seq&, int32_t, int32_t) {}

 private:
  // Rows a sequence computes next: tokens, and features (n_features or n_embd wide each).
  struct Pending {
    Seq* seq;
    std::span<const int32_t> tokens;
    const float* features;
  };

  void describe_head(const tsr_draft_params& p) {
    n_features_ = host_->model_n_features(model_);
    if (n_features_ <= 0) {
      throw Failure(TSR_STATUS_UNSUPPORTED, std::string("eagle: ") + p.model_path +
                                                " is not an EAGLE-3 head (general.architecture eagle3)");
    }
    n_embd_ = host_->model_n_embd(model_);
    n_vocab_ = host_->model_n_vocab(model_);
    target_embd_ = p.target_n_embd;
    layers_.resize(TSR_DRAFT_MAX_HIDDEN_LAYERS);
    const int32_t n = host_->model_feature_layers(model_, layers_.data(), TSR_DRAFT_MAX_HIDDEN_LAYERS);
    require(n >= 1 && n <= TSR_DRAFT_MAX_HIDDEN_LAYERS, "eagle: the head names no target layers");
    layers_.resize(size_t(n));
    if (int64_t(n) * target_embd_ != n_features_) {
      throw Failure(TSR_STATUS_UNSUPPORTED, "eagle: the head's features are " + std::to_string(n_features_) +
                                                " wide, the target's " + std::to_string(n) + " layers x " +
                                                std::to_string(target_embd_));
    }
    if (const int32_t* ids = host_->model_target_tokens(model_)) {
      target_ids_.assign(ids, ids + n_vocab_);
    } else if (n_vocab_ != p.n_vocab) {
      throw Failure(TSR_STATUS_UNSUPPORTED, "eagle: the head's vocabulary has " + std::to_string(n_vocab_) +
                                                " tokens and no d2t, the target's " + std::to_string(p.n_vocab));
    }
  }

  // The chain's length: the most tokens on a path.
  int32_t capacity(const tsr::sdk::BatchEntry<Seq>& e) const { return std::min(e.depth, max_draft_tokens_); }

  // A tree's candidate leaves: the head's other likely tokens at each step of the chain.
  struct Leaf {
    double score;   // the head's probability of the path to it
    int32_t head_id;
    int32_t step;   // its depth - 1: its parent is chain token step - 1 (-1: the history)
    float prob;
  };
  struct Leaves {
    double path_prob = 1;  // of the chain so far
    std::vector<Leaf> all;

    // The `room` likeliest tokens of chain step `step` but the chain's own (`chain_id`).
    void rank(const std::vector<float>& logits, int32_t chain_id, int32_t step, int32_t room) {
      if (room <= 0) return;
      std::vector<int32_t> ids(logits.size());
      for (size_t t = 0; t < ids.size(); ++t) ids[t] = int32_t(t);
      const auto top = std::min(ids.size(), size_t(room) + 1);
      std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(top), ids.end(),
                        [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); });
      const float max = logits[size_t(ids[0])];
      double total = 0;
      for (const float l : logits) total += std::exp(double(l - max));
      size_t added = 0;
      for (size_t r = 0; r < top && added + 1 < top; ++r) {
        if (ids[r] == chain_id) continue;
        const auto p = static_cast<float>(std::exp(double(logits[size_t(ids[r])] - max)) / total);
        all.push_back({path_prob * p, ids[r], step, p});
        ++added;
      }
    }
  };

  // Fills a tree entry's room after its chain with the likeliest leaves.
  void add_leaves(const tsr::sdk::BatchEntry<Seq>& e, Leaves& leaves) const {
    if (e.parents.empty()) return;
    const int32_t chain = *e.n_tokens;
    for (int32_t i = 0; i < chain; ++i) e.parents[size_t(i)] = i - 1;
    std::vector<Leaf>& all = leaves.all;
    std::erase_if(all, [&](const Leaf& l) { return l.step >= chain; });
    const auto n = std::min(all.size(), e.tokens.size() - size_t(chain));
    std::partial_sort(all.begin(), all.begin() + std::ptrdiff_t(n), all.end(),
                      [](const Leaf& a, const Leaf& b) { return a.score > b.score; });
    for (size_t m = 0; m < n; ++m) {
      const auto at = size_t(chain) + m;
      e.tokens[at] = target_id(all[m].head_id);
      e.parents[at] = all[m].step - 1;
      if (!e.probs.empty()) e.probs[at] = all[m].prob;
    }
    *e.n_tokens = chain + static_cast<int32_t>(n);
  }

  int32_t target_id(int32_t head_id) const { return target_ids_.empty() ? head_id : target_ids_[size_t(head_id)]; }

  // Brings the head's rows up to history: head row j is position base + j, fed token
  // history[base + j + 1]. Rows whose token no longer matches (rejected drafts, the head's
  // own chain rows) are dropped; the rest of the positions with target features are
  // pending. Nothing when the target's features do not reach the history's end.
  std::optional<Pending> catch_up(Seq& s, std::span<const int32_t> history) {
    const auto last = static_cast<int64_t>(history.size()) - 2;  // the last row's position
    if (s.base < 0 || last < s.base || s.rows() <= last) return std::nullopt;
    size_t keep = 0;
    while (keep < s.fed.size() && int64_t(keep) + s.base <= last && s.fed[keep] == history[size_t(s.base) + keep + 1]) {
      ++keep;
    }
    if (int64_t(keep) + s.base > last) --keep;  // recompute the last row for its logits
    if (s.base + int64_t(keep) < s.kept) {  // those rows' features were dropped: restart at the first kept
      s.base = s.kept;
      s.fed.clear();
      keep = 0;
    }
    call_host("eagle truncate", [&](tsr_error** e) { return host_->seq_truncate(model_, s.seq, keep, e); });
    s.fed.resize(keep);
    const size_t first = size_t(s.base) + keep + 1;
    return Pending{&s, history.subspan(first, size_t(last + 2) - first),
                   s.features.data() + size_t(s.base + int64_t(keep) - s.kept) * s.width};
  }

  // One head pass over every pending sequence's rows; each keeps its last row's logits
  // and output state.
  void decode(const std::vector<Pending>& pending, int32_t width) {
    if (pending.empty()) return;
    std::vector<tsr_model_seq*> seqs;
    std::vector<const int32_t*> tokens;
    std::vector<size_t> counts;
    std::vector<const float*> features;
    for (const Pending& p : pending) {
      seqs.push_back(p.seq->seq), tokens.push_back(p.tokens.data()), counts.push_back(p.tokens.size());
      features.push_back(p.features);
    }
    logits_.resize(pending.size() * size_t(n_vocab_));
    states_.resize(pending.size() * size_t(n_embd_));
    call_host("eagle head decode", [&](tsr_error** e) {
      return host_->seqs_decode_features(model_, seqs.data(), tokens.data(), counts.data(), features.data(), width,
                                         seqs.size(), logits_.data(), states_.data(), e);
    });
    for (size_t i = 0; i < pending.size(); ++i) {
      Seq& s = *pending[i].seq;
      if (width == n_features_) {
        s.fed.insert(s.fed.end(), pending[i].tokens.begin(), pending[i].tokens.end());
        s.drop_consumed();
      }
      std::copy_n(logits_.begin() + std::ptrdiff_t(i * size_t(n_vocab_)), n_vocab_, s.logits.begin());
      std::copy_n(states_.begin() + std::ptrdiff_t(i * size_t(n_embd_)), n_embd_, s.state.begin());
    }
  }

  const tsr_model_host* host_;
  int32_t max_draft_tokens_;
  tsr_model* model_ = nullptr;
  int32_t n_features_ = 0, n_embd_ = 0, n_vocab_ = 0;
  int64_t target_embd_ = 0;
  std::vector<int32_t> layers_;
  std::vector<int32_t> target_ids_;  // d2t; empty: the head's ids are the target's
  std::vector<float> host_states_, logits_, states_;
};

}  // namespace

TSR_SDK_DRAFT_PLUGIN(EagleDraft, "eagle", "0.1.0")
