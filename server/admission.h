// The bounded queue: at most max_queue engine requests may wait for a place in the
// running batch. Requests beyond that are refused (503 with Retry-After) instead of
// piling up latency for everyone.
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
  explicit Admission(int32_t max_queue) : max_queue_(max_queue) {}

  // Admits n requests at once (all choices of one call) or none; with none outstanding,
  // always.
  bool try_admit(int32_t n, int32_t running);
  void release(int32_t n);

 private:
  const int32_t max_queue_;
  std::mutex mutex_;
  int32_t outstanding_ = 0;
};

}  // namespace tsr::server
