// The bounded queue: at most max_queue engine requests may wait for a place in the
// running batch, and the unfinished requests hold at most max_queue_tokens prompt tokens
// (so that a queue of long prompts is bounded by its work, not only by its count).
// Requests beyond either are refused (503 with Retry-After) instead of piling up latency
// for everyone.
//
// "Waiting" is counted as requests this server has submitted and not yet seen finish,
// minus those the engine last reported running. The running count comes from the
// engine's stats snapshot, one step old at most, so the bound is approximate by the
// requests that arrived during the current step.
#pragma once

#include <cstdint>
#include <mutex>

namespace tsr::server {

class Admission {
 public:
  Admission(int32_t max_queue, int64_t max_queue_tokens) : max_queue_(max_queue), max_tokens_(max_queue_tokens) {}

  enum class Verdict { ADMITTED, QUEUE_FULL, TOO_MANY_TOKENS };
  // Admits n requests holding `tokens` prompt tokens in all (the choices of one call) or
  // none; with none outstanding, always.
  Verdict try_admit(int32_t n, int64_t tokens, int32_t running);
  // One finished request (or n refused ones) and the prompt tokens it held.
  void release(int32_t n, int64_t tokens);
  int64_t max_tokens() const { return max_tokens_; }

 private:
  const int32_t max_queue_;
  const int64_t max_tokens_;
  std::mutex mutex_;
  int32_t outstanding_ = 0;
  int64_t outstanding_tokens_ = 0;
};

}  // namespace tsr::server
