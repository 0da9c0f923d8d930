// The target's draw (draft.h, tsr_draft_sampling) run over a draft's own logits, so that a
// draft proposes the token the target's draw at the same uniform is likely to pick. It
// follows the host's sampler step for step (samplers/sampler_chain.cpp: top_k, top_p,
// min_p, then temperature; softmaxes in double, ties to the lower id; the exponential race
// of samplers/token_draw.cpp through tsr_draft_race_time, in ascending id), so equal logits
// give the host's token exactly (samplers/draft_draw_test.cpp proves it against the host's
// code).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/draft.h"

namespace tsr::sdk {

namespace draw_detail {

struct Candidate {
  int32_t id;     // the target's id: the draw's order
  int32_t index;  // into the draft's logits
  float logit;
};

inline bool ranks_higher(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

inline double max_logit(const std::vector<Candidate>& c) {
  float m = -INFINITY;
  for (const Candidate& x : c) m = std::max(m, x.logit);
  return m;
}

inline std::vector<double> softmax(const std::vector<Candidate>& c) {
  const double m = max_logit(c);
  std::vector<double> p(c.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(double(c[i].logit) - m);
  for (double& x : p) x /= sum;
  return p;
}

inline void top_k(std::vector<Candidate>& c, int32_t k, bool& sorted) {
  if (k <= 0 || size_t(k) >= c.size()) return;
  std::partial_sort(c.begin(), c.begin() + k, c.end(), ranks_higher);
  c.resize(size_t(k));
  sorted = true;
}

inline void top_p(std::vector<Candidate>& c, float p, bool& sorted) {
  if (p >= 1.0f) return;
  if (!sorted) std::sort(c.begin(), c.end(), ranks_higher);
  sorted = true;
  const std::vector<double> probs = softmax(c);
  double cumulative = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    cumulative += probs[i];
    if (cumulative >= p) {
      c.resize(i + 1);
      return;
    }
  }
}

inline void min_p(std::vector<Candidate>& c, float p) {
  if (p <= 0.0f) return;
  const double threshold = max_logit(c) + std::log(double(p));
  std::erase_if(c, [&](const Candidate& x) { return double(x.logit) < threshold; });
}

inline void temperature(std::vector<Candidate>& c, float t) {
  float largest = 0;
  for (const Candidate& x : c) {
    if (std::isfinite(x.logit)) largest = std::max(largest, std::fabs(x.logit));
  }
  if (t > 0.0f && std::isfinite(largest / t)) {
    for (Candidate& x : c) x.logit /= t;
    return;
  }
  const Candidate best = *std::min_element(c.begin(), c.end(), ranks_higher);
  c.assign(1, best);
}

}  // namespace draw_detail

// The index into `logits` (a draft's next-token row, finite or -inf) of the token the
// target's draw at uniform `u` picks from these logits. `target_ids` maps a draft index to
// the target's id where the draft's vocabulary is reduced (EAGLE's d2t); empty: the same
// ids. -1 when every logit is -inf.
inline int32_t draw_as_target(std::span<const float> logits, const tsr_draft_sampling& s, double u,
                              std::span<const int32_t> target_ids = {}) {
  using namespace draw_detail;
  std::vector<Candidate> c;
  c.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == -INFINITY) continue;  // the host's softmax gives them 0: never drawn
    c.push_back({target_ids.empty() ? int32_t(i) : target_ids[i], int32_t(i), logits[i]});
  }
  if (c.empty()) return -1;
  if (!target_ids.empty()) std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  bool sorted = false;
  top_k(c, s.top_k, sorted);
  top_p(c, s.top_p, sorted);
  min_p(c, s.min_p);
  temperature(c, s.temperature);
  const std::vector<double> probs = softmax(c);
  std::vector<size_t> order(c.size());  // the race runs in ascending id, as the host's
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (sorted) std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return c[a].id < c[b].id; });
  int32_t winner = -1;
  double best = INFINITY;
  for (const size_t i : order) {
    if (probs[i] <= 0) continue;
    const double time = tsr_draft_race_time(u, c[i].id, probs[i], best);
    if (time < best) best = time, winner = c[i].index;
  }
  return winner;
}

// A draft's token at `step` (0: the first after the history) from its logits: the target's
// draw at that step's uniform where the request is sampled (`sampling` non-NULL), else the
// argmax; its softmax probability in `prob`. An index into `logits`.
inline int32_t draft_token(std::span<const float> logits, const tsr_draft_sampling* sampling, int32_t step,
                           float* prob, std::span<const int32_t> target_ids = {}) {
  const auto best = std::max_element(logits.begin(), logits.end());
  auto chosen = static_cast<int32_t>(best - logits.begin());
  if (sampling != nullptr && step < sampling->depth) {
    const int32_t drawn = draw_as_target(logits, *sampling, sampling->uniforms[step], target_ids);
    if (drawn >= 0) chosen = drawn;
  }
  double total = 0;
  for (const float l : logits) total += std::exp(double(l - *best));
  *prob = static_cast<float>(std::exp(double(logits[size_t(chosen)] - *best)) / total);
  return chosen;
}

}  // namespace tsr::sdk
