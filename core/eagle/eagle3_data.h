// The texts an EAGLE-3 head trains on: the target writes them itself (sampled from
// prompts), and for each position the data keeps the states of the head's target layers
// (its features) and the target's distribution of the next token (its training target).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/eagle/eagle3_trainer.h"
#include "core/model/llama_model.h"
#include "core/plugin_host/backend.h"

namespace tsr {

struct Eagle3DataOptions {
  int32_t texts = 256;       // how many texts
  int32_t tokens = 256;      // tokens per text, prompt included
  float temperature = 1.0f;  // the sampling of the texts (0: greedy)
  uint64_t seed = 1;
};

// `prompts` (cycled; none empty) open the texts; `progress` (can be empty) hears each text done.
std::vector<Eagle3Sequence> eagle3_generate_texts(const LlamaModel& target, Backend& backend,
                                                  const std::vector<int32_t>& layers,
                                                  const std::vector<std::vector<int32_t>>& prompts,
                                                  const Eagle3DataOptions& options,
                                                  const std::function<void(int32_t)>& progress = {});

// Layers for a target of n_layer layers where a head names none: llama.cpp's 2, n/2 and
// n - 3 where they are distinct, else the first layer's output, the middle and the last.
std::vector<int32_t> eagle3_default_layers(int32_t n_layer);

}  // namespace tsr
