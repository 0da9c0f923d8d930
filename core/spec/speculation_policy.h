// How many tokens to draft for a request this step (adaptive k).
//
// Speculation pays when drafts are accepted and verification is cheap. Decode on a CPU
// is bound by reading the weights, so verifying k extra tokens costs little at small
// batch sizes and more as the batch grows and the step becomes compute-bound. The policy:
//  - per request, an exponential moving average a of the acceptance rate (start 1);
//  - k = num_draft_tokens while a >= 0.6, half of it while a >= 0.3, 1 while a >= 0.1;
//  - below 0.1 drafting costs more than it saves (a draft model's own forward passes,
//    verification of tokens that are rejected), so the request drafts one token only every
//    8th step: enough to notice when its text turns predictable again;
//  - then the batch: with R running requests, k is cut so that R * (k + 1) fits in
//    max_batch_tokens, and halved again when R >= 16 (compute-bound steps);
//  - whether a step drafts at all is measured per batch size (SpeculationGate);
//  - adaptive = false always drafts num_draft_tokens (still within the budget).
#pragma once

#include <cstdint>

#include "core/config/config.h"

namespace tsr {

class SpeculationPolicy {
 public:
  struct State {
    double acceptance = 1.0;  // moving average of accepted / drafted
    int32_t idle_steps = 0;   // steps without drafting while acceptance is very low
  };

  SpeculationPolicy(const SpeculativeConfig& spec, const SchedulerConfig& sched);

  // Drafts for this step; advances the probing counter of a request that rarely accepts.
  int32_t num_drafts(State& s, int32_t running_requests) const;
  void observe(State& s, int32_t drafted, int32_t accepted) const;

 private:
  int32_t k_max_;
  bool adaptive_;
  int32_t max_batch_tokens_;
};

}  // namespace tsr
