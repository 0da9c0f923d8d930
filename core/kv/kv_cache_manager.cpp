#include "core/kv/kv_cache_manager.h"

#include <algorithm>

#include "base/error.h"

namespace tsr {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool prefix_caching, KvHostTier* tier,
                               KvDiskTier* disk, StreamingWindow window)
    : pool_(num_blocks, prefix_caching),
      tier_(prefix_caching ? tier : nullptr),
      disk_(tier_ != nullptr ? disk : nullptr),
      block_size_(block_size),
      window_(window) {
  if (block_size <= 0) throw Error("block_size must be > 0");
  if (window.sink_tokens < 0 || window.window < 0) throw Error("streaming window: sink_tokens and window must be >= 0");
  pool_.record_evictions(tier_ != nullptr);
}

bool KvCacheManager::allocate_blocks(int32_t n, std::vector<KvBlock*>& out) {
  if (!pool_.allocate(n, out)) return false;
  for (auto& [id, hash] : pool_.take_evicted()) {
    // A block restored in this step and evicted before its bytes arrived holds nothing yet:
    // the restore is dropped, and the tier still has (or has dropped) those bytes.
    auto& r = transfers_.restores;
    const auto pending = std::find_if(r.begin(), r.end(), [&](const auto& x) { return x.first == id; });
    if (pending != r.end()) {
      r.erase(pending);
    } else if (!tier_->touch(hash)) {
      transfers_.offloads.emplace_back(id, hash);
    }
  }
  return true;
}

KvBlock* KvCacheManager::restore_from_tier(const BlockHash& h) {
  if (tier_ == nullptr) return nullptr;
  KvBlockBytes bytes = tier_->find(h);
  std::vector<KvBlock*> fresh;
  if (bytes == nullptr || !allocate_blocks(1, fresh)) return nullptr;
  pool_.cache(fresh[0], h);
  transfers_.restores.emplace_back(fresh[0]->id, std::move(bytes));
  return fresh[0];
}

int32_t KvCacheManager::claim_cached_prefix(SeqId seq, std::span<const int32_t> tokens,
                                            uint64_t extra) {
  Seq& s = seqs_[seq];
  if (!pool_.caching() || !s.blocks.empty()) return 0;
  for (const BlockHash& h : claimable_hashes(tokens, extra)) {
    KvBlock* b = pool_.find_cached(h);
    if (b != nullptr) {
      pool_.touch(b);
    } else if (b = restore_from_tier(h); b == nullptr) {
      break;
    }
    s.blocks.push_back(b);
    s.hashes.push_back(h);
  }
  s.num_cached = static_cast<int32_t>(s.blocks.size());
  return s.num_cached * block_size_;
}

std::vector<BlockHash> KvCacheManager::claimable_hashes(std::span<const int32_t> tokens, uint64_t extra) const {
  std::vector<BlockHash> hashes;
  tokens = tokens.first(static_cast<size_t>(window_.cached(static_cast<int32_t>(tokens.size()))));
  if (tokens.size() < 2) return hashes;
  // At most tokens-1 positions may come from the cache: the last one must be computed.
  block_hashes_extend(hashes, tokens.first((tokens.size() - 1) / block_size_ * block_size_), block_size_, extra);
  return hashes;
}

bool KvCacheManager::prefix_loading(std::span<const int32_t> tokens, uint64_t extra) {
  if (disk_ == nullptr) return false;
  for (auto& [hash, bytes] : disk_->take_loaded()) {
    if (bytes != nullptr) tier_->put(hash, std::move(bytes));
  }
  // Half the tier at most, so that blocks read for one request are not dropped by the tier
  // before that request takes them (which would read them again, forever).
  uint64_t budget = tier_->capacity_blocks() / 2;
  bool loading = false;
  for (const BlockHash& h : claimable_hashes(tokens, extra)) {
    if (pool_.find_cached(h) != nullptr || tier_->contains(h)) continue;
    if (budget == 0 || !disk_->load(h)) break;
    --budget;
    loading = true;
  }
  return loading;
}

void KvCacheManager::wait_for_loads(std::chrono::milliseconds timeout) {
  if (disk_ != nullptr && disk_->loading()) disk_->wait_loaded(timeout);
}

bool KvCacheManager::needs_copy(const Seq& s, int32_t index) {
  return index < static_cast<int32_t>(s.blocks.size()) &&
         (s.blocks[index]->ref_cnt > 1 || s.blocks[index]->hash.has_value());
}

bool KvCacheManager::make_private(Seq& s, int32_t index) {
  if (!needs_copy(s, index)) return true;
  KvBlock* shared = s.blocks[index];
  std::vector<KvBlock*> fresh;
  if (!allocate_blocks(1, fresh)) return false;
  copies_.emplace_back(shared->id, fresh[0]->id);
  pool_.release(shared);
  s.blocks[index] = fresh[0];
  return true;
}

bool KvCacheManager::allocate(SeqId seq, int32_t num_tokens, int32_t first_write) {
  Seq& s = seqs_[seq];
  const int32_t needed = (window_.cached(num_tokens) + block_size_ - 1) / block_size_;
  const int32_t have = static_cast<int32_t>(s.blocks.size());
  // A block about to be written that others share (a fork's partial block, or any block
  // of a fork taken inside its origin's tokens) or that the cache still offers needs a
  // private copy first: one more block from the pool each. A ring step (one position)
  // rewrites the sinks' blocks too.
  std::vector<int32_t> writes{window_.cache_index(first_write) / block_size_};
  for (int32_t b = writes[0] + 1; !window_.evicts(first_write) && b < std::min(have, needed); ++b) writes.push_back(b);
  for (int32_t b = 0; b * block_size_ < window_.extra_rows(first_write); ++b) {
    if (b != writes[0]) writes.push_back(b);
  }
  const auto copies = std::count_if(writes.begin(), writes.end(), [&](int32_t b) { return needs_copy(s, b); });
  if (std::max(0, needed - have) + copies > pool_.num_free()) return false;
  for (const int32_t b : writes) {
    if (!make_private(s, b)) return false;
  }
  return allocate_blocks(std::max(0, needed - have), s.blocks);
}

void KvCacheManager::commit(SeqId seq, std::span<const int32_t> tokens, int32_t num_committed,
                            uint64_t extra) {
  if (!pool_.caching()) return;
  Seq& s = seqs_[seq];
  const int32_t limit =
      std::min<int32_t>(window_.cached(num_committed), static_cast<int32_t>(s.blocks.size()) * block_size_);
  block_hashes_extend(s.hashes, tokens.first(std::min<size_t>(tokens.size(), limit)), block_size_, extra);
  for (; s.num_cached < static_cast<int32_t>(s.hashes.size()); ++s.num_cached) {
    KvBlock* b = s.blocks[s.num_cached];
    const BlockHash& h = s.hashes[s.num_cached];
    const bool was_cached = b->hash.has_value();
    pool_.cache(b, h);
    if (disk_ != nullptr && !was_cached && b->hash == h && !disk_->contains(h)) transfers_.stores.emplace_back(b->id, h);
  }
}

void KvCacheManager::fork(SeqId parent, SeqId child) {
  const Seq& p = seqs_.at(parent);
  Seq& c = seqs_[child];
  if (!c.blocks.empty()) throw Error("fork into a sequence that has blocks", TSR_STATUS_INTERNAL);
  c = p;
  for (KvBlock* b : c.blocks) pool_.touch(b);
}

void KvCacheManager::truncate(SeqId seq, int32_t num_tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  const auto keep = static_cast<size_t>((window_.cached(num_tokens) + block_size_ - 1) / block_size_);
  while (s.blocks.size() > keep) {
    pool_.release(s.blocks.back());
    s.blocks.pop_back();
  }
  s.hashes.resize(std::min(s.hashes.size(), keep));
  s.num_cached = std::min(s.num_cached, static_cast<int32_t>(keep));
}

void KvCacheManager::free(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  // Last blocks first: the free queue then evicts a sequence's tail before its prefix,
  // which other requests are likelier to share.
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) pool_.release(*b);
  seqs_.erase(it);
}

std::span<KvBlock* const> KvCacheManager::blocks(SeqId seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return {};
  return it->second.blocks;
}

std::vector<std::pair<int32_t, int32_t>> KvCacheManager::take_copies() {
  return std::exchange(copies_, {});
}

KvTransfers KvCacheManager::take_transfers() { return std::exchange(transfers_, {}); }

}  // namespace tsr
