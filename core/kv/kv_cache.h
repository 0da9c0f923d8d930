// The paged KV cache's storage: for every layer a K and a V tensor of
// [num_blocks * block_size, n_kv_heads, head_dim] in the backend's memory, each of its
// dtype ([cache] dtype, -ctk / -ctv), and, when K and V are stored rotated, the Hadamard
// matrix that rotates them (kv_dtype.h). Which blocks belong to which sequence is the
// block pool's business, not this class's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/kv/kv_dtype.h"
#include "core/plugin_host/backend.h"

namespace tsr {

struct KvCacheShape {
  int32_t n_layer = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  int32_t num_blocks = 0;
  KvFormat format;  // dtypes of K and V, and whether they are stored rotated
  // MLA (deepseek2): attention reads each K row as the value too (its latent part), so V
  // is not stored: v(l) is k(l), and the memory per token is K's alone.
  bool v_in_k = false;

  uint64_t bytes_per_token() const;  // all layers, K and V
  uint64_t bytes_per_block() const;
};

class KvCache {
 public:
  KvCache(Backend& backend, const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  const tsr_tensor& k(int layer) const { return k_[layer]; }
  const tsr_tensor& v(int layer) const { return v_[layer]; }
  // Every K and V tensor, for copy_blocks (each stored tensor once).
  std::vector<const tsr_tensor*> all_tensors() const;
  // Block `block`'s rows of every layer's K and V (shape().bytes_per_block() bytes, layer
  // by layer, K before V): enqueues the reads into `dst`, which holds the bytes once the
  // backend's stream is synchronized.
  void read_block(Backend& backend, int32_t block, std::span<uint8_t> dst) const;
  // The inverse: writes bytes laid out as read_block's into block `block`.
  void write_block(Backend& backend, int32_t block, std::span<const uint8_t> src);
  // The normalized Hadamard matrix [head_dim, head_dim] (F32) that rotates each head of
  // q, k and v before K and V are stored, and the attention's output back; NULL when the
  // cache is not rotated.
  const tsr_tensor* rotation() const { return shape_.format.rotated ? &rotation_ : nullptr; }

 private:
  KvCacheShape shape_;
  // Each K and V slice of one block in buffer order: its buffer, offset and bytes.
  template <typename Fn>
  void for_each_block_slice(int32_t block, Fn&& fn) const;

  std::vector<std::unique_ptr<BackendBuffer>> buffers_;  // layer by layer, K before V (none with v_in_k)
  std::vector<tsr_tensor> k_, v_;
  tsr_tensor rotation_{};
};

// Copies every layer's K and V rows of block src to block dst for each pair (copy-on-write
// of shared blocks), with one copy_blocks op, and waits for it.
void copy_kv_blocks(Backend& backend, const KvCache& cache, const std::vector<std::pair<int32_t, int32_t>>& copies);

// The context (tokens per sequence): `requested` (-c, [model] context) when > 0, refused
// naming the memory it needs when `memory_bytes` cannot hold it; otherwise the trained
// context, or the most that `memory_bytes` holds, with a warning saying how to change it.
int32_t kv_cache_context(const KvCacheShape& shape, uint64_t memory_bytes, int32_t requested,
                         int32_t n_ctx_train);

// Blocks that fit in `memory_bytes`, but no more than `max_seqs` full contexts need.
int32_t kv_cache_num_blocks(const KvCacheShape& shape, uint64_t memory_bytes, int32_t n_ctx,
                            int32_t max_seqs);

}  // namespace tsr
