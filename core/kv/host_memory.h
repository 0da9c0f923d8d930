// The memory this process may use on the host: the machine's RAM, or less where a cgroup
// limits it (containers, systemd units). A KV pool in host memory larger than that would
// be faulted in block by block until the kernel's OOM killer ends the process, so the
// engine refuses it at start with the numbers instead.
#pragma once

#include <cstdint>

namespace tsr {

// min(MemTotal, the cgroup v2 memory.max or v1 memory.limit_in_bytes of this process);
// 0 when none can be read.
uint64_t host_memory_limit();

// What this process could still take on the host: min(MemAvailable, the cgroup's limit less
// its current usage); 0 when none can be read.
uint64_t host_memory_available();

// Throws tsr::Error when a KV pool of `pool_bytes` in host memory (0 for a pool in device
// memory) and a host tier of `tier_bytes` together exceed `limit` (0: unknown, accepted),
// naming the sizes and what to lower. Weights are not counted: mapped from the file, they
// can be paged, and llama.cpp runs files larger than the RAM too.
void check_host_kv_memory(uint64_t pool_bytes, uint64_t tier_bytes, uint64_t limit);

}  // namespace tsr
