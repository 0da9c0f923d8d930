#include "core/spec/speculation_policy.h"

#include <algorithm>

namespace tsr {

namespace {

constexpr double kSmoothing = 0.3;  // weight of the newest step in the moving average
constexpr int32_t kLargeBatch = 16;
constexpr double kHopeless = 0.1;   // acceptance below which drafting only probes
constexpr int32_t kProbeEvery = 8;  // steps between probes

}  // namespace

SpeculationPolicy::SpeculationPolicy(const SpeculativeConfig& spec, const SchedulerConfig& sched)
    : k_max_(spec.num_draft_tokens), adaptive_(spec.adaptive), max_batch_tokens_(sched.max_batch_tokens) {}

int32_t SpeculationPolicy::num_drafts(State& s, int32_t running) const {
  int32_t k = k_max_;
  if (adaptive_) {
    if (s.acceptance < kHopeless) {
      if (++s.idle_steps < kProbeEvery) return 0;
      s.idle_steps = 0;
      k = 1;
    } else if (s.acceptance < 0.3) {
      k = 1;
    } else if (s.acceptance < 0.6) {
      k = std::max(1, k_max_ / 2);
    }
    if (running >= kLargeBatch) k = std::max(1, k / 2);
  }
  const int32_t fits = max_batch_tokens_ / std::max(running, 1) - 1;
  return std::max(0, std::min(k, fits));
}

void SpeculationPolicy::observe(State& s, int32_t drafted, int32_t accepted) const {
  if (drafted <= 0) return;
  s.acceptance = (1 - kSmoothing) * s.acceptance + kSmoothing * double(accepted) / drafted;
}

}  // namespace tsr
