// Content hashes of full KV blocks, chained so that a block's hash names its whole prefix:
// hash(block i) = H(hash(block i-1), token ids of block i, extra key such as a cache salt).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tsr {

// 128 bits (XXH3): a collision would silently serve another prefix's KV, so 64 are too few.
struct BlockHash {
  uint64_t lo = 0, hi = 0;
  bool operator==(const BlockHash&) const = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const noexcept { return static_cast<size_t>(h.lo); }
};

// Hash of a per-request extra key (e.g. a cache salt); 0 for an empty key.
uint64_t block_hash_extra(std::string_view key);

BlockHash block_hash(const BlockHash* parent, std::span<const int32_t> tokens, uint64_t extra);

// Appends the hashes of the full blocks of `tokens` not yet in `hashes`.
void block_hashes_extend(std::vector<BlockHash>& hashes, std::span<const int32_t> tokens,
                         int32_t block_size, uint64_t extra);

}  // namespace tsr
