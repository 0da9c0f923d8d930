#include "core/spec/draft_client.h"

#include <fmt/format.h>

#include "base/error.h"
#include "core/plugin_host/host_services.h"
#include "core/request/draft_tree.h"

namespace tsr {

namespace {

// A draft whose needs this host cannot serve is refused before it is created, naming them:
// accepting it would run it without what it asked for.
void check_needs(uint32_t needs, const std::string& name) {
  constexpr uint32_t kKnown = TSR_DRAFT_NEEDS_TOKENS | TSR_DRAFT_NEEDS_HIDDEN | TSR_DRAFT_NEEDS_MODEL;
  if ((needs & ~kKnown) != 0) {
    throw Error("draft '" + name + "' declares needs flags 0x" + fmt::format("{:x}", needs & ~kKnown) +
                    " that this host does not know (it knows TSR_DRAFT_NEEDS_TOKENS, _HIDDEN and _MODEL)",
                TSR_STATUS_UNSUPPORTED);
  }
}

// A draft needing hidden states says which layers (hidden_layers) and takes them
// (on_hidden): entries a plugin built before ABI 2.6 does not have.
void check_hidden_entries(const tsr_draft_iface& t, const std::string& name) {
  if ((t.needs & TSR_DRAFT_NEEDS_HIDDEN) == 0) return;
  if (!TSR_STRUCT_HAS(&t, tsr_draft_iface, on_hidden) || t.hidden_layers == nullptr || t.on_hidden == nullptr) {
    throw Error("draft '" + name + "' needs the target's hidden states (TSR_DRAFT_NEEDS_HIDDEN) but has no "
                    "hidden_layers and on_hidden entries (ABI 2.6) to take them through",
                TSR_STATUS_UNSUPPORTED);
  }
}

}  // namespace

std::vector<int32_t> DraftClient::query_hidden_layers(int32_t n_layer) const {
  std::vector<int32_t> layers(TSR_DRAFT_MAX_HIDDEN_LAYERS);
  int32_t n = -1;
  call_plugin("draft '" + name_ + "' hidden_layers", [&](tsr_error** e) {
    n = iface_->hidden_layers(handle_, layers.data(), e);
    return n < 0 ? TSR_STATUS_INVALID_ARGUMENT : TSR_STATUS_OK;
  });
  if (n < 1 || n > TSR_DRAFT_MAX_HIDDEN_LAYERS) {
    throw Error("draft '" + name_ + "' asked for hidden states of " + std::to_string(n) + " layers (1 to " +
                    std::to_string(TSR_DRAFT_MAX_HIDDEN_LAYERS) + ")",
                TSR_STATUS_UNSUPPORTED);
  }
  layers.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    if (layers[i] < 0 || layers[i] > n_layer || (i > 0 && layers[i] <= layers[i - 1])) {
      throw Error("draft '" + name_ + "' asked for the hidden states of layer " + std::to_string(layers[i]) +
                      ": layers must be strictly increasing, from 0 (the embeddings) to the target's " +
                      std::to_string(n_layer) + " (its last layer's output)",
                  TSR_STATUS_UNSUPPORTED);
    }
  }
  return layers;
}

namespace {

}  // namespace

DraftClient::DraftClient(std::shared_ptr<Plugin> plugin, const SpeculativeConfig& config,
                         const std::vector<std::string>& vocab, const TargetShape& target,
                         const tsr_model_host* model_host, int32_t n_threads)
    : plugin_(std::move(plugin)),
      iface_(static_cast<const tsr_draft_iface*>(plugin_->iface())),
      name_(plugin_->name()),
      n_vocab_(static_cast<int32_t>(vocab.size())) {
  check_needs(iface_->needs, name_);
  check_hidden_entries(*iface_, name_);
  tsr_draft_params p{};
  p.struct_size = sizeof(p);
  std::vector<const char*> texts;
  for (const std::string& t : vocab) texts.push_back(t.c_str());
  p.n_vocab = static_cast<int32_t>(vocab.size());
  p.vocab = texts.data();
  p.target_n_params = target.n_params;
  p.target_n_layer = target.n_layer;
  p.target_n_embd = target.n_embd;
  p.model_host = model_host;
  p.max_draft_tokens = config.num_draft_tokens;
  p.ngram_min = config.ngram_min;
  p.ngram_max = config.ngram_max;
  p.model_path = config.draft_model.empty() ? nullptr : config.draft_model.c_str();
  p.n_threads = n_threads;
  call_plugin("draft '" + name_ + "'",
              [&](tsr_error** e) { return iface_->draft_create(&p, &handle_, e); });
  if ((iface_->needs & TSR_DRAFT_NEEDS_HIDDEN) == 0) return;
  try {
    hidden_layers_ = query_hidden_layers(target.n_layer);
  } catch (...) {
    iface_->draft_destroy(handle_);
    throw;
  }
}

DraftClient::~DraftClient() { iface_->draft_destroy(handle_); }

std::unique_ptr<DraftClient::Seq> DraftClient::open(std::span<const int32_t> prompt) {
  tsr_draft_seq* seq = nullptr;
  call_plugin("draft '" + name_ + "' seq_create", [&](tsr_error** e) {
    return iface_->seq_create(handle_, prompt.data(), prompt.size(), &seq, e);
  });
  return std::unique_ptr<Seq>(new Seq(*this, seq));
}

DraftClient::Seq::~Seq() { owner_.iface_->seq_destroy(owner_.handle_, handle_); }

// The proposal buffers of one request: room for k tokens, or for a tree of `tree` (ABI 2.8:
// parents preset to a chain, which a draft that writes none proposes).
void DraftClient::Proposal::prepare(tsr_draft_proposal& p, int32_t k, int32_t tree,
                                    const tsr_draft_sampling* sampling) {
  k = std::max(k, 0);
  tree = tree > k ? tree : 0;
  tokens.assign(static_cast<size_t>(std::max(k, tree)), 0);
  parents.resize(static_cast<size_t>(tree));
  for (size_t i = 0; i < parents.size(); ++i) parents[i] = int32_t(i) - 1;
  p = {sizeof(tsr_draft_proposal), tokens.data(), nullptr, k, 0, tree > 0 ? parents.data() : nullptr, tree, 0, sampling};
}

DraftClient::Proposal DraftClient::Seq::propose(std::span<const int32_t> history, int32_t k, int32_t tree,
                                                const tsr_draft_sampling* sampling) {
  Proposal out;
  tsr_draft_proposal p;
  out.prepare(p, k, tree, sampling);
  call_plugin("draft '" + owner_.name_ + "' propose", [&](tsr_error** e) {
    return owner_.iface_->propose(owner_.handle_, handle_, history.data(), history.size(), &p, e);
  });
  owner_.check(out, p);
  return out;
}

// Keeps the tokens proposed and checks them: a count within the capacity, ids in the
// vocabulary, and for a tree, parents before their children, paths no longer than k and
// distinct siblings. A tree that is a chain drops its parents.
void DraftClient::check(Proposal& out, const tsr_draft_proposal& p) const {
  const int32_t room = p.parents != nullptr ? p.tree_capacity : p.capacity;
  auto fail = [&](const std::string& what) { throw Error("draft '" + name_ + "' " + what, TSR_STATUS_INTERNAL); };
  if (p.n_tokens < 0 || p.n_tokens > room) {
    fail("proposed " + std::to_string(p.n_tokens) + " tokens, at most " + std::to_string(room) + " were asked for");
  }
  const auto n = static_cast<size_t>(p.n_tokens);
  out.tokens.resize(n);
  out.parents.resize(p.parents != nullptr ? n : 0);
  for (const int32_t t : out.tokens) {
    if (t < 0 || t >= n_vocab_) {
      fail("proposed token id " + std::to_string(t) + ", outside the vocabulary of " + std::to_string(n_vocab_));
    }
  }
  for (size_t i = 0; i < out.parents.size(); ++i) {
    const int32_t parent = out.parents[i];
    if (parent < -1 || parent >= int32_t(i)) fail("proposed a tree whose token " + std::to_string(i) + " follows no earlier one");
  }
  const std::vector<int32_t> depth = draft_tree_depths(out.parents);
  bool chain = true;
  for (size_t i = 0; i < out.parents.size(); ++i) {
    const int32_t parent = out.parents[i];
    if (depth[i] > p.capacity) fail("proposed a path of " + std::to_string(depth[i]) + " tokens, longer than " + std::to_string(p.capacity));
    for (size_t j = 0; j < i; ++j) {
      if (out.parents[j] == parent && out.tokens[j] == out.tokens[i]) fail("proposed the same token twice after one token");
    }
    chain = chain && parent == int32_t(i) - 1;
  }
  if (chain) out.parents.clear();
}

bool DraftClient::batches() const {
  return TSR_STRUCT_HAS(iface_, tsr_draft_iface, propose_batch) && iface_->propose_batch != nullptr;
}

std::vector<DraftClient::Proposal> DraftClient::propose_batch(std::span<const BatchItem> items) {
  const size_t n = items.size();
  std::vector<Proposal> out(n);
  std::vector<tsr_draft_proposal> proposals(n);
  std::vector<tsr_draft_proposal*> proposal_ptrs(n);
  std::vector<tsr_draft_seq*> seqs(n);
  std::vector<const int32_t*> histories(n);
  std::vector<size_t> lengths(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].prepare(proposals[i], items[i].k, items[i].tree, items[i].sampling);
    proposal_ptrs[i] = &proposals[i];
    seqs[i] = items[i].seq->handle_;
    histories[i] = items[i].history.data();
    lengths[i] = items[i].history.size();
  }
  call_plugin("draft '" + name_ + "' propose_batch", [&](tsr_error** e) {
    return iface_->propose_batch(handle_, seqs.data(), histories.data(), lengths.data(), proposal_ptrs.data(), n, e);
  });
  for (size_t i = 0; i < n; ++i) check(out[i], proposals[i]);
  return out;
}

void DraftClient::Seq::on_hidden(const tsr_tensor& states, int64_t first_position) {
  const tsr_draft_hidden h{sizeof(tsr_draft_hidden), &states, first_position};
  call_plugin("draft '" + owner_.name_ + "' on_hidden",
              [&](tsr_error** e) { return owner_.iface_->on_hidden(owner_.handle_, handle_, &h, e); });
}

void DraftClient::Seq::on_verified(int32_t n_accepted, int32_t next_token) {
  call_plugin("draft '" + owner_.name_ + "' on_verified", [&](tsr_error** e) {
    return owner_.iface_->on_verified(owner_.handle_, handle_, n_accepted, next_token, e);
  });
}

}  // namespace tsr
