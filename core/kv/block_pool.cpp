#include "core/kv/block_pool.h"

#include "base/error.h"

namespace tsr {

FreeBlockQueue::FreeBlockQueue() { head_.prev_free = head_.next_free = &head_; }

void FreeBlockQueue::push_back(KvBlock* b) {
  KvBlock* tail = head_.prev_free;
  b->prev_free = tail;
  b->next_free = &head_;
  tail->next_free = b;
  head_.prev_free = b;
  ++size_;
}

KvBlock* FreeBlockQueue::pop_front() {
  if (size_ == 0) return nullptr;
  KvBlock* b = head_.next_free;
  remove(b);
  return b;
}

void FreeBlockQueue::remove(KvBlock* b) {
  b->prev_free->next_free = b->next_free;
  b->next_free->prev_free = b->prev_free;
  b->prev_free = b->next_free = nullptr;
  --size_;
}

BlockPool::BlockPool(int32_t num_blocks, bool enable_caching)
    : blocks_(static_cast<size_t>(num_blocks)), caching_(enable_caching) {
  if (num_blocks <= 0) throw Error("the block pool needs at least one block");
  for (int32_t i = 0; i < num_blocks; ++i) {
    blocks_[i].id = i;
    free_.push_back(&blocks_[i]);
  }
}

bool BlockPool::allocate(int32_t n, std::vector<KvBlock*>& out) {
  if (n > free_.size()) return false;
  for (int32_t i = 0; i < n; ++i) {
    KvBlock* b = free_.pop_front();
    evict(b);
    b->ref_cnt = 1;
    out.push_back(b);
  }
  return true;
}

void BlockPool::touch(KvBlock* b) {
  if (b->ref_cnt == 0 && free_.contains(b)) free_.remove(b);
  ++b->ref_cnt;
}

void BlockPool::release(KvBlock* b) {
  if (b->ref_cnt <= 0) throw Error("KV block released twice", TSR_STATUS_INTERNAL);
  if (--b->ref_cnt == 0) free_.push_back(b);
}

KvBlock* BlockPool::find_cached(const BlockHash& h) const {
  auto it = cached_.find(h);
  return it == cached_.end() ? nullptr : it->second;
}

void BlockPool::cache(KvBlock* b, const BlockHash& h) {
  if (!caching_ || b->hash) return;
  if (cached_.emplace(h, b).second) b->hash = h;
}

void BlockPool::evict(KvBlock* b) {
  if (!b->hash) return;
  if (record_evictions_) evicted_.emplace_back(b->id, *b->hash);
  cached_.erase(*b->hash);
  b->hash.reset();
}

}  // namespace tsr
