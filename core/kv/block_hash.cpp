#include "core/kv/block_hash.h"

// The state struct is only visible with static-linking-only declarations.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <random>

namespace tsr {

uint64_t block_hash_extra(std::string_view key) {
  return key.empty() ? 0 : XXH3_64bits(key.data(), key.size());
}

namespace {

// A prefix-cache hit is trusted by its hash. XXH3 is fast, not collision-resistant: with a
// seed nobody outside the process knows, a client cannot craft a prompt whose blocks
// collide with another tenant's (and be served that tenant's KV, vLLM's CVE-2025-25183).
uint64_t process_seed() {
  static const uint64_t seed = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  return seed;
}

}  // namespace

BlockHash block_hash(const BlockHash* parent, std::span<const int32_t> tokens, uint64_t extra) {
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, process_seed());
  const BlockHash root{};
  const BlockHash& p = parent ? *parent : root;
  XXH3_128bits_update(&state, &p, sizeof(p));
  XXH3_128bits_update(&state, &extra, sizeof(extra));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockHash{h.low64, h.high64};
}

void block_hashes_extend(std::vector<BlockHash>& hashes, std::span<const int32_t> tokens,
                         int32_t block_size, uint64_t extra) {
  const size_t full = tokens.size() / block_size;
  for (size_t b = hashes.size(); b < full; ++b) {
    const BlockHash* parent = b == 0 ? nullptr : &hashes[b - 1];
    hashes.push_back(block_hash(parent, tokens.subspan(b * block_size, block_size), extra));
  }
}

}  // namespace tsr
