// The host's view of a draft plugin: one tsr_draft per engine and a sequence per request,
// with failures turned into tsr::Error. Step-thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include "core/config/config.h"
#include "core/plugin_host/plugin_loader.h"
#include "tessera/draft.h"

namespace tsr {

class DraftClient {
 public:
  // What a draft learns of the target model.
  struct TargetShape {
    uint64_t n_params = 0;
    int32_t n_layer = 0;
    int32_t n_embd = 0;
  };
  // `vocab` (the target's token texts) and `target` let the draft refuse an incompatible
  // or oversized model; `model_host` serves drafts that need a model. A draft needing
  // hidden states is asked for its layers here (hidden_layers()).
  DraftClient(std::shared_ptr<Plugin> plugin, const SpeculativeConfig& config,
              const std::vector<std::string>& vocab, const TargetShape& target,
              const tsr_model_host* model_host, int32_t n_threads);
  ~DraftClient();
  DraftClient(const DraftClient&) = delete;
  DraftClient& operator=(const DraftClient&) = delete;

  // Proposed tokens: a chain (parents empty) or a tree (Request::draft_parents).
  struct Proposal {
    std::vector<int32_t> tokens, parents;
    void prepare(tsr_draft_proposal& p, int32_t k, int32_t tree, const tsr_draft_sampling* sampling);
  };
  class Seq {
   public:
    ~Seq();
    // A chain of up to k tokens to follow `history`, or with tree > k a tree of up to
    // `tree` tokens whose paths hold k at most (ABI 2.8; a draft may still propose a chain).
    // `sampling` (can be NULL: greedy) says how the target draws those positions (ABI 2.9).
    Proposal propose(std::span<const int32_t> history, int32_t k, int32_t tree = 0,
                     const tsr_draft_sampling* sampling = nullptr);
    void on_verified(int32_t n_accepted, int32_t next_token);
    // The target's states at hidden_layers() for consecutive positions from first_position
    // (TSR_DRAFT_NEEDS_HIDDEN drafts): f32 [layers, rows, n_embd] in backend memory.
    void on_hidden(const tsr_tensor& states, int64_t first_position);

   private:
    friend class DraftClient;
    Seq(DraftClient& owner, tsr_draft_seq* handle) : owner_(owner), handle_(handle) {}
    DraftClient& owner_;
    tsr_draft_seq* handle_;
  };

  std::unique_ptr<Seq> open(std::span<const int32_t> prompt);
  const std::string& name() const { return name_; }
  bool runs_model() const { return (iface_->needs & TSR_DRAFT_NEEDS_MODEL) != 0; }
  // The target layers whose states the draft takes; empty when it needs none.
  const std::vector<int32_t>& hidden_layers() const { return hidden_layers_; }

  // One request of propose_batch: its sequence, its history, the most tokens on a path and
  // of a tree (0: a chain), and its draws (NULL: greedy).
  struct BatchItem {
    Seq* seq;
    std::span<const int32_t> history;
    int32_t k;
    int32_t tree = 0;
    const tsr_draft_sampling* sampling = nullptr;
  };
  // The draft proposes for several requests in one call (ABI 2.6 propose_batch).
  bool batches() const;
  // Proposals for each item, in order, from one propose_batch call; throws when the call
  // fails or any proposal is malformed (then none is used).
  std::vector<Proposal> propose_batch(std::span<const BatchItem> items);

 private:
  void check(Proposal& out, const tsr_draft_proposal& p) const;
  std::vector<int32_t> query_hidden_layers(int32_t n_layer) const;

  std::shared_ptr<Plugin> plugin_;  // keeps the library loaded while the handle lives
  const tsr_draft_iface* iface_;
  tsr_draft* handle_ = nullptr;
  std::string name_;
  int32_t n_vocab_ = 0;  // proposals must be ids below it
  std::vector<int32_t> hidden_layers_;
};

}  // namespace tsr
