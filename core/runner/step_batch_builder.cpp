#include "core/runner/step_batch_builder.h"

#include <algorithm>


namespace tsr {

StepBatch build_step_batch(const SchedulerOutput& out, const KvCacheManager& kv) {
  StepBatch b;
  const int32_t bs = kv.block_size();
  for (const ScheduledChunk& c : out.chunks) {
    b.max_blocks = std::max<int32_t>(b.max_blocks, static_cast<int32_t>(kv.blocks(c.request->id()).size()));
  }
  b.query_start_loc.push_back(0);
  for (const ScheduledChunk& c : out.chunks) {
    const Request& r = *c.request;
    const auto blocks = kv.blocks(r.id());
    for (int32_t pos = r.num_computed(); pos < r.num_computed() + c.num_new_tokens; ++pos) {
      b.tokens.push_back(pos < r.num_tokens() ? r.tokens()[pos] : r.drafts()[pos - r.num_tokens()]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(blocks[pos / bs]->id * bs + pos % bs);
    }
    b.query_start_loc.push_back(b.num_tokens());
    b.seq_lens.push_back(r.num_computed() + c.num_new_tokens);
    for (int32_t i = 0; i < b.max_blocks; ++i) {
      // Rows are padded with block 0: attention never reads past seq_len.
      b.block_tables.push_back(i < static_cast<int32_t>(blocks.size()) ? blocks[i]->id : 0);
    }
    // Rows from the last real token on: one to sample from, one per draft to verify.
    const int32_t end = r.num_computed() + c.num_new_tokens;
    for (int32_t pos = r.num_tokens() - 1; pos < end; ++pos) {
      if (pos >= r.num_computed()) b.logit_rows.push_back(b.num_tokens() - (end - pos));
    }
  }
  return b;
}

StepBatch build_sequence_batch(const KvCacheManager& kv, SeqId seq, int32_t start, std::span<const int32_t> tokens,
                               bool all_logits) {
  StepBatch b;
  const int32_t bs = kv.block_size();
  const auto blocks = kv.blocks(seq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t pos = start + static_cast<int32_t>(i);
    b.tokens.push_back(tokens[i]);
    b.positions.push_back(pos);
    b.slot_mapping.push_back(blocks[pos / bs]->id * bs + pos % bs);
    if (all_logits) b.logit_rows.push_back(static_cast<int32_t>(i));
  }
  if (!all_logits) b.logit_rows = {b.num_tokens() - 1};
  b.query_start_loc = {0, b.num_tokens()};
  b.seq_lens = {start + b.num_tokens()};
  b.max_blocks = static_cast<int32_t>(blocks.size());
  for (const KvBlock* blk : blocks) b.block_tables.push_back(blk->id);
  return b;
}

}  // namespace tsr
