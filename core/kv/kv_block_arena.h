// Host memory for KV blocks that leave the pool (the host and disk tiers): slots of one
// block each, carved from chunks of the backend's host memory (tessera/host_memory.h:
// page-locked on a GPU, so the copies to and from the device need no staging buffer and
// run at the DMA engine's speed), up to a bound; beyond it, or where the backend has no
// such memory, ordinary heap memory. Thread-safe: the step thread and the disk tier's
// thread allocate, and a block goes back to the free slots when its last owner drops it.
//
// The backend must outlive the arena; each block keeps the arena alive.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace tsr {

class Backend;

// One KV block's bytes in host memory (the arena's block_bytes), as KvCache::read_block lays them out.
class KvHostBlock {
 public:
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  std::span<uint8_t> bytes() { return {data_, size_}; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  bool pinned() const { return pinned_; }  // in the backend's host memory

 private:
  friend class KvBlockArena;
  KvHostBlock(uint8_t* data, uint64_t size, bool pinned) : data_(data), size_(size), pinned_(pinned) {}
  uint8_t* data_;
  uint64_t size_;
  bool pinned_;
};

using KvBlockBytes = std::shared_ptr<const KvHostBlock>;

class KvBlockArena : public std::enable_shared_from_this<KvBlockArena> {
 public:
  // Blocks of `block_bytes` (> 0), at most `pinned_blocks` of them at a time in the host
  // memory of `backend` (can be NULL: none).
  static std::shared_ptr<KvBlockArena> create(uint64_t block_bytes, uint64_t pinned_blocks, Backend* backend);
  ~KvBlockArena();
  KvBlockArena(const KvBlockArena&) = delete;
  KvBlockArena& operator=(const KvBlockArena&) = delete;

  uint64_t block_bytes() const { return block_bytes_; }
  // A block of uninitialized bytes; never NULL (throws std::bad_alloc as new does).
  std::shared_ptr<KvHostBlock> allocate();
  // Bytes of host memory taken from the backend so far.
  uint64_t pinned_bytes() const;

 private:
  KvBlockArena(uint64_t block_bytes, uint64_t pinned_blocks, Backend* backend);
  uint8_t* take_pinned_slot();  // NULL: none to be had
  void release(uint8_t* data, bool pinned);

  uint64_t block_bytes_;
  uint64_t pinned_limit_;  // slots
  Backend* backend_;
  mutable std::mutex mu_;
  std::vector<void*> chunks_;     // from backend->host_alloc
  std::vector<uint8_t*> free_;    // pinned slots not in use
  uint64_t pinned_slots_ = 0;     // carved so far
  bool host_memory_failed_ = false;
};

}  // namespace tsr
