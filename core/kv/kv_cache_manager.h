// Per-sequence block tables on top of the block pool: prefix-cache lookup, slot
// allocation with copy-on-write, caching of full blocks, forks and freeing, and, with a
// host tier below the pool, which blocks move between the two. With a streaming window
// (core/kv/streaming_window.h) a table covers the window's capacity, not every position.
// Not thread-safe: the engine's step thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/kv/block_pool.h"
#include "core/kv/disk_tier.h"
#include "core/kv/host_tier.h"
#include "core/kv/streaming_window.h"

namespace tsr {

using SeqId = uint64_t;

// Copies between the pool and the tiers that the block tables now assume, to be done
// before the next forward pass, offloads and stores first: such a block may be the target
// of a restore or of a block copy in the same step.
struct KvTransfers {
  std::vector<std::pair<int32_t, BlockHash>> offloads;  // pool block -> tier, under its hash
  std::vector<std::pair<int32_t, BlockHash>> stores;    // newly cached pool block -> disk tier
  std::vector<std::pair<int32_t, KvBlockBytes>> restores;  // tier bytes -> pool block
  bool empty() const { return offloads.empty() && stores.empty() && restores.empty(); }
};

class KvCacheManager {
 public:
  // `tier` (can be NULL: none) outlives the manager; it keeps cached blocks the pool
  // evicts, and claim_cached_prefix takes them back. `disk` (can be NULL; only with a
  // tier) outlives it too: blocks read from it arrive through the tier. `window`: the
  // cache index of each position (no eviction by default).
  KvCacheManager(int32_t num_blocks, int32_t block_size, bool prefix_caching, KvHostTier* tier = nullptr,
                 KvDiskTier* disk = nullptr, StreamingWindow window = {});

  int32_t block_size() const { return block_size_; }
  const StreamingWindow& window() const { return window_; }
  const BlockPool& pool() const { return pool_; }

  // Claims the longest cached prefix of `tokens` for a sequence that has no blocks yet, in
  // whole blocks and leaving at least the last token to compute (its logits are needed).
  // A block the pool lost but the host tier holds gets a fresh pool block and a restore.
  // Returns the number of tokens whose KV is in place once take_transfers() is done.
  int32_t claim_cached_prefix(SeqId seq, std::span<const int32_t> tokens, uint64_t extra);

  // Whether blocks of the cached prefix of `tokens` that only the disk tier holds are
  // still being read into the host tier; starts those reads. A request is admitted once
  // this is false (the reads done, or failed: then it recomputes those blocks).
  bool prefix_loading(std::span<const int32_t> tokens, uint64_t extra);
  // Waits up to `timeout` for a disk read, when any is running.
  void wait_for_loads(std::chrono::milliseconds timeout);

  // Ensures blocks for the first `num_tokens` positions, making the block at position
  // `first_write` private if it is shared (copy-on-write), and in a ring step the sinks'
  // block too (they are rewritten). Returns false, changing nothing, when the pool cannot
  // supply the blocks.
  bool allocate(SeqId seq, int32_t num_tokens, int32_t first_write);

  // Hashes and caches the full blocks among the first `num_committed` tokens (tokens whose
  // KV is computed and final: never draft tokens), within the window's capacity: a ring
  // block holds other positions than its hash would say. With a disk tier, each block newly
  // cached is also stored there (write-through: the files then hold every computed prefix
  // up to their bound, and survive a restart or a crash).
  void commit(SeqId seq, std::span<const int32_t> tokens, int32_t num_committed, uint64_t extra);

  // The child shares every block of the parent, the partial last one included.
  void fork(SeqId parent, SeqId child);

  // Releases the blocks past those holding the first `num_tokens` positions.
  void truncate(SeqId seq, int32_t num_tokens);

  // Releases every block of the sequence; full blocks stay cached until evicted.
  void free(SeqId seq);

  std::span<KvBlock* const> blocks(SeqId seq) const;
  // Block copies (src, dst) that copy-on-write decided since the last call.
  std::vector<std::pair<int32_t, int32_t>> take_copies();
  // Tier copies decided since the last call (none without a tier).
  KvTransfers take_transfers();

  int32_t num_free_blocks() const { return pool_.num_free(); }
  int32_t num_used_blocks() const { return pool_.num_blocks() - pool_.num_free(); }

 private:
  struct Seq {
    std::vector<KvBlock*> blocks;
    std::vector<BlockHash> hashes;  // of the full committed blocks, in order
    int32_t num_cached = 0;          // leading blocks already offered to the cache
  };

  bool make_private(Seq& s, int32_t block_index);
  static bool needs_copy(const Seq& s, int32_t block_index);
  // pool_.allocate, then the evicted blocks' offloads.
  bool allocate_blocks(int32_t n, std::vector<KvBlock*>& out);
  KvBlock* restore_from_tier(const BlockHash& h);
  // Hashes of the blocks of `tokens` claim_cached_prefix may take.
  std::vector<BlockHash> claimable_hashes(std::span<const int32_t> tokens, uint64_t extra) const;

  BlockPool pool_;
  KvHostTier* tier_;
  KvDiskTier* disk_;
  KvTransfers transfers_;
  int32_t block_size_;
  StreamingWindow window_;
  std::unordered_map<SeqId, Seq> seqs_;
  std::vector<std::pair<int32_t, int32_t>> copies_;
};

}  // namespace tsr
