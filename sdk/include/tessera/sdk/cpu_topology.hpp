// How many threads a CPU backend runs by default: one per physical core this process may
// use, as llama.cpp's default -t. SMT siblings share a core's vector units, so a second
// thread per core slows bandwidth- and FMA-bound kernels rather than helping them.
// Header-only. Thread-safety: may be called from any thread.
#pragma once

#include <fstream>
#include <set>
#include <string>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

namespace tsr::sdk {

// Physical cores among the CPUs in this process's affinity mask (Linux: cores are told
// apart by their thread_siblings_list in sysfs); elsewhere, or when sysfs is unreadable,
// the logical CPU count. At least 1.
inline int cpu_physical_cores() {
  const int logical = static_cast<int>(std::thread::hardware_concurrency());
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    std::set<std::string> cores;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &allowed)) continue;
      std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
      std::string siblings;
      if (!std::getline(in, siblings)) return logical > 0 ? logical : 1;
      cores.insert(siblings);
    }
    if (!cores.empty()) return static_cast<int>(cores.size());
  }
#endif
  return logical > 0 ? logical : 1;
}

}  // namespace tsr::sdk
