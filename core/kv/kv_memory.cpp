#include "core/kv/kv_memory.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "core/kv/host_memory.h"

namespace tsr {

namespace {

std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", double(bytes) / double(1ull << 30)); }

}  // namespace

uint64_t kv_memory_budget(uint64_t configured, const tsr_device_props& props, uint64_t weight_bytes) {
  if (configured > 0) return configured;
  if (props.host_visible != 0) {
    const uint64_t available = host_memory_available();
    if (available == 0) {
      spdlog::warn("KV cache memory: auto, and the free host memory cannot be read: 2 GiB (set [cache] memory)");
      return 2ull << 30;
    }
    spdlog::info("KV cache memory: auto, {} (half of the {} this process can still take; set [cache] memory to "
                 "choose)", gib(available / 2), gib(available));
    return available / 2;
  }
  const uint64_t free = props.memory_free != 0 ? props.memory_free : props.memory_total;
  const uint64_t usable = free / 10 * 9;
  if (usable <= weight_bytes) {
    throw Error(fmt::format("KV cache memory: auto, and the device's {} free hold no more than the weights ({}): "
                            "set [cache] memory",
                            gib(free), gib(weight_bytes)),
                TSR_STATUS_OUT_OF_MEMORY);
  }
  spdlog::info("KV cache memory: auto, {} (90 % of the device's {} free, less {} of weights; set [cache] memory "
               "to choose)", gib(usable - weight_bytes), gib(free), gib(weight_bytes));
  return usable - weight_bytes;
}

}  // namespace tsr
