// StreamingLLM's cache for generation past the context ([cache] eviction = "streaming";
// Xiao et al., "Efficient Streaming Language Models with Attention Sinks", 2023): a
// sequence keeps the KV of its first `sink_tokens` tokens and of its last `window` ones,
// and nothing between.
//
// Layout: cache indices 0 .. sink_tokens-1 hold the sinks; the window is a ring over the
// indices after them, so that once the cache is full the token at position p overwrites
// the oldest one. Such a step computes one position (a query sees every cached key, which
// is right for one query whatever the order of the keys, but not for several: a later one
// would overwrite a key an earlier one must see).
//
// Positions: as the paper prescribes, relative distances are those within the cache. Keys
// are stored rotated (RoPE) at their positions, and a window key keeps its own, which is
// already its true distance from the query; the sinks must sit just before the oldest
// window key instead of at 0 .. sink_tokens-1. Rather than re-rotate cached keys (a new
// backend op for every KV dtype, Hadamard rotation included), every ring step recomputes
// the sinks' KV at those positions: the sinks attend only to one another, and RoPE scores
// depend only on distances, so their hidden states do not change with the offset; the
// recompute is a forward pass of sink_tokens extra rows in the same step.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tsr {

struct StreamingWindow {
  int32_t sink_tokens = 0;
  int32_t window = 0;  // 0: no eviction (every position has a cache index of its own)

  bool enabled() const { return window > 0; }
  // Cache indices a sequence uses at most.
  int32_t capacity() const { return sink_tokens + window; }
  // Tokens cached once positions 0 .. n-1 are computed.
  int32_t cached(int32_t n) const { return enabled() ? std::min(n, capacity()) : n; }
  // Whether computing position `pos` overwrites the oldest window token (a ring step).
  bool evicts(int32_t pos) const { return enabled() && pos >= capacity(); }
  // The cache index of the token at position `pos`.
  int32_t cache_index(int32_t pos) const {
    return evicts(pos) ? sink_tokens + (pos - sink_tokens) % window : pos;
  }
  // The position of the first sink in a ring step at `pos`: sink_tokens before the oldest
  // window token, which is pos - window + 1 once `pos` is written.
  int32_t sink_position(int32_t pos) const { return pos - capacity() + 1; }
  // Positions one step may compute from `pos` on, at most `n`: up to a full cache while it
  // fills, then one at a time.
  int32_t step_limit(int32_t pos, int32_t n) const {
    if (!enabled()) return n;
    return evicts(pos) ? std::min(n, 1) : std::min(n, capacity() - pos);
  }
  // Extra rows a step at `pos` computes: the sinks, in a ring step.
  int32_t extra_rows(int32_t pos) const { return evicts(pos) ? sink_tokens : 0; }
};

}  // namespace tsr
