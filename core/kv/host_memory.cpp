#include "core/kv/host_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"

namespace tsr {

namespace {

// A /proc/meminfo field ("MemTotal:"), in bytes; 0 when absent.
uint64_t meminfo(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    uint64_t kib = 0;
    if (key == field && in >> kib) return kib * 1024;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

uint64_t mem_total() { return meminfo("MemTotal:"); }

// The first number in `path` ("max" or an absent file: no limit).
uint64_t read_limit(const std::string& path) {
  std::ifstream in(path);
  uint64_t value = 0;
  return in >> value ? value : 0;
}

// This process's cgroup v2 path ("0::/path" in /proc/self/cgroup).
std::string cgroup_v2_path() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("0::")) return line.substr(3);
  }
  return {};
}

// The cgroup's memory file `v2` (v1: `v1`) of this process; 0 when none can be read.
uint64_t cgroup_value(const std::string& v2_file, const std::string& v1_file) {
  const std::string v2 = cgroup_v2_path();
  if (!v2.empty()) {
    if (const uint64_t value = read_limit("/sys/fs/cgroup" + v2 + "/" + v2_file)) return value;
    if (const uint64_t value = read_limit("/sys/fs/cgroup/" + v2_file)) return value;
  }
  return read_limit("/sys/fs/cgroup/memory/" + v1_file);
}

uint64_t cgroup_limit() { return cgroup_value("memory.max", "memory.limit_in_bytes"); }

std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", double(bytes) / double(1ull << 30)); }

}  // namespace

uint64_t host_memory_limit() {
  const uint64_t total = mem_total(), cgroup = cgroup_limit();
  if (total == 0) return cgroup;
  return cgroup == 0 ? total : std::min(total, cgroup);
}

uint64_t host_memory_available() {
  const uint64_t available = meminfo("MemAvailable:"), limit = cgroup_limit();
  if (limit == 0) return available;
  const uint64_t used = cgroup_value("memory.current", "memory.usage_in_bytes");
  const uint64_t room = limit > used ? limit - used : 0;
  return available == 0 ? room : std::min(available, room);
}

void check_host_kv_memory(uint64_t pool_bytes, uint64_t tier_bytes, uint64_t limit) {
  if (limit == 0 || pool_bytes + tier_bytes <= limit) return;
  const std::string parts = tier_bytes == 0 ? "" : " (pool " + gib(pool_bytes) + ", host tier " + gib(tier_bytes) + ")";
  throw Error("the KV cache would take " + gib(pool_bytes + tier_bytes) + parts + " of host memory, more than the " +
                  gib(limit) + " this process may use (RAM, or its cgroup's limit); lower [cache] memory, " +
                  (tier_bytes == 0 ? "" : "[cache] host_memory, ") + "the context (-c) or [scheduler] max_seqs",
              TSR_STATUS_OUT_OF_MEMORY);
}

}  // namespace tsr
