// `tessera bench -m MODEL`: start-up (load to first token), prompt processing (pp512), text generation (tg128), batched
// decode at B = 1, 4, 16, and the machine's memory read bandwidth measured in the same
// run, which bounds decode: every step reads every weight once (the roofline).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/config.h"

namespace tsr::app {

struct EngineBenchOptions {
  int32_t pp_tokens = 512;
  int32_t tg_tokens = 128;
  int32_t depth = 0;         // tokens in the context before the decode test (llama-bench's -d); at least 8
  std::vector<int32_t> batches{1, 4, 16};
  int32_t batch_steps = 32;  // decode steps timed per batch size
  int32_t repetitions = 3;   // best of
};

// Runs the benchmark; progress goes to the log, the result to the returned JSON.
nlohmann::json run_engine_bench(const Config& config, const EngineBenchOptions& options);

}  // namespace tsr::app
