// The pool of KV blocks: reference counts, an O(1) LRU queue of free blocks, and the map
// from content hash to cached block (prefix caching).
//
// A block whose reference count drops to zero joins the tail of the free queue but keeps
// its hash: it can still be reused by a later request with the same prefix (touch), and
// is evicted, losing its hash, only when allocate() takes it from the head.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/kv/block_hash.h"

namespace tsr {

struct KvBlock {
  int32_t id = 0;
  int32_t ref_cnt = 0;
  std::optional<BlockHash> hash;
  // Intrusive links of the free queue; both NULL when the block is not in it.
  KvBlock* prev_free = nullptr;
  KvBlock* next_free = nullptr;
};

// Doubly linked list through KvBlock's links with a sentinel: push, pop and remove are O(1).
class FreeBlockQueue {
 public:
  FreeBlockQueue();
  void push_back(KvBlock* b);
  KvBlock* pop_front();  // NULL when empty
  void remove(KvBlock* b);
  bool contains(const KvBlock* b) const { return b->prev_free != nullptr; }
  int32_t size() const { return size_; }

 private:
  KvBlock head_;  // sentinel: head_.next_free is the least recently freed block
  int32_t size_ = 0;
};

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, bool enable_caching);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_free() const { return free_.size(); }  // including cached, unreferenced ones
  int32_t num_cached() const { return static_cast<int32_t>(cached_.size()); }
  bool caching() const { return caching_; }

  // Takes n blocks from the head of the free queue (evicting their hashes), each with
  // ref_cnt 1. Returns false and takes nothing when fewer than n are free.
  bool allocate(int32_t n, std::vector<KvBlock*>& out);
  // A new reference to a block (a prefix-cache hit or a fork).
  void touch(KvBlock* b);
  // Drops a reference; at zero the block joins the free queue's tail.
  void release(KvBlock* b);
  KvBlock* find_cached(const BlockHash& h) const;  // NULL when absent
  // Records a full block's content hash. If another block already holds this content the
  // map keeps that one; this block stays uncached.
  void cache(KvBlock* b, const BlockHash& h);

  // With recording on, the (block id, hash) of each cached block that allocate() evicted
  // since the last call, in eviction order: what a tier below the pool may keep.
  void record_evictions(bool on) { record_evictions_ = on; }
  std::vector<std::pair<int32_t, BlockHash>> take_evicted() { return std::exchange(evicted_, {}); }

 private:
  void evict(KvBlock* b);

  std::vector<KvBlock> blocks_;
  FreeBlockQueue free_;
  std::unordered_map<BlockHash, KvBlock*, BlockHashHasher> cached_;
  bool caching_;
  bool record_evictions_ = false;
  std::vector<std::pair<int32_t, BlockHash>> evicted_;
};

}  // namespace tsr
