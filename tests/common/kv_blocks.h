// KV tier blocks in tests: made from bytes in ordinary memory, read back as bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/kv/kv_block_arena.h"

namespace tsr::testing {

// An arena of heap blocks (no backend).
inline std::shared_ptr<KvBlockArena> heap_arena(uint64_t block_bytes) {
  return KvBlockArena::create(block_bytes, 0, nullptr);
}

// A block of `arena`'s size holding `bytes` (as many as fit; the rest zero).
inline KvBlockBytes block_with(KvBlockArena& arena, const std::vector<uint8_t>& bytes) {
  std::shared_ptr<KvHostBlock> b = arena.allocate();
  std::fill(b->data(), b->data() + b->size(), uint8_t{0});
  std::copy_n(bytes.begin(), std::min<size_t>(bytes.size(), b->size()), b->data());
  return b;
}

inline std::vector<uint8_t> contents(const KvBlockBytes& b) { return {b->data(), b->data() + b->size()}; }

}  // namespace tsr::testing
