#include "core/kv/kv_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/error.h"
#include "core/plugin_host/tensor.h"

namespace tsr {

uint64_t KvCacheShape::bytes_per_block() const {
  return uint64_t(2) * n_layer * block_size * n_kv_heads * head_dim * sizeof(float);
}

KvCache::KvCache(Backend& backend, const KvCacheShape& shape) : shape_(shape) {
  if (shape.num_blocks <= 0) throw Error("the KV cache needs at least one block");
  const int64_t slots = int64_t(shape.num_blocks) * shape.block_size;
  const uint64_t bytes = uint64_t(slots) * shape.n_kv_heads * shape.head_dim * sizeof(float);
  for (int l = 0; l < shape.n_layer; ++l) {
    for (auto* list : {&k_, &v_}) {
      buffers_.push_back(backend.alloc(bytes));
      // Faulted in now, not block by block while serving: no page faults on the step path,
      // and resident memory is flat from the start instead of growing as the prefix cache
      // first reaches each block.
      backend.memset(*buffers_.back(), 0, 0, bytes);
      list->push_back(tensor_make(TSR_DTYPE_F32, buffers_.back()->base(),
                                  {slots, shape.n_kv_heads, shape.head_dim}));
    }
  }
  spdlog::info("KV cache: {} blocks of {} tokens, {:.1f} MiB", shape.num_blocks,
               shape.block_size, double(bytes) * 2 * shape.n_layer / (1 << 20));
}

std::vector<const tsr_tensor*> KvCache::all_tensors() const {
  std::vector<const tsr_tensor*> all;
  for (size_t l = 0; l < k_.size(); ++l) {
    all.push_back(&k_[l]);
    all.push_back(&v_[l]);
  }
  return all;
}

int32_t kv_cache_num_blocks(const KvCacheShape& shape, uint64_t memory_bytes, int32_t n_ctx,
                            int32_t max_seqs) {
  const uint64_t fit = memory_bytes / shape.bytes_per_block();
  const uint64_t per_seq = (uint64_t(n_ctx) + shape.block_size - 1) / shape.block_size;
  const uint64_t needed = per_seq * uint64_t(std::max(max_seqs, 1));
  const uint64_t blocks = std::min(fit, needed);
  if (blocks < per_seq) {
    throw Error("[cache] memory = " + std::to_string(memory_bytes) +
                " bytes holds " + std::to_string(fit) + " blocks; one full context needs " +
                std::to_string(per_seq));
  }
  return static_cast<int32_t>(std::min<uint64_t>(blocks, INT32_MAX / shape.block_size));
}

}  // namespace tsr
