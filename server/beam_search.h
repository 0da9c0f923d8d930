// Beam search for /v1/completions (vLLM's extension: use_beam_search, beam_width or
// best_of, length_penalty), deterministic over log-softmax of the raw logits. Each step
// asks the engine for one token of every live beam with the top 2 x width candidates;
// a beam's prompt and tokens so far reach the engine as one prompt, so the beams share
// their common prefix's KV through the prefix cache (each step computes at most the last,
// partial block of each beam). Selection follows Hugging Face's beam search with early
// stopping: the best 2 x width candidates in order; an end-of-generation candidate ranked
// within the width finishes a hypothesis, the others continue until width beams live;
// done once width hypotheses finished, or at max_tokens. A hypothesis scores its
// cumulative logprob over (its token count)^length_penalty. At width 1 this is greedy
// decoding.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/request/request.h"

namespace tsr {
class Engine;
}

namespace tsr::server {

struct Hypothesis {
  std::vector<int32_t> tokens;  // generated, the end-of-generation token included
  double logprob = 0;           // cumulative
  bool ended = false;           // by an end-of-generation token (finish "stop"), else by length
};

class BeamSearch {
 public:
  using Candidates = std::vector<std::pair<int32_t, double>>;  // (token, logprob), best first

  // `is_eog`: whether a token ends generation (never with ignore_eos).
  BeamSearch(int32_t width, double length_penalty, std::function<bool(int32_t)> is_eog);

  const std::vector<Hypothesis>& beams() const { return beams_; }
  // Advances with each live beam's best candidates (beams()[i]'s in candidates[i]).
  void step(const std::vector<Candidates>& candidates);
  bool done() const { return beams_.empty() || int32_t(finished_.size()) >= width_; }
  // The n best hypotheses, best first: the finished ones and the beams still live.
  std::vector<Hypothesis> best(int32_t n) const;

 private:
  double score(const Hypothesis& h) const;

  int32_t width_;
  double length_penalty_;
  std::function<bool(int32_t)> is_eog_;
  std::vector<Hypothesis> beams_;
  std::vector<Hypothesis> finished_;
};

// Runs beam search for `prompt` through the engine: `base` gives the priority and cache
// salt, `max_tokens` and ignore_eos; returns the n best. Throws ApiError 503 when
// `stopping` turns true (the server shuts down) and 500 when a step fails.
std::vector<Hypothesis> run_beam_search(Engine& engine, const std::vector<int32_t>& prompt, const RequestParams& base,
                                        int32_t width, double length_penalty, int32_t n,
                                        const std::atomic<bool>& stopping);

}  // namespace tsr::server
