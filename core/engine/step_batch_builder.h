// Turns the scheduler's decisions into the forward pass's step batch (tokens, positions,
// slot mapping, block tables), and block copies into a backend copy_blocks call.
#pragma once

#include <utility>
#include <vector>

#include "core/kv/kv_cache.h"
#include "core/kv/kv_cache_manager.h"
#include "core/model/llama_forward.h"
#include "core/sched/scheduler.h"

namespace tsr {

// Logit rows are requested, in chunk order, for every chunk that reaches the end of its
// request's tokens: the last token's row and one per draft token.
StepBatch build_step_batch(const SchedulerOutput& out, const KvCacheManager& kv);

void copy_kv_blocks(Backend& backend, const KvCache& cache,
                    const std::vector<std::pair<int32_t, int32_t>>& copies);

}  // namespace tsr
