#include "core/kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>

#include "tests/common/kv_blocks.h"
#include "tests/common/scratch_dir.h"

namespace tsr {
namespace {

std::vector<int32_t> iota_tokens(int n, int start = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

std::vector<int32_t> ids(std::span<KvBlock* const> blocks) {
  std::vector<int32_t> out;
  for (const KvBlock* b : blocks) out.push_back(b->id);
  return out;
}

TEST(FreeBlockQueue, IsLruAndRemovesInConstantTime) {
  BlockPool pool(4, true);
  std::vector<KvBlock*> got;
  ASSERT_TRUE(pool.allocate(4, got));
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_FALSE(pool.allocate(1, got));
  pool.release(got[2]);
  pool.release(got[0]);
  std::vector<KvBlock*> again;
  ASSERT_TRUE(pool.allocate(1, again));
  EXPECT_EQ(again[0]->id, 2);  // least recently freed first
}

TEST(KvCacheManager, AllocatesWholeBlocksAndFreesAll) {
  KvCacheManager kv(8, 4, true);
  ASSERT_TRUE(kv.allocate(1, 10, 0));
  EXPECT_EQ(kv.blocks(1).size(), 3u);
  ASSERT_TRUE(kv.allocate(1, 12, 10));
  EXPECT_EQ(kv.blocks(1).size(), 3u);
  ASSERT_TRUE(kv.allocate(1, 13, 12));
  EXPECT_EQ(kv.blocks(1).size(), 4u);
  EXPECT_FALSE(kv.allocate(2, 20, 0));  // 5 blocks, 4 free: refused, nothing taken
  EXPECT_EQ(kv.num_free_blocks(), 4);
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 8);
}

TEST(KvCacheManager, SharesCachedPrefixAcrossSequences) {
  KvCacheManager kv(16, 4, true);
  const auto tokens = iota_tokens(10);
  ASSERT_TRUE(kv.allocate(1, 10, 0));
  kv.commit(1, tokens, 10, 0);
  EXPECT_EQ(kv.pool().num_cached(), 2);  // two full blocks
  // Same first 8 tokens, different tail: both full blocks are reused.
  auto other = tokens;
  other[9] = 99;
  EXPECT_EQ(kv.claim_cached_prefix(2, other, 0), 8);
  EXPECT_EQ(kv.blocks(2)[0], kv.blocks(1)[0]);
  EXPECT_EQ(kv.blocks(2)[0]->ref_cnt, 2);
  // Another salt sees nothing.
  EXPECT_EQ(kv.claim_cached_prefix(3, other, 42), 0);
}

TEST(KvCacheManager, LeavesTheLastTokenToCompute) {
  KvCacheManager kv(16, 4, true);
  const auto tokens = iota_tokens(8);
  ASSERT_TRUE(kv.allocate(1, 8, 0));
  kv.commit(1, tokens, 8, 0);
  EXPECT_EQ(kv.claim_cached_prefix(2, tokens, 0), 4);  // 8 cached, but 7 usable -> 1 block
}

TEST(KvCacheManager, CachedBlocksSurviveFreeUntilEvicted) {
  KvCacheManager kv(4, 4, true);
  const auto tokens = iota_tokens(9);
  ASSERT_TRUE(kv.allocate(1, 9, 0));
  kv.commit(1, tokens, 9, 0);
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 4);
  EXPECT_EQ(kv.pool().num_cached(), 2);
  EXPECT_EQ(kv.claim_cached_prefix(2, tokens, 0), 8);
  kv.free(2);
  // A sequence that needs the whole pool evicts the cached blocks.
  ASSERT_TRUE(kv.allocate(3, 16, 0));
  EXPECT_EQ(kv.pool().num_cached(), 0);
}

TEST(KvCacheManager, ForkSharesAndCopyOnWriteSeparates) {
  KvCacheManager kv(8, 4, true);
  ASSERT_TRUE(kv.allocate(1, 6, 0));  // blocks: one full, one partial
  kv.fork(1, 2);
  EXPECT_EQ(ids(kv.blocks(1)), ids(kv.blocks(2)));
  EXPECT_EQ(kv.blocks(1)[1]->ref_cnt, 2);
  // Sequence 2 writes position 6 inside the shared partial block: it gets a copy.
  ASSERT_TRUE(kv.allocate(2, 7, 6));
  const auto copies = kv.take_copies();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].first, kv.blocks(1)[1]->id);
  EXPECT_EQ(copies[0].second, kv.blocks(2)[1]->id);
  EXPECT_NE(kv.blocks(1)[1], kv.blocks(2)[1]);
  EXPECT_EQ(kv.blocks(1)[0], kv.blocks(2)[0]);  // the full block stays shared
  EXPECT_EQ(kv.blocks(1)[1]->ref_cnt, 1);
  // Sequence 1 now owns its partial block alone: no copy.
  ASSERT_TRUE(kv.allocate(1, 7, 6));
  EXPECT_TRUE(kv.take_copies().empty());
  kv.free(1);
  kv.free(2);
  EXPECT_EQ(kv.num_free_blocks(), 8);
}

// A fork taken inside its origin's tokens (the model host's seq_fork: fork, then truncate
// the child to n) keeps only the blocks of its first n positions; a write spanning several
// shared blocks copies each of them, so the other sequence's positions stay intact.
TEST(KvCacheManager, TruncatedForkCopiesEverySharedBlockItWrites) {
  KvCacheManager kv(16, 4, false);
  ASSERT_TRUE(kv.allocate(1, 14, 0));  // four blocks
  kv.fork(1, 2);
  kv.truncate(2, 6);
  ASSERT_EQ(kv.blocks(2).size(), 2u);
  EXPECT_EQ(kv.blocks(1)[3]->ref_cnt, 1);  // released by the child
  // Sequence 1 rewrites positions 2..9 (after a rollback): blocks 0 and 1 are shared.
  ASSERT_TRUE(kv.allocate(1, 10, 2));
  const auto copies = kv.take_copies();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].first, kv.blocks(2)[0]->id);
  EXPECT_EQ(copies[1].first, kv.blocks(2)[1]->id);
  EXPECT_NE(kv.blocks(1)[0], kv.blocks(2)[0]);
  EXPECT_NE(kv.blocks(1)[1], kv.blocks(2)[1]);
  kv.free(1);
  kv.free(2);
  EXPECT_EQ(kv.num_free_blocks(), 16);
}

TEST(KvCacheManager, DraftTokensNeverEnterTheCache) {
  KvCacheManager kv(8, 4, true);
  const auto tokens = iota_tokens(8);
  ASSERT_TRUE(kv.allocate(1, 8, 0));
  kv.commit(1, tokens, 5, 0);  // 3 of the 8 positions hold unverified draft tokens
  EXPECT_EQ(kv.pool().num_cached(), 1);
}

TEST(KvCacheManager, WithoutCachingNothingIsShared) {
  KvCacheManager kv(8, 4, false);
  const auto tokens = iota_tokens(9);
  ASSERT_TRUE(kv.allocate(1, 9, 0));
  kv.commit(1, tokens, 9, 0);
  EXPECT_EQ(kv.claim_cached_prefix(2, tokens, 0), 0);
  EXPECT_EQ(kv.pool().num_cached(), 0);
}

// What ModelRunner does with the transfers: offloads store "the block's bytes" (here its
// id, standing for them) in the tier. Returns the transfers for the test to inspect.
KvTransfers apply_offloads(KvCacheManager& kv, KvHostTier& tier) {
  KvTransfers t = kv.take_transfers();
  const auto arena = testing::heap_arena(4);
  for (const auto& [id, hash] : t.offloads) tier.put(hash, testing::block_with(*arena, std::vector<uint8_t>(4, uint8_t(id))));
  return t;
}

// Sequence 1 computes and caches `tokens`' full blocks (of a pool of 2 blocks of 4), then
// sequence 2 takes the whole pool, evicting them into the tier. Returns the offloads.
size_t cache_then_evict(KvCacheManager& kv, KvHostTier& tier, std::span<const int32_t> tokens) {
  const auto n = static_cast<int32_t>(tokens.size());
  EXPECT_TRUE(kv.allocate(1, n, 0));
  kv.commit(1, tokens, n, 0);
  kv.free(1);
  EXPECT_TRUE(kv.allocate(2, 8, 0));
  const size_t offloads = apply_offloads(kv, tier).offloads.size();
  kv.free(2);
  return offloads;
}

TEST(KvCacheManagerHostTier, EvictedPrefixBlocksComeBackFromTheTier) {
  KvHostTier tier(64, 4);
  KvCacheManager kv(3, 4, true, &tier);
  const auto a = iota_tokens(9);
  ASSERT_TRUE(kv.allocate(1, 9, 0));
  kv.commit(1, a, 9, 0);  // two full blocks cached
  const std::vector<int32_t> a_blocks = ids(kv.blocks(1));
  kv.free(1);
  EXPECT_TRUE(kv.take_transfers().empty());
  ASSERT_TRUE(kv.allocate(2, 9, 0));  // takes all three blocks: both cached ones are evicted
  const KvTransfers offloaded = apply_offloads(kv, tier);
  ASSERT_EQ(offloaded.offloads.size(), 2u);
  EXPECT_TRUE(offloaded.restores.empty());
  EXPECT_EQ(tier.num_blocks(), 2u);
  kv.free(2);

  // The pool lost a's prefix; the tier gives both blocks back, each into a fresh pool block.
  EXPECT_EQ(kv.claim_cached_prefix(3, a, 0), 8);
  const KvTransfers restored = apply_offloads(kv, tier);
  ASSERT_EQ(restored.restores.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(restored.restores[i].first, kv.blocks(3)[i]->id);
    EXPECT_EQ(testing::contents(restored.restores[i].second), std::vector<uint8_t>(4, uint8_t(a_blocks[i])));
    EXPECT_TRUE(kv.blocks(3)[i]->hash.has_value());  // cached again in the pool
  }
  EXPECT_EQ(tier.stats().hits, 2u);
}

TEST(KvCacheManagerHostTier, ABlockHeldByTheTierIsNotCopiedAgain) {
  KvHostTier tier(64, 4);
  KvCacheManager kv(2, 4, true, &tier);
  const auto a = iota_tokens(5);
  EXPECT_EQ(cache_then_evict(kv, tier, a), 1u);
  ASSERT_EQ(kv.claim_cached_prefix(3, a, 0), 4);  // restored from the tier
  apply_offloads(kv, tier);
  kv.free(3);
  ASSERT_TRUE(kv.allocate(4, 8, 0));  // evicts the restored block: the tier has its bytes
  EXPECT_TRUE(apply_offloads(kv, tier).empty());
}

TEST(KvCacheManagerHostTier, ARestoreEvictedBeforeItLandsIsDropped) {
  KvHostTier tier(64, 4);
  KvCacheManager kv(2, 4, true, &tier);
  const auto a = iota_tokens(5);
  EXPECT_EQ(cache_then_evict(kv, tier, a), 1u);
  // Within one step: the prefix is restored, given back (the scheduler's retry) and its
  // block taken by another sequence before any copy ran.
  ASSERT_EQ(kv.claim_cached_prefix(3, a, 0), 4);
  kv.free(3);
  ASSERT_TRUE(kv.allocate(4, 8, 0));
  const KvTransfers t = kv.take_transfers();
  EXPECT_TRUE(t.restores.empty());   // nothing is written into a block now sequence 4's
  EXPECT_TRUE(t.offloads.empty());   // and its stale bytes are not offloaded as a's
  EXPECT_TRUE(tier.contains(block_hash(nullptr, std::span(a).first(4), 0)));
}

TEST(KvCacheManagerHostTier, AFullPoolStopsTheRestore) {
  KvHostTier tier(64, 4);
  KvCacheManager kv(2, 4, true, &tier);
  const auto a = iota_tokens(9);
  EXPECT_EQ(cache_then_evict(kv, tier, std::span(a).first(8)), 2u);
  ASSERT_TRUE(kv.allocate(2, 8, 0));
  // Sequence 2 holds both blocks: no pool block is free for a restore.
  EXPECT_EQ(kv.claim_cached_prefix(3, a, 0), 0);
  EXPECT_TRUE(kv.take_transfers().empty());
}

TEST(KvCacheManagerHostTier, WithADiskTierEveryNewlyCachedBlockIsStored) {
  const testing::ScratchDir dir("tessera_kv_manager_disk");
  KvHostTier tier(64, 4);
  KvDiskTier disk(dir.path().string(), 1 << 20, testing::heap_arena(4), "test");
  KvCacheManager kv(8, 4, true, &tier, &disk);
  const auto a = iota_tokens(9);
  ASSERT_TRUE(kv.allocate(1, 9, 0));
  kv.commit(1, a, 9, 0);
  const KvTransfers t = kv.take_transfers();
  ASSERT_EQ(t.stores.size(), 2u);  // the two full blocks, at once: write-through
  EXPECT_EQ(t.stores[0].first, kv.blocks(1)[0]->id);
  EXPECT_EQ(t.stores[1].first, kv.blocks(1)[1]->id);
  kv.commit(1, a, 9, 0);
  EXPECT_TRUE(kv.take_transfers().empty());  // each block once
  // A second sequence sharing the prefix caches nothing new.
  EXPECT_EQ(kv.claim_cached_prefix(2, a, 0), 8);
  ASSERT_TRUE(kv.allocate(2, 9, 8));
  kv.commit(2, a, 9, 0);
  EXPECT_TRUE(kv.take_transfers().empty());
}

}  // namespace
}  // namespace tsr
