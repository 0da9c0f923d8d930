// The host memory limit and the refusal of a KV pool larger than it.
#include "core/kv/host_memory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "base/error.h"

namespace tsr {
namespace {

TEST(HostMemory, LimitIsAtMostTheRam) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  in >> key >> kib;
  ASSERT_EQ(key, "MemTotal:");
  const uint64_t limit = host_memory_limit();
  EXPECT_GT(limit, 0u);
  EXPECT_LE(limit, kib * 1024);
}

TEST(HostMemory, APoolBeyondTheLimitIsRefusedWithTheNumbers) {
  const uint64_t gib = 1ull << 30;
  check_host_kv_memory(2 * gib, 0, 4 * gib);
  check_host_kv_memory(64 * gib, 0, 0);  // unknown limit: accepted
  try {
    check_host_kv_memory(64 * gib, 0, 24 * gib);
    FAIL() << "a 64 GiB pool was accepted under a 24 GiB limit";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("64.00 GiB"), std::string::npos) << what;
    EXPECT_NE(what.find("24.00 GiB"), std::string::npos) << what;
    EXPECT_NE(what.find("[cache] memory"), std::string::npos) << what;
    EXPECT_EQ(e.status(), TSR_STATUS_OUT_OF_MEMORY);
  }
}

TEST(HostMemory, AHostTierCountsWithThePool) {
  const uint64_t gib = 1ull << 30;
  check_host_kv_memory(2 * gib, 2 * gib, 4 * gib);
  try {
    check_host_kv_memory(0, 8 * gib, 4 * gib);  // a device pool: the tier alone
    FAIL() << "an 8 GiB host tier was accepted under a 4 GiB limit";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("host tier 8.00 GiB"), std::string::npos) << what;
    EXPECT_NE(what.find("[cache] host_memory"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tsr
