#include "core/kv/kv_block_arena.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>

#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"

namespace tsr {
namespace {

constexpr uint64_t kBlockBytes = 1000;

std::unique_ptr<Backend> cpu_backend() {
  return Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, "cpu", {TESSERA_PLUGIN_DIR}), 0, 1);
}

TEST(KvBlockArena, WithoutABackendBlocksAreOrdinaryMemory) {
  auto arena = KvBlockArena::create(kBlockBytes, 8, nullptr);
  auto b = arena->allocate();
  EXPECT_EQ(b->size(), kBlockBytes);
  EXPECT_FALSE(b->pinned());
  std::memset(b->data(), 7, b->size());  // all of it is writable (ASan checks)
  EXPECT_EQ(arena->pinned_bytes(), 0u);
}

// The CPU backend has the feature "tsr_host_memory": blocks come from its chunks, up to
// the bound; past it, from the heap; a dropped block's slot is reused.
TEST(KvBlockArena, TakesTheBackendsHostMemoryUpToItsBound) {
  auto backend = cpu_backend();
  auto arena = KvBlockArena::create(kBlockBytes, 3, backend.get());
  std::vector<std::shared_ptr<KvHostBlock>> held;
  std::set<const uint8_t*> slots;
  for (int i = 0; i < 3; ++i) {
    held.push_back(arena->allocate());
    EXPECT_TRUE(held.back()->pinned());
    slots.insert(held.back()->data());
  }
  EXPECT_EQ(slots.size(), 3u);
  EXPECT_EQ(arena->pinned_bytes(), 3 * kBlockBytes);
  auto beyond = arena->allocate();
  EXPECT_FALSE(beyond->pinned());
  const uint8_t* freed = held[1]->data();
  held.erase(held.begin() + 1);
  auto again = arena->allocate();
  EXPECT_TRUE(again->pinned());
  EXPECT_EQ(again->data(), freed);
  EXPECT_EQ(arena->pinned_bytes(), 3 * kBlockBytes);
}

// A block outlives the arena's other owners: it keeps the arena (and its chunks) alive.
TEST(KvBlockArena, ABlockKeepsItsArena) {
  auto backend = cpu_backend();
  auto arena = KvBlockArena::create(kBlockBytes, 2, backend.get());
  auto b = arena->allocate();
  arena.reset();
  std::memset(b->data(), 1, b->size());
  EXPECT_TRUE(b->pinned());
}

// The step thread and the disk tier's thread allocate and drop blocks at once.
TEST(KvBlockArena, IsThreadSafe) {
  auto backend = cpu_backend();
  auto arena = KvBlockArena::create(kBlockBytes, 16, backend.get());
  auto churn = [&arena](uint8_t v) {
    for (int i = 0; i < 2000; ++i) {
      auto b = arena->allocate();
      std::memset(b->data(), v, b->size());
      ASSERT_EQ(b->data()[b->size() - 1], v);
    }
  };
  std::thread other(churn, uint8_t{1});
  churn(2);
  other.join();
  EXPECT_LE(arena->pinned_bytes(), 16 * kBlockBytes);
}

}  // namespace
}  // namespace tsr
