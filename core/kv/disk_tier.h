// The disk tier below the host tier: whole KV blocks in files under
// `[cache] disk_path`/<identity>/, one file per block, named by its chained content hash
// (block_hash.h) and checksummed, bounded by `[cache] disk_memory`. Files survive a
// restart: at start the directory is scanned, partial and malformed files are deleted,
// and the oldest files beyond the bound go; a restarted server serves hits from them.
//
// Every file operation runs on the tier's own thread, so a step never waits on disk:
// store() and load() only queue work, and take_loaded() hands over the blocks read since
// the last call. A file whose header or checksum is wrong is deleted and reported as a
// failed load, never served.
//
// Thread safety: every member may be called from any thread (the engine calls them
// from its step thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/kv/block_hash.h"
#include "core/kv/host_tier.h"

namespace tsr {

struct KvDiskTierStats {
  uint64_t written = 0;          // block files written
  uint64_t loaded = 0;           // blocks read back and verified
  uint64_t rejected = 0;         // files deleted as truncated, malformed or corrupted
  uint64_t dropped_writes = 0;   // stores skipped because the write queue was full
};

class KvDiskTier {
 public:
  // Blocks of `block_bytes` under `dir`/<hex of identity's hash>, at most `capacity_bytes`
  // of files. `identity` names everything the bytes depend on (model, KV format, backend):
  // files of another identity are in another directory and never read.
  // Throws tsr::Error naming the path when the directory cannot be created.
  KvDiskTier(const std::string& dir, uint64_t capacity_bytes, std::shared_ptr<KvBlockArena> arena,
             const std::string& identity);
  ~KvDiskTier();  // finishes queued writes, then stops the thread
  KvDiskTier(const KvDiskTier&) = delete;
  KvDiskTier& operator=(const KvDiskTier&) = delete;

  std::string directory() const;  // `dir`/<identity hash>
  uint64_t capacity_blocks() const;
  uint64_t num_blocks() const;  // files indexed (written or found at start)
  KvDiskTierStats stats() const;

  bool contains(const BlockHash& h) const;
  // Queues a write of the block unless a file of it exists or is queued; dropped, with a
  // count, when the queue already holds its byte limit.
  void store(const BlockHash& h, KvBlockBytes bytes);
  // Queues a read of an indexed block; false when the tier has no file of it. A block
  // already being read is not read twice.
  bool load(const BlockHash& h);
  bool loading() const;  // reads queued or running
  // The blocks read since the last call, each with its bytes, or NULL where the file was
  // rejected (and deleted).
  std::vector<std::pair<BlockHash, KvBlockBytes>> take_loaded();
  // Waits until a read completes or `timeout` passes (for a step that has nothing to run
  // but requests waiting on reads).
  void wait_loaded(std::chrono::milliseconds timeout);
  // Waits until every queued write and read is done (tests, and the benchmark's restart).
  void flush();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The on-disk size of one block file of `block_bytes`: a header, then the bytes.
uint64_t kv_disk_file_bytes(uint64_t block_bytes);

}  // namespace tsr
