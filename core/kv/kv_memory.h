// The KV cache's memory budget: [cache] memory as set, or for "auto" (the default) a share
// of the memory free once the weights are loaded, stated in the log.
#pragma once

#include <cstdint>

#include "tessera/backend.h"

namespace tsr {

// `configured` when > 0. Else, on a backend whose memory is the host's, half of what this
// process could still take (host_memory_available: RAM or the cgroup's room), leaving the
// rest to the page cache, activations and other processes; on a device, 90 % of its free
// memory (vLLM's gpu_memory_utilization) less the `weight_bytes` loaded since the backend
// reported it. Throws tsr::Error when nothing is left, naming the numbers.
uint64_t kv_memory_budget(uint64_t configured, const tsr_device_props& props, uint64_t weight_bytes);

}  // namespace tsr
