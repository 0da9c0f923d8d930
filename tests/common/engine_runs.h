// Driving an Engine to completion in tests: greedy requests and a batch run by stepping.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/engine/engine.h"

namespace tsr::testing {

// A greedy request for exactly `max_tokens` tokens (EOS ignored).
inline RequestParams greedy_request(std::vector<int32_t> prompt, int32_t max_tokens) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  return p;
}

// Submits all requests at once and steps until every one finished; their tokens, in order.
inline std::vector<std::vector<int32_t>> run_batch(Engine& engine, const std::vector<RequestParams>& batch) {
  std::vector<std::vector<int32_t>> outputs(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    engine.submit(batch[i], [&outputs, i](const RequestOutput& out) {
      outputs[i].insert(outputs[i].end(), out.tokens.begin(), out.tokens.end());
    });
  }
  while (engine.step()) {
  }
  return outputs;
}

}  // namespace tsr::testing
