// The host side of tsr_model_host: models that draft plugins run through the core, on
// the engine's backend, each sequence with a paged KV cache of its own.
#pragma once

#include <memory>

#include "core/config/config.h"
#include "core/plugin_host/backend.h"
#include "tessera/draft.h"

namespace tsr {

class ModelHost {
 public:
  ModelHost(Backend& backend, const Config& config);
  const tsr_model_host* table() const { return &table_; }

 private:
  friend struct ModelHostAccess;
  Backend& backend_;
  Config config_;
  tsr_model_host table_;
};

}  // namespace tsr
