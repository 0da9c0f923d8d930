#include "core/runner/step_batch_builder.h"

#include <algorithm>

#include "base/error.h"
#include "core/request/draft_tree.h"

namespace tsr {

namespace {

// Appends one sequence's rows: `tokens` at positions start, start + 1, ..., its table row
// (padded with block 0 to max_blocks: attention never reads past seq_len) and, in a ring
// step of a streaming window, the recomputed sinks as a sequence of their own (their
// first tokens `sinks` at the positions the window gives them; no logits).
void append_sequence(StepBatch& b, const KvCacheManager& kv, SeqId seq, int32_t start,
                     std::span<const int32_t> tokens, std::span<const int32_t> sinks) {
  const int32_t bs = kv.block_size();
  const StreamingWindow& w = kv.window();
  const auto blocks = kv.blocks(seq);
  auto row = [&](int32_t token, int32_t pos, int32_t index, int32_t attends_to) {
    b.tokens.push_back(token);
    b.positions.push_back(pos);
    b.cache_positions.push_back(attends_to);
    b.slot_mapping.push_back(blocks[index / bs]->id * bs + index % bs);
  };
  auto close = [&](int32_t seq_len) {
    b.query_start_loc.push_back(b.num_tokens());
    b.seq_lens.push_back(seq_len);
    for (int32_t i = 0; i < b.max_blocks; ++i) {
      b.block_tables.push_back(i < static_cast<int32_t>(blocks.size()) ? blocks[i]->id : 0);
    }
  };
  const auto n = static_cast<int32_t>(tokens.size());
  const int32_t seq_len = w.cached(start + n);
  for (int32_t i = 0; i < n; ++i) {
    // A ring step's one row sees the whole cache; otherwise index and position agree.
    const int32_t pos = start + i;
    row(tokens[i], pos, w.cache_index(pos), w.evicts(pos) ? seq_len - 1 : pos);
  }
  close(seq_len);
  const int32_t n_sinks = w.extra_rows(start);
  if (n_sinks == 0) return;
  if (sinks.size() < size_t(n_sinks)) throw Error("a ring step without its sink tokens", TSR_STATUS_INTERNAL);
  const int32_t first = w.sink_position(start);
  for (int32_t i = 0; i < n_sinks; ++i) row(sinks[i], first + i, i, i);
  close(n_sinks);
}

int32_t table_width(const KvCacheManager& kv, SeqId seq) { return static_cast<int32_t>(kv.blocks(seq).size()); }

// A chunk whose drafts form a tree (Request::draft_parents): its draft rows take the RoPE
// positions of their depths and follow their parents' rows; the rows before them (the
// request's last tokens) are a chain ending at the tree's root. The chunk's rows start at
// `first_row`; its other rows keep their slots' positions.
void place_tree(StepBatch& b, const Request& r, int32_t first_row, int32_t n_rows) {
  const int32_t root = first_row + r.num_tokens() - 1 - r.num_computed();
  const auto parents = r.draft_parents();
  const std::vector<int32_t> depth = draft_tree_depths(parents);
  for (size_t d = 0; d < parents.size() && root + 1 + int32_t(d) < first_row + n_rows; ++d) {
    const int32_t parent = parents[d];
    const auto row = size_t(root + 1) + d;
    b.positions[row] = r.num_tokens() - 1 + depth[d];
    b.parents[row] = parent < 0 ? root : root + 1 + parent;
  }
}

// Every row follows the one before it in its sequence (the causal parents), for a step
// with a tree.
void chain_parents(StepBatch& b) {
  b.parents.resize(size_t(b.num_tokens()));
  for (int32_t s = 0; s < b.num_seqs(); ++s) {
    for (int32_t i = b.query_start_loc[s]; i < b.query_start_loc[s + 1]; ++i) {
      b.parents[size_t(i)] = i == b.query_start_loc[s] ? -1 : i - 1;
    }
  }
}

}  // namespace

StepBatch build_step_batch(const SchedulerOutput& out, const KvCacheManager& kv) {
  StepBatch b;
  for (const ScheduledChunk& c : out.chunks) b.max_blocks = std::max(b.max_blocks, table_width(kv, c.request->id()));
  b.query_start_loc.push_back(0);
  std::vector<int32_t> tokens;
  std::vector<std::pair<const ScheduledChunk*, int32_t>> trees;  // chunks with a tree, and their first rows
  for (const ScheduledChunk& c : out.chunks) {
    const Request& r = *c.request;
    tokens.clear();
    for (int32_t pos = r.num_computed(); pos < r.num_computed() + c.num_new_tokens; ++pos) {
      tokens.push_back(pos < r.num_tokens() ? r.tokens()[pos] : r.drafts()[pos - r.num_tokens()]);
    }
    const int32_t first_row = b.num_tokens();
    append_sequence(b, kv, r.id(), r.num_computed(), tokens, r.tokens());
    if (!r.draft_parents().empty() && r.num_computed() + c.num_new_tokens > r.num_tokens()) {
      trees.emplace_back(&c, first_row);
    }
    if (r.embeds()) {  // the states its pooling reads, and nothing to sample
      const auto [lo, hi] = r.pooled_rows(r.num_computed(), c.num_new_tokens);
      for (int32_t pos = lo; pos < hi; ++pos) b.hidden_rows.push_back(first_row + pos - r.num_computed());
      continue;
    }
    // Rows from the last real token on: one to sample from, one per draft to verify.
    const int32_t end = r.num_computed() + c.num_new_tokens;
    for (int32_t pos = std::max(r.num_tokens() - 1, r.num_computed()); pos < end; ++pos) {
      b.logit_rows.push_back(first_row + pos - r.num_computed());
    }
  }
  if (trees.empty()) return b;
  if (kv.window().enabled()) throw Error("a tree of drafts through a streaming window", TSR_STATUS_INTERNAL);
  chain_parents(b);
  for (const auto& [c, first_row] : trees) place_tree(b, *c->request, first_row, c->num_new_tokens);
  return b;
}

StepBatch build_sequence_batch(const KvCacheManager& kv, SeqId seq, int32_t start, std::span<const int32_t> tokens,
                               bool all_logits, std::span<const int32_t> sinks) {
  StepBatch b;
  b.max_blocks = table_width(kv, seq);
  b.query_start_loc.push_back(0);
  append_sequence(b, kv, seq, start, tokens, sinks);
  const auto n = static_cast<int32_t>(tokens.size());
  for (int32_t i = all_logits ? 0 : n - 1; i < n; ++i) b.logit_rows.push_back(i);
  return b;
}

StepBatch build_sequences_batch(const KvCacheManager& kv, std::span<const SequencePart> parts) {
  if (kv.window().enabled()) throw Error("a step of several sequences through a streaming window", TSR_STATUS_INTERNAL);
  StepBatch b;
  for (const SequencePart& p : parts) b.max_blocks = std::max(b.max_blocks, table_width(kv, p.seq));
  b.query_start_loc.push_back(0);
  for (const SequencePart& p : parts) {
    if (p.tokens.empty()) throw Error("a sequence part without tokens", TSR_STATUS_INTERNAL);
    append_sequence(b, kv, p.seq, p.start, p.tokens, {});
    b.logit_rows.push_back(b.num_tokens() - 1);
  }
  return b;
}

}  // namespace tsr
