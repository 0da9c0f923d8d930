// The host-side description of one forward step over any number of sequences, and the
// layout of the logits it returns.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tsr {

// Tokens of a sequence are contiguous; sequence s owns tokens [query_start_loc[s],
// query_start_loc[s + 1]) and row s of block_tables.
struct StepBatch {
  std::vector<int32_t> tokens;           // [n]
  std::vector<int32_t> positions;        // [n] absolute positions (RoPE's)
  // [n] what attention calls positions: the cache index up to which a row sees keys; equal
  // to `positions` unless a streaming window evicts (core/kv/streaming_window.h).
  std::vector<int32_t> cache_positions;
  // [n] or empty (every sequence causal): the row each row follows, -1 for a sequence's
  // first; a tree of drafts' rows follow their parents (tree attention, backend.h), and
  // `positions` then are their depths' while cache_positions are their slots'.
  std::vector<int32_t> parents;
  std::vector<int32_t> slot_mapping;     // [n] KV slot each token writes
  std::vector<int32_t> query_start_loc;  // [num_seqs + 1]
  std::vector<int32_t> seq_lens;         // [num_seqs] tokens in cache after this step
  std::vector<int32_t> block_tables;     // [num_seqs * max_blocks]
  int32_t max_blocks = 0;
  std::vector<int32_t> logit_rows;       // token indices whose logits are returned
  // Token indices whose hidden states after the output norm are returned (embeddings),
  // n_embd floats each, in this order.
  std::vector<int32_t> hidden_rows;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens.size()); }
};

// The logits of a step: one row of n_vocab floats per entry of logit_rows, in that order,
// packed. Rows [first, first + count) of them.
inline std::span<const float> logits_rows(std::span<const float> logits, int32_t n_vocab, size_t first, size_t count) {
  return logits.subspan(first * size_t(n_vocab), count * size_t(n_vocab));
}

}  // namespace tsr
