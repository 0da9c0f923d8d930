// `tessera bench --kv-tier`: the time to first token of a request whose long prefix was
// cached but evicted from the pool, served from the host tier ([cache] host_memory),
// from the disk tier after a restart ([cache] disk_path), and recomputed, in the same
// run. The pool holds one context (max_seqs = 1), so a request of another prompt evicts
// the prefix between the two.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/config/config.h"

namespace tsr::app {

struct KvTierBenchOptions {
  int32_t prefix_len = 2000;  // tokens of the shared prefix (BOS included)
  int32_t suffix_len = 16;    // tokens after it, new in each request
  int32_t repetitions = 3;    // best of
  uint64_t seed = 1;
};

// Runs the benchmark with the host tier on (config's [cache] host_memory, or 4 GiB when
// unset) and off, then with the disk tier (in [cache] disk_path, or a temporary folder
// removed after); progress goes to the log, the result to the returned JSON.
nlohmann::json run_kv_tier_bench(Config config, const KvTierBenchOptions& options);

}  // namespace tsr::app
