#include "core/kv/host_tier.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/common/kv_blocks.h"

namespace tsr {
namespace {

BlockHash hash_of(uint64_t i) { return BlockHash{i, ~i}; }

using testing::contents;

KvBlockBytes bytes_of(uint8_t v, uint64_t size = 4) {
  return testing::block_with(*testing::heap_arena(size), std::vector<uint8_t>(size, v));
}

TEST(KvHostTier, KeepsAtMostItsCapacityAndDropsTheLeastRecentlyUsed) {
  KvHostTier tier(/*capacity_bytes=*/10, /*block_bytes=*/4);  // two whole blocks
  ASSERT_EQ(tier.capacity_blocks(), 2u);
  tier.put(hash_of(1), bytes_of(1));
  tier.put(hash_of(2), bytes_of(2));
  ASSERT_NE(tier.find(hash_of(1)), nullptr);  // 1 is now the most recently used
  tier.put(hash_of(3), bytes_of(3));
  EXPECT_EQ(tier.num_blocks(), 2u);
  EXPECT_FALSE(tier.contains(hash_of(2)));
  const KvBlockBytes one = tier.find(hash_of(1));
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(contents(one), contents(bytes_of(1)));
  EXPECT_EQ(contents(tier.find(hash_of(3))), contents(bytes_of(3)));
  EXPECT_EQ(tier.find(hash_of(2)), nullptr);
  EXPECT_EQ(tier.stats().stored, 3u);
  EXPECT_EQ(tier.stats().evicted, 1u);
  EXPECT_EQ(tier.stats().hits, 3u);
}

TEST(KvHostTier, APutOfAHeldBlockOnlyRefreshesIt) {
  KvHostTier tier(8, 4);
  tier.put(hash_of(1), bytes_of(1));
  tier.put(hash_of(2), bytes_of(2));
  tier.put(hash_of(1), bytes_of(9));  // same content hash: the bytes are the same KV
  tier.put(hash_of(3), bytes_of(3));  // drops 2, the least recently used
  EXPECT_EQ(contents(tier.find(hash_of(1))), contents(bytes_of(1)));
  EXPECT_FALSE(tier.contains(hash_of(2)));
  EXPECT_EQ(tier.stats().stored, 3u);
}

TEST(KvHostTier, BytesHandedOutOutliveTheirEviction) {
  KvHostTier tier(4, 4);
  tier.put(hash_of(1), bytes_of(1));
  const KvBlockBytes held = tier.find(hash_of(1));
  tier.put(hash_of(2), bytes_of(2));
  EXPECT_FALSE(tier.contains(hash_of(1)));
  EXPECT_EQ(contents(held), contents(bytes_of(1)));  // a pending restore still has them
}

TEST(KvHostTier, ABlockOfTheWrongSizeIsRefused) {
  KvHostTier tier(16, 4);
  EXPECT_THROW(tier.put(hash_of(1), bytes_of(0, 3)), Error);
  EXPECT_EQ(tier.num_blocks(), 0u);
}

}  // namespace
}  // namespace tsr
