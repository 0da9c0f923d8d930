// EAGLE-3 heads for tests: one trained briefly on the CPU for a target in ../shared (the
// `tessera train-eagle` pipeline, small), so that speculation with it accepts drafts.
#pragma once

#include <string>
#include <vector>

#include "core/eagle/eagle3_data.h"
#include "core/eagle/eagle3_head.h"
#include "core/eagle/eagle3_trainer.h"
#include "core/model/gguf.h"
#include "core/model/llama_model.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"

namespace tsr::testing {

// Trains a head for the target at `target_path` on `texts` texts of `tokens` tokens it
// writes (greedy-ish: temperature 0.5), `epochs` passes, and writes it to `out`. (A head
// drafts well only at positions its texts reached.)
inline void write_trained_head(const std::string& target_path, const std::string& out, int32_t texts = 64,
                               int32_t epochs = 8, int32_t tokens = 96) {
  auto backend = Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, "cpu", {TESSERA_PLUGIN_DIR}), 0, 1);
  std::shared_ptr<const GgufFile> gguf = GgufFile::open(target_path);
  auto target = LlamaModel::load(gguf, *backend);
  const LlamaHParams& hp = target->hparams();
  const std::vector<int32_t> layers = eagle3_default_layers(hp.n_layer);
  const std::vector<Eagle3Sequence> data =
      eagle3_generate_texts(*target, *backend, layers, {{1}}, Eagle3DataOptions{texts, tokens, 0.5f, 3});
  Eagle3Weights head = eagle3_initial_head(*gguf, hp, layers, 0, 5);
  const std::vector<float> embeddings = eagle3_target_tensor(*gguf, "token_embd.weight");
  Eagle3Trainer trainer(head, embeddings, Eagle3TrainOptions{});
  for (int32_t epoch = 0; epoch < epochs; ++epoch) {
    for (size_t i = 0; i < data.size(); i += 4) {
      for (size_t j = i; j < std::min(data.size(), i + 4); ++j) trainer.accumulate(data[j]);
      trainer.step(5e-3f, 4);
    }
  }
  eagle3_write(head, out);
}

}  // namespace tsr::testing
