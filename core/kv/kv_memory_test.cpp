// The KV cache's memory budget: as configured, or "auto" from the host's or device's free memory.
#include "core/kv/kv_memory.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "core/kv/host_memory.h"

namespace tsr {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

tsr_device_props props(bool host_visible, uint64_t total, uint64_t free) {
  tsr_device_props p{};
  p.struct_size = sizeof p;
  p.host_visible = host_visible ? 1 : 0;
  p.memory_total = total;
  p.memory_free = free;
  return p;
}

TEST(KvMemory, AConfiguredSizeIsKept) {
  EXPECT_EQ(kv_memory_budget(3 * kGiB, props(true, 8 * kGiB, 0), 1 * kGiB), 3 * kGiB);
  EXPECT_EQ(kv_memory_budget(3 * kGiB, props(false, 80 * kGiB, 1 * kGiB), 2 * kGiB), 3 * kGiB);
}

TEST(KvMemory, AutoOnTheHostTakesHalfOfWhatIsAvailable) {
  const uint64_t available = host_memory_available();
  ASSERT_GT(available, 0u) << "/proc/meminfo has no MemAvailable";
  EXPECT_LE(available, host_memory_limit());
  const uint64_t budget = kv_memory_budget(0, props(true, 0, 0), 0);
  // Memory moves while the test runs: within an eighth of half the figure read just now.
  EXPECT_NEAR(double(budget), double(available / 2), double(available) / 8);
}

TEST(KvMemory, AutoOnADeviceTakesNinetyPercentOfTheFreeMemoryLessTheWeights) {
  // The weights were loaded after the backend reported its free memory.
  EXPECT_EQ(kv_memory_budget(0, props(false, 80 * kGiB, 40 * kGiB), 6 * kGiB), 36 * kGiB - 6 * kGiB);
  // No free figure: the total stands for it.
  EXPECT_EQ(kv_memory_budget(0, props(false, 10 * kGiB, 0), 0), 9 * kGiB);
}

TEST(KvMemory, AutoOnADeviceFullOfWeightsIsRefusedWithTheNumbers) {
  try {
    kv_memory_budget(0, props(false, 16 * kGiB, 10 * kGiB), 12 * kGiB);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("10.00 GiB"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("12.00 GiB"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[cache] memory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tsr
