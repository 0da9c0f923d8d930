#include "core/kv/kv_cache.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/error.h"
#include "core/kv/kv_dtype.h"
#include "core/plugin_host/tensor.h"

namespace tsr {

namespace {

uint64_t kv_blocks_for(const KvCacheShape& shape, int32_t tokens) {
  return (uint64_t(tokens) + shape.block_size - 1) / shape.block_size;
}

}  // namespace

uint64_t KvCacheShape::bytes_per_token() const {
  const int64_t k = kv_head_bytes(format.k, head_dim), v = kv_head_bytes(format.v, head_dim);
  if (k < 0 || v < 0) throw Error("KV cache: heads of " + std::to_string(head_dim) + " elements are not whole blocks");
  return uint64_t(n_layer) * n_kv_heads * uint64_t(k + (v_in_k ? 0 : v));
}

uint64_t KvCacheShape::bytes_per_block() const { return bytes_per_token() * block_size; }

KvCache::KvCache(Backend& backend, const KvCacheShape& shape) : shape_(shape) {
  if (shape.num_blocks <= 0) throw Error("the KV cache needs at least one block");
  if (shape.v_in_k && (shape.format.rotated || shape.format.k != shape.format.v)) {
    throw Error("the KV cache of latent attention (deepseek2) holds one row per token: K and V take one dtype "
                "(-ctk = -ctv) and are not rotated",
                TSR_STATUS_UNSUPPORTED);
  }
  const int64_t slots = int64_t(shape.num_blocks) * shape.block_size;
  for (int l = 0; l < shape.n_layer; ++l) {
    for (auto [list, dtype] : {std::pair{&k_, shape.format.k}, {&v_, shape.format.v}}) {
      if (list == &v_ && shape.v_in_k) {
        v_.push_back(k_.back());
        continue;
      }
      // Not cleared: attention reads only the slots a sequence has written, so no value
      // here is ever read before it is written. On the CPU the pages are then touched as
      // blocks are first used, not all at start-up (seconds for a 2 GiB pool), and a pool
      // larger than the memory a run needs costs nothing.
      buffers_.push_back(backend.alloc(uint64_t(slots) * shape.n_kv_heads * kv_head_bytes(dtype, shape.head_dim)));
      list->push_back(tensor_make(dtype, buffers_.back()->base(), {slots, shape.n_kv_heads, shape.head_dim}));
    }
  }
  if (shape.format.rotated) {
    const std::vector<float> h = hadamard_matrix(shape.head_dim);
    buffers_.push_back(backend.alloc(h.size() * sizeof(float)));
    backend.write(*buffers_.back(), 0, h.data(), h.size() * sizeof(float));
    rotation_ = tensor_make(TSR_DTYPE_F32, buffers_.back()->base(), {shape.head_dim, shape.head_dim});
  }
  spdlog::info("KV cache: {} blocks of {} tokens, K {} / V {}{}, {:.1f} MiB ({} bytes per token)", shape.num_blocks,
               shape.block_size, tsr_dtype_name(shape.format.k), tsr_dtype_name(shape.format.v),
               shape.format.rotated ? " (Hadamard-rotated)" : "",
               double(shape.bytes_per_block()) * shape.num_blocks / (1 << 20), shape.bytes_per_token());
}

std::vector<const tsr_tensor*> KvCache::all_tensors() const {
  std::vector<const tsr_tensor*> all;
  for (size_t l = 0; l < k_.size(); ++l) {
    all.push_back(&k_[l]);
    if (!shape_.v_in_k) all.push_back(&v_[l]);
  }
  return all;
}

template <typename Fn>
void KvCache::for_each_block_slice(int32_t block, Fn&& fn) const {
  if (block < 0 || block >= shape_.num_blocks) throw Error("KV block out of range", TSR_STATUS_INTERNAL);
  uint64_t done = 0;
  const int per_layer = shape_.v_in_k ? 1 : 2;
  for (int l = 0; l < shape_.n_layer; ++l) {
    for (int kv = 0; kv < per_layer; ++kv) {
      const tsr_dtype dtype = kv == 0 ? shape_.format.k : shape_.format.v;
      const uint64_t bytes = uint64_t(shape_.block_size) * shape_.n_kv_heads * kv_head_bytes(dtype, shape_.head_dim);
      fn(*buffers_[size_t(per_layer * l + kv)], uint64_t(block) * bytes, done, bytes);
      done += bytes;
    }
  }
}

void KvCache::read_block(Backend& backend, int32_t block, std::span<uint8_t> dst) const {
  if (dst.size() != shape_.bytes_per_block()) throw Error("KV block read of the wrong size", TSR_STATUS_INTERNAL);
  for_each_block_slice(block, [&](BackendBuffer& buf, uint64_t offset, uint64_t at, uint64_t bytes) {
    backend.read(buf, offset, dst.data() + at, bytes);
  });
}

void KvCache::write_block(Backend& backend, int32_t block, std::span<const uint8_t> src) {
  if (src.size() != shape_.bytes_per_block()) throw Error("KV block write of the wrong size", TSR_STATUS_INTERNAL);
  for_each_block_slice(block, [&](BackendBuffer& buf, uint64_t offset, uint64_t at, uint64_t bytes) {
    backend.write(buf, offset, src.data() + at, bytes);
  });
}

int32_t kv_cache_context(const KvCacheShape& shape, uint64_t memory_bytes, int32_t requested,
                         int32_t n_ctx_train) {
  const uint64_t fit_blocks = memory_bytes / shape.bytes_per_block();
  const uint64_t fit = std::min<uint64_t>(fit_blocks * uint64_t(shape.block_size), INT32_MAX);
  const double mib = double(memory_bytes) / (1 << 20);
  if (requested > 0) {
    if (uint64_t(requested) > fit) {
      throw Error(fmt::format("a context of {} tokens needs {:.1f} MiB of KV cache; [cache] memory = {:.1f} MiB "
                              "holds {} tokens: raise [cache] memory or lower -c",
                              requested, double(kv_blocks_for(shape, requested)) * double(shape.bytes_per_block()) / (1 << 20),
                              mib, fit));
    }
    if (requested > n_ctx_train) {
      spdlog::warn("context: {} tokens, more than the {} the model was trained for", requested, n_ctx_train);
    } else {
      spdlog::info("context: {} tokens (-c / [model] context; the model was trained for {})", requested, n_ctx_train);
    }
    return requested;
  }
  if (uint64_t(n_ctx_train) <= fit) {
    spdlog::info("context: {} tokens, the model's trained context", n_ctx_train);
    return n_ctx_train;
  }
  if (fit == 0) {
    throw Error(fmt::format("[cache] memory = {:.1f} MiB holds no block of {} tokens ({} bytes)", mib,
                            shape.block_size, shape.bytes_per_block()));
  }
  spdlog::warn("context: {} tokens, of the {} the model was trained for: [cache] memory = {:.1f} MiB holds no "
               "more (raise [cache] memory for more, or choose a smaller context with -c N / [model] context)",
               fit, n_ctx_train, mib);
  return static_cast<int32_t>(fit);
}

int32_t kv_cache_num_blocks(const KvCacheShape& shape, uint64_t memory_bytes, int32_t n_ctx,
                            int32_t max_seqs) {
  const uint64_t fit = memory_bytes / shape.bytes_per_block();
  const uint64_t per_seq = kv_blocks_for(shape, n_ctx);
  const uint64_t needed = per_seq * uint64_t(std::max(max_seqs, 1));
  const uint64_t blocks = std::min(fit, needed);
  if (blocks < per_seq) {
    throw Error("[cache] memory = " + std::to_string(memory_bytes) +
                " bytes holds " + std::to_string(fit) + " blocks; one full context needs " +
                std::to_string(per_seq));
  }
  return static_cast<int32_t>(std::min<uint64_t>(blocks, INT32_MAX / shape.block_size));
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
