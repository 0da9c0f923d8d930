#include "core/runner/model_runner.h"

#include "core/runner/step_batch_builder.h"

namespace tsr {

namespace {

KvCacheShape sized(KvCacheShape shape, int32_t num_blocks) {
  shape.num_blocks = num_blocks;
  return shape;
}

}  // namespace

ModelRunner::ModelRunner(const LlamaModel& model, Backend& backend, const ModelRunnerOptions& options)
    : model_(model),
      backend_(backend),
      cache_(backend, sized(cache_shape(model, options.block_size, options.kv), options.num_blocks)),
      kv_(options.num_blocks, options.block_size, options.prefix_caching),
      forward_(model, backend, cache_, options.forward) {}

KvCacheShape ModelRunner::cache_shape(const LlamaModel& model, int32_t block_size, const KvFormat& format) {
  const LlamaHParams& hp = model.hparams();
  return KvCacheShape{hp.n_layer, hp.n_head_kv, hp.head_dim, block_size, 0, format};
}

KvCacheShape ModelRunner::cache_shape(const LlamaModel& model, const CacheConfig& cache) {
  const KvFormat format =
      kv_format_resolve(cache.k_dtype(), cache.v_dtype(), cache.rotation, model.hparams().head_dim);
  return cache_shape(model, cache.block_size, format);
}

void ModelRunner::execute(const SchedulerOutput& out, std::vector<float>& logits) {
  const auto copies = kv_.take_copies();
  if (!copies.empty()) copy_kv_blocks(backend_, cache_, copies);
  forward_.run(build_step_batch(out, kv_), logits);
}

void ModelRunner::run_sequence(SeqId seq, int32_t start, std::span<const int32_t> tokens, bool all_logits,
                               std::vector<float>& logits) {
  forward_.run(build_sequence_batch(kv_, seq, start, tokens, all_logits), logits);
}

}  // namespace tsr
