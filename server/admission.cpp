#include "server/admission.h"

namespace tsr::server {

Admission::Verdict Admission::try_admit(int32_t n, int64_t tokens, int32_t running) {
  std::lock_guard lock(mutex_);
  // An idle server takes any call, however many choices or tokens it has: refusing it
  // would refuse it forever.
  if (outstanding_ > 0) {
    if (outstanding_ + n - running > max_queue_) return Verdict::QUEUE_FULL;
    if (outstanding_tokens_ + tokens > max_tokens_) return Verdict::TOO_MANY_TOKENS;
  }
  outstanding_ += n;
  outstanding_tokens_ += tokens;
  return Verdict::ADMITTED;
}

void Admission::release(int32_t n, int64_t tokens) {
  std::lock_guard lock(mutex_);
  outstanding_ -= n;
  // Settles at 0 with the last request, whatever a count missed.
  outstanding_tokens_ = outstanding_ > 0 ? outstanding_tokens_ - tokens : 0;
}

}  // namespace tsr::server
