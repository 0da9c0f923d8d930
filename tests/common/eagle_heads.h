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
#include "core/quant/quant.h"

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
  Eagle3Shape s;
  s.n_embd = hp.n_embd, s.n_head = hp.n_head, s.n_head_kv = hp.n_head_kv, s.n_ff = hp.n_ff;
  s.n_vocab = hp.n_vocab, s.target_n_embd = hp.n_embd, s.n_ctx = hp.n_ctx_train;
  s.rms_eps = hp.rms_eps, s.rope_base = hp.rope_freq_base, s.layers = layers;
  Eagle3Weights head = eagle3_random(s, 5, 1.0f, false);
  const auto f32 = [&](const char* name) {
    const GgufTensorInfo* t = gguf->find_tensor(name);
    return quant::dequantize(t->type, {gguf->tensor_data(*t), t->nbytes}, t->nelements);
  };
  head.output = f32(gguf->find_tensor("output.weight") ? "output.weight" : "token_embd.weight");
  const std::vector<float> embeddings = f32("token_embd.weight");
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
