#include "core/kv/host_tier.h"

#include "base/error.h"

namespace tsr {

KvHostTier::KvHostTier(uint64_t capacity_bytes, uint64_t block_bytes)
    : block_bytes_(block_bytes), capacity_(block_bytes == 0 ? 0 : capacity_bytes / block_bytes) {
  if (block_bytes == 0) throw Error("KV host tier: blocks of 0 bytes", TSR_STATUS_INTERNAL);
}

bool KvHostTier::touch(const BlockHash& h) {
  auto it = index_.find(h);
  if (it == index_.end()) return false;
  lru_.splice(lru_.begin(), lru_, it->second);
  return true;
}

KvBlockBytes KvHostTier::find(const BlockHash& h) {
  if (!touch(h)) return nullptr;
  ++stats_.hits;
  return index_.find(h)->second->bytes;
}

void KvHostTier::put(const BlockHash& h, KvBlockBytes bytes) {
  if (bytes == nullptr || bytes->size() != block_bytes_) throw Error("KV host tier: a block of the wrong size", TSR_STATUS_INTERNAL);
  if (capacity_ == 0) return;
  if (touch(h)) return;
  while (index_.size() >= capacity_) {
    index_.erase(lru_.back().hash);
    lru_.pop_back();
    ++stats_.evicted;
  }
  lru_.push_front(Entry{h, std::move(bytes)});
  index_.emplace(h, lru_.begin());
  ++stats_.stored;
}

}  // namespace tsr
