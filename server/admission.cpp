#include "server/admission.h"

namespace tsr::server {

bool Admission::try_admit(int32_t n, int32_t running) {
  std::lock_guard lock(mutex_);
  // An idle server takes any call, however many choices it has: refusing it would refuse
  // it forever.
  const int32_t waiting_after = outstanding_ + n - running;
  if (outstanding_ > 0 && waiting_after > max_queue_) return false;
  outstanding_ += n;
  return true;
}

void Admission::release(int32_t n) {
  std::lock_guard lock(mutex_);
  outstanding_ -= n;
}

}  // namespace tsr::server
