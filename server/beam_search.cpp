#include "server/beam_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <numeric>

#include "core/engine/engine.h"
#include "server/api_error.h"

namespace tsr::server {

namespace {

using namespace std::chrono_literals;

constexpr auto kPollInterval = 250ms;  // how often a waiting handler checks for shutdown

// The k most probable tokens of a logits row with their log-softmax values.
BeamSearch::Candidates top_logprobs(std::span<const float> row, size_t k) {
  const float max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (const float v : row) sum += std::exp(double(v) - max);
  const double log_z = max + std::log(sum);
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  k = std::min(k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(),
                    [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)] || (row[size_t(a)] == row[size_t(b)] && a < b); });
  BeamSearch::Candidates out;
  for (size_t i = 0; i < k; ++i) out.emplace_back(ids[i], double(row[size_t(ids[i])]) - log_z);
  return out;
}

// One engine request per live beam for its next token's candidates. The engine's
// callbacks may outlive the step (a cancelled request still reports its end), so what
// they touch is shared-owned.
class BeamStep {
 public:
  BeamStep(Engine& engine, size_t beams) : engine_(engine), state_(std::make_shared<State>()) {
    state_->candidates.resize(beams);
    state_->pending = beams;
  }
  ~BeamStep() {
    for (const RequestId id : ids_) engine_.cancel(id);  // a no-op for finished ones
  }

  void submit(size_t beam, RequestParams p, size_t k) {
    p.on_logits = [state = state_, beam, k](std::span<const float> row) {
      BeamSearch::Candidates c = top_logprobs(row, k);
      std::lock_guard lock(state->mutex);
      state->candidates[beam] = std::move(c);
    };
    ids_.push_back(engine_.submit(std::move(p), [state = state_](const RequestOutput& out) {
      if (!out.finished) return;
      std::lock_guard lock(state->mutex);
      if (out.finish_reason == TSR_FINISH_ERROR) state->error = out.error;
      --state->pending;
      state->done.notify_all();
    }));
  }

  std::vector<BeamSearch::Candidates> wait(const std::atomic<bool>& stopping) {
    std::unique_lock lock(state_->mutex);
    while (!state_->done.wait_for(lock, kPollInterval, [&] { return state_->pending == 0; })) {
      if (stopping) throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
    }
    if (!state_->error.empty()) throw ApiError(500, "beam search failed: " + state_->error, "server_error");
    return std::move(state_->candidates);
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable done;
    std::vector<BeamSearch::Candidates> candidates;
    size_t pending = 0;
    std::string error;
  };
  Engine& engine_;
  std::shared_ptr<State> state_;
  std::vector<RequestId> ids_;
};

}  // namespace

BeamSearch::BeamSearch(int32_t width, double length_penalty, std::function<bool(int32_t)> is_eog)
    : width_(width), length_penalty_(length_penalty), is_eog_(std::move(is_eog)), beams_{Hypothesis{}} {}

double BeamSearch::score(const Hypothesis& h) const {
  return h.tokens.empty() ? h.logprob : h.logprob / std::pow(double(h.tokens.size()), length_penalty_);
}

void BeamSearch::step(const std::vector<Candidates>& candidates) {
  struct Next {
    size_t beam;
    int32_t token;
    double logprob;
  };
  std::vector<Next> all;
  for (size_t b = 0; b < beams_.size(); ++b) {
    for (const auto& [token, lp] : candidates[b]) all.push_back({b, token, beams_[b].logprob + lp});
  }
  std::stable_sort(all.begin(), all.end(), [](const Next& a, const Next& b) { return a.logprob > b.logprob; });
  std::vector<Hypothesis> next;
  for (size_t rank = 0; rank < all.size() && rank < size_t(2 * width_) && int32_t(next.size()) < width_; ++rank) {
    Hypothesis h = beams_[all[rank].beam];
    h.tokens.push_back(all[rank].token);
    h.logprob = all[rank].logprob;
    if (!is_eog_(all[rank].token)) {
      next.push_back(std::move(h));
    } else if (rank < size_t(width_)) {
      h.ended = true;
      finished_.push_back(std::move(h));
    }
  }
  beams_ = std::move(next);
}

std::vector<Hypothesis> BeamSearch::best(int32_t n) const {
  std::vector<Hypothesis> all = finished_;
  all.insert(all.end(), beams_.begin(), beams_.end());
  std::stable_sort(all.begin(), all.end(), [&](const Hypothesis& a, const Hypothesis& b) { return score(a) > score(b); });
  all.resize(std::min(all.size(), size_t(n)));
  return all;
}

std::vector<Hypothesis> run_beam_search(Engine& engine, const std::vector<int32_t>& prompt, const RequestParams& base,
                                        int32_t width, double length_penalty, int32_t n,
                                        const std::atomic<bool>& stopping) {
  const Tokenizer& tok = engine.tokenizer();
  BeamSearch search(width, length_penalty, [&](int32_t t) { return !base.ignore_eos && tok.is_eog(t); });
  const int32_t room = std::min(base.max_tokens, engine.context_length() - int32_t(prompt.size()) - 1);
  for (int32_t t = 0; t < room && !search.done(); ++t) {
    BeamStep step(engine, search.beams().size());
    for (size_t b = 0; b < search.beams().size(); ++b) {
      RequestParams p;
      p.prompt = prompt;
      p.prompt.insert(p.prompt.end(), search.beams()[b].tokens.begin(), search.beams()[b].tokens.end());
      p.max_tokens = 1;
      p.sampling.temperature = 0;
      p.ignore_eos = true;
      p.priority = base.priority;
      p.cache_salt = base.cache_salt;
      step.submit(b, std::move(p), size_t(2 * width));
    }
    search.step(step.wait(stopping));
  }
  return search.best(n);
}

}  // namespace tsr::server
