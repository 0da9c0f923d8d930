// A model with its paged KV cache, its block tables and its forward pass: the one wiring
// of a model run by the engine, by the draft-model host (tsr_model_host) and by
// `tessera perplexity`. It turns scheduler steps or one sequence's tokens into step
// batches and runs them; which requests run is the scheduler's business.
//
// Thread safety: none; one thread steps a runner at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/kv/kv_cache.h"
#include "core/kv/kv_dtype.h"
#include "core/kv/kv_cache_manager.h"
#include "core/model/llama_forward.h"
#include "core/runner/step_batch_builder.h"
#include "core/model/llama_model.h"
#include "core/sched/scheduler.h"

namespace tsr {

struct ModelRunnerOptions {
  int32_t block_size = 16;
  int32_t num_blocks = 0;       // KV blocks (see kv_cache_num_blocks); > 0
  bool prefix_caching = false;  // blocks of committed prefixes are shared between sequences
  KvFormat kv;                  // the cache's dtypes and rotation
  uint64_t host_tier_bytes = 0; // host memory for blocks the prefix cache evicts; 0: none
  std::string disk_tier_path;   // directory of the disk tier below the host tier; empty: none
  uint64_t disk_tier_bytes = 0; // its bound
  std::string disk_tier_identity;  // what its blocks depend on (KvDiskTier)
  StreamingWindow streaming;    // evicting sequences' middles ([cache] eviction); off by default
  ForwardOptions forward;
};

class ModelRunner {
 public:
  // `model` and `backend` outlive the runner.
  ModelRunner(const LlamaModel& model, Backend& backend, const ModelRunnerOptions& options);

  // The cache shape of `model` with blocks of `block_size` tokens in `format` and no blocks
  // yet: what sizing (kv_cache_context, kv_cache_num_blocks) starts from.
  static KvCacheShape cache_shape(const LlamaModel& model, int32_t block_size, const KvFormat& format);
  // The same for a [cache] config (its dtypes and rotation resolved for the model).
  static KvCacheShape cache_shape(const LlamaModel& model, const CacheConfig& cache);

  const LlamaModel& model() const { return model_; }
  int32_t n_vocab() const { return model_.hparams().n_vocab; }
  KvCacheManager& kv() { return kv_; }
  const KvCacheManager& kv() const { return kv_; }
  const LlamaForward& forward() const { return forward_; }
  // The layers whose residual stream every step keeps (LlamaForward::set_capture_layers).
  void set_capture_layers(std::vector<int32_t> layers) { forward_.set_capture_layers(std::move(layers)); }
  const KvHostTier* host_tier() const { return tier_.get(); }  // NULL: none
  const KvDiskTier* disk_tier() const { return disk_.get(); }  // NULL: none

  // A scheduler step: the host-tier copies and block copies (copy-on-write) its
  // allocations asked for, then one forward pass over its chunks. `logits` and `hidden`
  // (embedding requests' states) get the rows build_step_batch asks for. False: `interrupt`
  // (can be NULL) abandoned the pass (LlamaForward::run); the copies stay made.
  bool execute(const SchedulerOutput& out, std::vector<float>& logits, std::vector<float>& hidden,
               const StepInterrupt* interrupt = nullptr);

  // `tokens` at positions start, start + 1, ... of `seq`, whose blocks cover them
  // (kv().allocate). `logits` gets the last token's row, or with `all_logits` every token's.
  // `sinks`: the sequence's first tokens, which a streaming window's ring step recomputes.
  void run_sequence(SeqId seq, int32_t start, std::span<const int32_t> tokens, bool all_logits,
                    std::vector<float>& logits, std::span<const int32_t> sinks = {});

  // Several sequences' new tokens in one forward pass (build_sequences_batch); `logits`
  // gets each part's last row, in order.
  void run_sequences(std::span<const SequencePart> parts, std::vector<float>& logits);

  // run_sequences for an EAGLE-3 head: the batch's row r (the parts' tokens in order)
  // takes row r of `features` (LlamaForward::run_head); `states` gets each part's last
  // row's output state.
  void run_head_sequences(std::span<const SequencePart> parts, const float* features, int32_t width,
                          std::vector<float>& logits, std::vector<float>& states);

 private:
  // Offloads read evicted blocks into the tier, restores write tier blocks into the pool
  // and copy-on-write copies follow, in that order (KvTransfers).
  void apply_kv_moves();

  const LlamaModel& model_;
  Backend& backend_;
  KvCache cache_;
  std::unique_ptr<KvHostTier> tier_;  // before kv_, which points to it
  std::shared_ptr<KvBlockArena> arena_;  // host memory of the tiers' blocks; NULL: no tier
  std::unique_ptr<KvDiskTier> disk_;  // the same
  KvCacheManager kv_;
  LlamaForward forward_;
  // The last restores' sources: a copy from the backend's host memory is in flight until
  // the stream is synchronized (the step's logits are read), so they are kept to the next step.
  std::vector<KvBlockBytes> restoring_;
};

}  // namespace tsr
