// The host side of tsr_model_host: models that draft plugins run through the core, on
// the engine's backend, each sequence with a paged KV cache of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/config/config.h"
#include "core/plugin_host/backend.h"
#include "tessera/draft.h"

namespace tsr {

class LlamaModel;

class ModelHost {
 public:
  // `target` (outlives the host) is the engine's model, which feature models (EAGLE-3
  // heads) read embeddings from.
  ModelHost(Backend& backend, const Config& config, const LlamaModel& target);
  const tsr_model_host* table() const { return &table_; }
  // Where the engine's hidden states (tsr_draft_hidden) live now, for states_read: the
  // buffer they are read back through, which device backends need. Unset (or NULL), only
  // states in host-visible memory can be read.
  void set_states_buffer(std::function<const BackendBuffer*()> source) { states_buffer_ = std::move(source); }
  // Forward passes run for drafts so far (seq_decode and seqs_decode calls that ran).
  int64_t passes() const { return passes_; }

 private:
  friend struct ModelHostAccess;
  Backend& backend_;
  Config config_;
  const LlamaModel& target_;
  tsr_model_host table_;
  int64_t passes_ = 0;
  std::function<const BackendBuffer*()> states_buffer_;
};

}  // namespace tsr
