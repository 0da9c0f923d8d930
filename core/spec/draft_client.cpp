#include "core/spec/draft_client.h"

#include <fmt/format.h>

#include "base/error.h"
#include "core/plugin_host/host_services.h"

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

std::vector<int32_t> DraftClient::Seq::propose(std::span<const int32_t> history, int32_t k) {
  std::vector<int32_t> tokens(static_cast<size_t>(std::max(k, 0)));
  tsr_draft_proposal p{sizeof(tsr_draft_proposal), tokens.data(), nullptr, k, 0};
  call_plugin("draft '" + owner_.name_ + "' propose", [&](tsr_error** e) {
    return owner_.iface_->propose(owner_.handle_, handle_, history.data(), history.size(), &p, e);
  });
  return owner_.checked(std::move(tokens), p.n_tokens, k);
}

std::vector<int32_t> DraftClient::checked(std::vector<int32_t> tokens, int32_t n_tokens, int32_t k) const {
  if (n_tokens < 0 || n_tokens > k) {
    throw Error("draft '" + name_ + "' proposed " + std::to_string(n_tokens) + " tokens, at most " +
                    std::to_string(k) + " were asked for",
                TSR_STATUS_INTERNAL);
  }
  tokens.resize(static_cast<size_t>(n_tokens));
  for (const int32_t t : tokens) {
    if (t < 0 || t >= n_vocab_) {
      throw Error("draft '" + name_ + "' proposed token id " + std::to_string(t) + ", outside the vocabulary of " +
                      std::to_string(n_vocab_),
                  TSR_STATUS_INTERNAL);
    }
  }
  return tokens;
}

bool DraftClient::batches() const {
  return TSR_STRUCT_HAS(iface_, tsr_draft_iface, propose_batch) && iface_->propose_batch != nullptr;
}

std::vector<std::vector<int32_t>> DraftClient::propose_batch(std::span<const BatchItem> items) {
  const size_t n = items.size();
  std::vector<std::vector<int32_t>> tokens(n);
  std::vector<tsr_draft_proposal> proposals(n);
  std::vector<tsr_draft_proposal*> proposal_ptrs(n);
  std::vector<tsr_draft_seq*> seqs(n);
  std::vector<const int32_t*> histories(n);
  std::vector<size_t> lengths(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t k = std::max(items[i].k, 0);
    tokens[i].resize(static_cast<size_t>(k));
    proposals[i] = {sizeof(tsr_draft_proposal), tokens[i].data(), nullptr, k, 0};
    proposal_ptrs[i] = &proposals[i];
    seqs[i] = items[i].seq->handle_;
    histories[i] = items[i].history.data();
    lengths[i] = items[i].history.size();
  }
  call_plugin("draft '" + name_ + "' propose_batch", [&](tsr_error** e) {
    return iface_->propose_batch(handle_, seqs.data(), histories.data(), lengths.data(), proposal_ptrs.data(), n, e);
  });
  for (size_t i = 0; i < n; ++i) tokens[i] = checked(std::move(tokens[i]), proposals[i].n_tokens, proposals[i].capacity);
  return tokens;
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
