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
// host verifies trees ([speculative] tree_budget), the chain is followed by EAGLE-2's
// dynamic tree: at each depth the head's likeliest other tokens after the chain and after
// the candidates expanded at the depth before are scored by the head's probability of
// their path (EAGLE-2's confidence), and the best of them are expanded one depth further,
// each decoding on a fork of its parent's head sequence (tsr_model_host.seq_fork, ABI 2.9)
// in the same head pass as the chain's row; the tree is the chain and the best-scored
// candidates whose parents are in. A candidate the target accepts brings the bonus token
// its row draws. All running requests propose together (propose_batch): one head pass
// catches every request up, then one per further draft token for all of them.
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
    require(host_ != nullptr && TSR_STRUCT_HAS(host_, tsr_model_host, seq_fork) &&
                host_->seqs_decode_features != nullptr && host_->states_read != nullptr && host_->seq_fork != nullptr,
            "eagle: the host runs no feature models or forks none (a host of ABI 2.9 or later does)");
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
  // before the head's rows, restart the head there. States of positions the head has
  // already consumed and dropped (the KV recomputation of drafts accepted off a tree's
  // first chain, whose states came from their tree rows) are the ones it read: skipped.
  void on_hidden(Seq& s, const tsr_tensor& states, int64_t first) {
    require(states.ndim == 3 && states.shape[0] == int64_t(layers_.size()) && states.shape[2] == target_embd_,
            "eagle: states of the wrong shape");
    const int64_t rows = states.shape[1], n_layers = states.shape[0];
    host_states_.resize(size_t(n_layers * rows * target_embd_));
    call_host("eagle states_read", [&](tsr_error** e) { return host_->states_read(host_->context, &states, host_states_.data(), e); });
    const bool consumed = s.base >= 0 && first >= s.base && first < s.kept && first + rows > s.kept;
    const int64_t skip = consumed ? s.kept - first : 0;
    first += skip;
    if (s.base < 0 || first < s.kept || first > s.rows()) s.restart(first);  // a gap, or states already dropped
    s.features.resize(size_t(first - s.kept) * s.width);
    for (int64_t r = skip; r < rows; ++r) {
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
    decode(pending);
    std::vector<int32_t> next(drafting.size());
    std::vector<Tree> trees;
    trees.reserve(drafting.size());  // the pending rows point into them
    for (const auto* e : drafting) trees.emplace_back(*this, int32_t(e->tokens.size()) - capacity(*e));
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
        const bool more = i + 1 < capacity(e);
        // The chain's state before its next row: what candidates beside that row read.
        const int64_t chain_rows = int64_t(e.seq->fed.size()) + i;
        if (!e.parents.empty()) trees[j].grow(*e.seq, head_id, i, more ? chain_rows : -1, pending);
        if (more) pending.push_back({e.seq->seq, std::span(&next[j], 1), e.seq->state.data(), n_embd_, e.seq});
      }
      if (pending.empty()) break;
      decode(pending);
    }
    for (size_t j = 0; j < drafting.size(); ++j) trees[j].write(*drafting[j]);
  }

  void on_verified(Seq&, int32_t, int32_t) {}

 private:
  // Rows a head sequence computes next: tokens, and features (`width`: n_features or
  // n_embd each). The last row's logits and state go to `owner` (a request's chain), or
  // else to `node` (a tree candidate on a sequence of its own).
  struct Node;
  struct Pending {
    tsr_model_seq* seq;
    std::span<const int32_t> tokens;
    const float* features;
    int32_t width;
    Seq* owner = nullptr;
    Node* node = nullptr;
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

  // A candidate of a request's tree beside its chain. Expanded candidates (EAGLE-2) run the
  // head on a fork of their parent's sequence, which yields their own candidates.
  struct Node {
    double score;         // the head's probability of the path to it
    int32_t head_id;
    int32_t token;        // its target id (what the head's sequence is fed)
    int32_t depth;        // 1: it follows the history
    int32_t chain_parent; // its parent's index in the chain (-1: the history), or
    int32_t node_parent;  // its parent's index among the candidates (-1: on the chain)
    float prob;
    bool expanded = false;
    tsr_model_seq* seq = nullptr;  // the head's sequence after it, when expanded
    int64_t seq_rows = 0;
    std::vector<float> logits, state;
  };

  // EAGLE-2's dynamic tree (Li et al., 2024) around the chain: at each depth the head's
  // likeliest tokens after every node expanded at the depth before become candidates,
  // scored by the head's probability of their path, and the best `width` of them are
  // expanded one depth further; in the end the chain and the best-scored candidates whose
  // parents are in fill the tree. Forks are freed when the proposal is written.
  class Tree {
   public:
    Tree(EagleDraft& d, int32_t room) : d_(d), room_(std::max(room, 0)) {}
    ~Tree() {
      for (Node& n : nodes_) d_.host_->seq_destroy(d_.model_, n.seq);
    }
    Tree(Tree&& o) noexcept : d_(o.d_), room_(o.room_), chain_score_(o.chain_score_), nodes_(std::move(o.nodes_)) {
      o.nodes_.clear();
    }
    Tree(const Tree&) = delete;
    Tree& operator=(const Tree&) = delete;
    Tree& operator=(Tree&&) = delete;

    // Chain step `step` drew `chain_id` from the chain's logits: adds the candidates after
    // the chain's row and after each candidate expanded at this depth, and, when the chain
    // goes on (`chain_rows` >= 0: the head's rows before its next chain row), expands the
    // best new ones in the same head pass as that row.
    void grow(Seq& chain, int32_t chain_id, int32_t step, int64_t chain_rows, std::vector<Pending>& pending) {
      if (room_ == 0) return;
      const size_t first_new = nodes_.size();
      const std::vector<double> p = softmax(chain.logits);
      add_candidates(p, chain_score_, chain_id, step + 1, step - 1, -1);
      chain_score_ *= p[size_t(chain_id)];
      for (size_t n = 0; n < first_new; ++n) {
        if (nodes_[n].expanded && nodes_[n].depth == step) {
          add_candidates(softmax(nodes_[n].logits), nodes_[n].score, -1, step + 1, -1, int32_t(n));
        }
      }
      if (chain_rows >= 0) expand(chain, first_new, chain_rows, pending);
    }

    // The chain (already in e.tokens) and then the best candidates whose parents are in.
    void write(const tsr::sdk::BatchEntry<Seq>& e) {
      if (e.parents.empty()) return;
      const int32_t chain = *e.n_tokens;
      for (int32_t i = 0; i < chain; ++i) e.parents[size_t(i)] = i - 1;
      std::vector<size_t> order(nodes_.size());
      for (size_t n = 0; n < order.size(); ++n) order[n] = n;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return nodes_[a].score > nodes_[b].score || (nodes_[a].score == nodes_[b].score && nodes_[a].depth < nodes_[b].depth);
      });
      std::vector<int32_t> row(nodes_.size(), -1);  // each candidate's index in the proposal
      int32_t at = chain;
      for (const size_t n : order) {
        if (size_t(at) >= e.tokens.size()) break;
        const Node& c = nodes_[n];
        if (c.depth > chain || (c.node_parent >= 0 && row[size_t(c.node_parent)] < 0)) continue;
        row[n] = at;
        e.tokens[size_t(at)] = c.token;
        e.parents[size_t(at)] = c.node_parent >= 0 ? row[size_t(c.node_parent)] : c.chain_parent;
        if (!e.probs.empty()) e.probs[size_t(at)] = c.prob;
        ++at;
      }
      *e.n_tokens = at;
    }

   private:
    static std::vector<double> softmax(const std::vector<float>& logits) {
      const float max = *std::max_element(logits.begin(), logits.end());
      std::vector<double> p(logits.size());
      double total = 0;
      for (size_t t = 0; t < p.size(); ++t) total += p[t] = std::exp(double(logits[t] - max));
      for (double& x : p) x /= total;
      return p;
    }

    // The room_ likeliest tokens of `p` but `skip` (the chain's own), as candidates at `depth`.
    void add_candidates(const std::vector<double>& p, double parent_score, int32_t skip, int32_t depth,
                        int32_t chain_parent, int32_t node_parent) {
      std::vector<int32_t> ids(p.size());
      for (size_t t = 0; t < ids.size(); ++t) ids[t] = int32_t(t);
      const auto top = std::min(ids.size(), size_t(room_) + 1);
      std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(top), ids.end(), [&](int32_t a, int32_t b) {
        return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b);
      });
      size_t added = 0;
      for (size_t r = 0; r < top && added < size_t(room_); ++r) {
        if (ids[r] == skip) continue;
        nodes_.push_back({parent_score * p[size_t(ids[r])], ids[r], d_.target_id(ids[r]), depth, chain_parent,
                          node_parent, float(p[size_t(ids[r])])});
        ++added;
      }
    }

    // Expands the best `width()` candidates from `first` on: each decodes its token on a fork
    // of its parent's sequence, fed its parent's output state.
    void expand(Seq& chain, size_t first, int64_t chain_rows, std::vector<Pending>& pending) {
      std::vector<size_t> best;
      for (size_t n = first; n < nodes_.size(); ++n) best.push_back(n);
      const size_t w = std::min(best.size(), width());
      std::partial_sort(best.begin(), best.begin() + std::ptrdiff_t(w), best.end(),
                        [&](size_t a, size_t b) { return nodes_[a].score > nodes_[b].score; });
      for (size_t m = 0; m < w; ++m) {
        Node& c = nodes_[best[m]];
        const bool on_chain = c.node_parent < 0;
        tsr_model_seq* parent = on_chain ? chain.seq : nodes_[size_t(c.node_parent)].seq;
        const int64_t rows = on_chain ? chain_rows : nodes_[size_t(c.node_parent)].seq_rows;
        call_host("eagle seq_fork", [&](tsr_error** err) {
          return d_.host_->seq_fork(d_.model_, parent, size_t(rows), &c.seq, err);
        });
        c.expanded = true;
        c.seq_rows = rows + 1;
        c.logits.resize(size_t(d_.n_vocab_));
        c.state.resize(size_t(d_.n_embd_));
        const float* features = on_chain ? chain.state.data() : nodes_[size_t(c.node_parent)].state.data();
        pending.push_back({c.seq, std::span(&c.token, 1), features, d_.n_embd_, nullptr, &c});
      }
    }

    // Candidates expanded per depth: about as many as the tree has room per chain step.
    size_t width() const { return size_t(std::max<int32_t>(1, room_ / std::max(d_.max_draft_tokens_, 1))); }

    EagleDraft& d_;
    int32_t room_;
    double chain_score_ = 1;
    std::vector<Node> nodes_;
  };

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
    return Pending{s.seq, history.subspan(first, size_t(last + 2) - first),
                   s.features.data() + size_t(s.base + int64_t(keep) - s.kept) * s.width, n_features_, &s};
  }

  // One head pass over every pending sequence's rows (all of one feature width); each
  // keeps its last row's logits and output state.
  void decode(const std::vector<Pending>& pending) {
    if (pending.empty()) return;
    const int32_t width = pending[0].width;
    std::vector<tsr_model_seq*> seqs;
    std::vector<const int32_t*> tokens;
    std::vector<size_t> counts;
    std::vector<const float*> features;
    for (const Pending& p : pending) {
      require(p.width == width, "eagle: rows of two feature widths in one head pass");
      seqs.push_back(p.seq), tokens.push_back(p.tokens.data()), counts.push_back(p.tokens.size());
      features.push_back(p.features);
    }
    logits_.resize(pending.size() * size_t(n_vocab_));
    states_.resize(pending.size() * size_t(n_embd_));
    call_host("eagle head decode", [&](tsr_error** e) {
      return host_->seqs_decode_features(model_, seqs.data(), tokens.data(), counts.data(), features.data(), width,
                                         seqs.size(), logits_.data(), states_.data(), e);
    });
    for (size_t i = 0; i < pending.size(); ++i) {
      const Pending& p = pending[i];
      if (p.owner != nullptr && width == n_features_) {
        p.owner->fed.insert(p.owner->fed.end(), p.tokens.begin(), p.tokens.end());
        p.owner->drop_consumed();
      }
      std::vector<float>& logits = p.owner != nullptr ? p.owner->logits : p.node->logits;
      std::vector<float>& state = p.owner != nullptr ? p.owner->state : p.node->state;
      std::copy_n(logits_.begin() + std::ptrdiff_t(i * size_t(n_vocab_)), n_vocab_, logits.begin());
      std::copy_n(states_.begin() + std::ptrdiff_t(i * size_t(n_embd_)), n_embd_, state.begin());
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
