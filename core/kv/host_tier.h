// The host-memory tier below the KV pool: whole blocks that the pool evicted from its
// prefix cache, kept in host memory under their chained content hash (block_hash.h) and
// copied back into the pool on a later prefix hit instead of being recomputed (vLLM's
// CPU offloading connector, SGLang's HiCache host layer).
//
// A block's bytes are its rows of every layer's K and V in the cache's dtypes, as
// KvCache::read_block returns them. Bounded in bytes; the least recently used block goes
// first. Not thread-safe: the engine's step thread owns it.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/kv/block_hash.h"
#include "core/kv/kv_block_arena.h"

namespace tsr {

struct KvHostTierStats {
  uint64_t stored = 0;   // blocks put
  uint64_t hits = 0;     // blocks found by find()
  uint64_t evicted = 0;  // blocks dropped to stay within the capacity
};

class KvHostTier {
 public:
  // Holds at most `capacity_bytes` of blocks of `block_bytes` each.
  KvHostTier(uint64_t capacity_bytes, uint64_t block_bytes);

  uint64_t capacity_blocks() const { return capacity_; }
  uint64_t num_blocks() const { return index_.size(); }
  const KvHostTierStats& stats() const { return stats_; }

  bool contains(const BlockHash& h) const { return index_.contains(h); }
  // Whether the tier holds `h`, marking it recently used if so (not counted as a hit).
  bool touch(const BlockHash& h);
  // The block's bytes, now the most recently used; NULL when absent.
  KvBlockBytes find(const BlockHash& h);
  // Keeps `bytes` (block_bytes long, not NULL) under `h`, dropping least recently used
  // blocks to make room; a block already held is only marked recently used.
  void put(const BlockHash& h, KvBlockBytes bytes);

 private:
  struct Entry {
    BlockHash hash;
    KvBlockBytes bytes;
  };
  using Lru = std::list<Entry>;  // front: most recently used

  uint64_t block_bytes_;
  uint64_t capacity_;  // blocks
  Lru lru_;
  std::unordered_map<BlockHash, Lru::iterator, BlockHashHasher> index_;
  KvHostTierStats stats_;
};

}  // namespace tsr
