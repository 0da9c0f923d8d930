#include "core/runner/model_runner.h"

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "core/runner/step_batch_builder.h"

namespace tsr {

namespace {

KvCacheShape sized(KvCacheShape shape, int32_t num_blocks) {
  shape.num_blocks = num_blocks;
  return shape;
}

// Blocks on their way between the tiers beyond what the host tier holds (the disk tier's
// write queue, reads, restores) that may still take the backend's host memory.
constexpr uint64_t kInFlightBlocks = 64;

std::unique_ptr<KvHostTier> make_host_tier(uint64_t bytes, const KvCache& cache) {
  const uint64_t block_bytes = cache.shape().bytes_per_block();
  if (bytes == 0) return nullptr;
  if (bytes < block_bytes) {
    spdlog::warn("KV host tier off: [cache] host_memory = {} bytes holds no block of {} bytes", bytes, block_bytes);
    return nullptr;
  }
  auto tier = std::make_unique<KvHostTier>(bytes, block_bytes);
  spdlog::info("KV host tier: {} blocks, {:.1f} MiB", tier->capacity_blocks(),
               double(tier->capacity_blocks() * block_bytes) / (1 << 20));
  return tier;
}

std::shared_ptr<KvBlockArena> make_arena(const KvHostTier* tier, const KvCache& cache, Backend& backend) {
  if (tier == nullptr) return nullptr;
  return KvBlockArena::create(cache.shape().bytes_per_block(), tier->capacity_blocks() + kInFlightBlocks, &backend);
}

std::unique_ptr<KvDiskTier> make_disk_tier(const ModelRunnerOptions& o, std::shared_ptr<KvBlockArena> arena) {
  if (o.disk_tier_path.empty()) return nullptr;
  if (arena == nullptr) {
    throw Error("[cache] disk_path needs [cache] host_memory (and prefix_caching): disk blocks are read back "
                "through the host tier");
  }
  return std::make_unique<KvDiskTier>(o.disk_tier_path, o.disk_tier_bytes, std::move(arena), o.disk_tier_identity);
}

}  // namespace

ModelRunner::ModelRunner(const LlamaModel& model, Backend& backend, const ModelRunnerOptions& options)
    : model_(model),
      backend_(backend),
      cache_(backend, sized(cache_shape(model, options.block_size, options.kv), options.num_blocks)),
      tier_(options.prefix_caching ? make_host_tier(options.host_tier_bytes, cache_) : nullptr),
      arena_(make_arena(tier_.get(), cache_, backend)),
      disk_(make_disk_tier(options, arena_)),
      kv_(options.num_blocks, options.block_size, options.prefix_caching, tier_.get(), disk_.get(), options.streaming),
      forward_(model, backend, cache_, options.forward) {}

KvCacheShape ModelRunner::cache_shape(const LlamaModel& model, int32_t block_size, const KvFormat& format) {
  const LlamaHParams& hp = model.hparams();
  KvCacheShape shape{hp.n_layer, hp.n_head_kv, hp.head_dim, block_size, 0, format};
  shape.v_in_k = hp.mla();
  return shape;
}

KvCacheShape ModelRunner::cache_shape(const LlamaModel& model, const CacheConfig& cache) {
  const KvFormat format =
      kv_format_resolve(cache.k_dtype(), cache.v_dtype(), cache.rotation, model.hparams().head_dim);
  return cache_shape(model, cache.block_size, format);
}

void ModelRunner::apply_kv_moves() {
  KvTransfers moves = kv_.take_transfers();
  // Offloads go to the host tier and, like stores, to the disk tier (its own thread writes).
  std::vector<std::pair<int32_t, BlockHash>> out = moves.offloads;
  out.insert(out.end(), moves.stores.begin(), moves.stores.end());
  std::vector<std::shared_ptr<KvHostBlock>> read(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    read[i] = arena_->allocate();
    cache_.read_block(backend_, out[i].first, read[i]->bytes());
  }
  if (!out.empty()) backend_.synchronize();
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < moves.offloads.size()) tier_->put(out[i].second, read[i]);
    if (disk_ != nullptr) disk_->store(out[i].second, read[i]);
  }
  restoring_.clear();  // the last step's logits were read: its copies are done
  for (auto& [block, bytes] : moves.restores) {
    cache_.write_block(backend_, block, bytes->bytes());
    restoring_.push_back(std::move(bytes));
  }
  const auto copies = kv_.take_copies();
  if (!copies.empty()) copy_kv_blocks(backend_, cache_, copies);
}

bool ModelRunner::execute(const SchedulerOutput& out, std::vector<float>& logits, std::vector<float>& hidden,
                          const StepInterrupt* interrupt) {
  apply_kv_moves();
  return forward_.run(build_step_batch(out, kv_), logits, &hidden, interrupt);
}

void ModelRunner::run_sequence(SeqId seq, int32_t start, std::span<const int32_t> tokens, bool all_logits,
                               std::vector<float>& logits, std::span<const int32_t> sinks) {
  apply_kv_moves();
  forward_.run(build_sequence_batch(kv_, seq, start, tokens, all_logits, sinks), logits);
}

void ModelRunner::run_sequences(std::span<const SequencePart> parts, std::vector<float>& logits) {
  apply_kv_moves();
  forward_.run(build_sequences_batch(kv_, parts), logits);
}

void ModelRunner::run_head_sequences(std::span<const SequencePart> parts, const float* features, int32_t width,
                                     std::vector<float>& logits, std::vector<float>& states) {
  apply_kv_moves();
  forward_.run_head(build_sequences_batch(kv_, parts), features, width, logits, states);
}

}  // namespace tsr
