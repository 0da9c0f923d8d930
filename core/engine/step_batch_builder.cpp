#include "core/engine/step_batch_builder.h"

#include <algorithm>

#include "core/plugin_host/tensor.h"

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
    for (int32_t pos = r.num_computed; pos < r.num_computed + c.num_new_tokens; ++pos) {
      b.tokens.push_back(pos < r.num_tokens() ? r.tokens()[pos] : r.drafts[pos - r.num_tokens()]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(blocks[pos / bs]->id * bs + pos % bs);
    }
    b.query_start_loc.push_back(b.num_tokens());
    b.seq_lens.push_back(r.num_computed + c.num_new_tokens);
    for (int32_t i = 0; i < b.max_blocks; ++i) {
      // Rows are padded with block 0: attention never reads past seq_len.
      b.block_tables.push_back(i < static_cast<int32_t>(blocks.size()) ? blocks[i]->id : 0);
    }
    // Rows from the last real token on: one to sample from, one per draft to verify.
    const int32_t end = r.num_computed + c.num_new_tokens;
    for (int32_t pos = r.num_tokens() - 1; pos < end; ++pos) {
      if (pos >= r.num_computed) b.logit_rows.push_back(b.num_tokens() - (end - pos));
    }
  }
  return b;
}

void copy_kv_blocks(Backend& backend, const KvCache& cache,
                    const std::vector<std::pair<int32_t, int32_t>>& copies) {
  std::vector<int32_t> flat;
  for (const auto& [src, dst] : copies) {
    flat.push_back(src);
    flat.push_back(dst);
  }
  // The pairs travel in backend memory, like every op operand.
  auto buffer = backend.alloc(flat.size() * sizeof(int32_t));
  backend.write(*buffer, 0, flat.data(), flat.size() * sizeof(int32_t));
  const tsr_tensor pairs = tensor_make(TSR_DTYPE_I32, buffer->base(), {int64_t(copies.size()), 2});
  const std::vector<const tsr_tensor*> caches = cache.all_tensors();
  backend.copy_blocks({sizeof(tsr_copy_blocks_params), caches.data(),
                       static_cast<int32_t>(caches.size()), cache.shape().block_size, &pairs});
  backend.synchronize();
}

}  // namespace tsr
