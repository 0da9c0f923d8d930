#include "core/kv/kv_block_arena.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/error.h"
#include "core/plugin_host/backend.h"

namespace tsr {

namespace {
// Slots per request for host memory: few calls into the driver (cudaHostAlloc is slow),
// little memory taken ahead of need.
constexpr uint64_t kChunkSlots = 32;
}  // namespace

std::shared_ptr<KvBlockArena> KvBlockArena::create(uint64_t block_bytes, uint64_t pinned_blocks, Backend* backend) {
  if (block_bytes == 0) throw Error("KV block arena: blocks of 0 bytes", TSR_STATUS_INTERNAL);
  return std::shared_ptr<KvBlockArena>(new KvBlockArena(block_bytes, pinned_blocks, backend));
}

KvBlockArena::KvBlockArena(uint64_t block_bytes, uint64_t pinned_blocks, Backend* backend)
    : block_bytes_(block_bytes), pinned_limit_(backend != nullptr ? pinned_blocks : 0), backend_(backend) {}

KvBlockArena::~KvBlockArena() {
  for (void* chunk : chunks_) backend_->host_free(chunk);
}

uint64_t KvBlockArena::pinned_bytes() const {
  std::lock_guard lock(mu_);
  return pinned_slots_ * block_bytes_;
}

uint8_t* KvBlockArena::take_pinned_slot() {
  std::lock_guard lock(mu_);
  if (free_.empty() && !host_memory_failed_ && pinned_slots_ < pinned_limit_) {
    const uint64_t slots = std::min(kChunkSlots, pinned_limit_ - pinned_slots_);
    auto* chunk = static_cast<uint8_t*>(backend_->host_alloc(slots * block_bytes_));
    if (chunk == nullptr) {
      host_memory_failed_ = true;  // the backend has none, or no more: the heap from now on
    } else {
      chunks_.push_back(chunk);
      for (uint64_t i = 0; i < slots; ++i) free_.push_back(chunk + i * block_bytes_);
      pinned_slots_ += slots;
    }
  }
  if (free_.empty()) return nullptr;
  uint8_t* slot = free_.back();
  free_.pop_back();
  return slot;
}

void KvBlockArena::release(uint8_t* data, bool pinned) {
  if (!pinned) {
    delete[] data;
    return;
  }
  std::lock_guard lock(mu_);
  free_.push_back(data);
}

std::shared_ptr<KvHostBlock> KvBlockArena::allocate() {
  uint8_t* data = take_pinned_slot();
  const bool pinned = data != nullptr;
  if (!pinned) data = new uint8_t[block_bytes_];
  auto self = shared_from_this();
  return std::shared_ptr<KvHostBlock>(new KvHostBlock(data, block_bytes_, pinned), [self](KvHostBlock* b) {
    self->release(b->data_, b->pinned_);
    delete b;
  });
}

}  // namespace tsr
