// Turns the scheduler's decisions, or one sequence's new tokens, into the forward pass's
// step batch (tokens, positions, slot mapping, block tables, logit rows), through the
// sequences' streaming window where one evicts.
#pragma once

#include <span>
#include <vector>

#include "core/kv/kv_cache_manager.h"
#include "core/model/step_batch.h"
#include "core/sched/scheduler.h"

namespace tsr {

// Logit rows are requested, in chunk order, for every chunk that reaches the end of its
// request's tokens: the last token's row and one per draft token. An embedding request's
// chunk asks for hidden rows instead: those its pooling reads (Request::pooled_rows).
StepBatch build_step_batch(const SchedulerOutput& out, const KvCacheManager& kv);

// One sequence's step: `tokens` at positions start, start + 1, ... of `seq`, whose blocks
// must cover them (KvCacheManager::allocate). Logit rows: the last token's, or with
// `all_logits` every token's. `sinks`: the sequence's first tokens, which a ring step of
// a streaming window recomputes (unused otherwise).
StepBatch build_sequence_batch(const KvCacheManager& kv, SeqId seq, int32_t start, std::span<const int32_t> tokens,
                               bool all_logits, std::span<const int32_t> sinks = {});

// New tokens of several sequences (no streaming window) in one step: part i is tokens[i]
// at positions starts[i], starts[i] + 1, ... of seqs[i]. Logit rows: each part's last token.
struct SequencePart {
  SeqId seq;
  int32_t start;
  std::span<const int32_t> tokens;
};
StepBatch build_sequences_batch(const KvCacheManager& kv, std::span<const SequencePart> parts);

}  // namespace tsr
