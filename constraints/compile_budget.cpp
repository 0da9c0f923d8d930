#include "constraints/compile_budget.h"

namespace tsr::constraints {

namespace {
// Initial-exec: this code lives in dlopen'ed constraint plugins, and a dynamic TLS block
// of theirs, once the host has called into them on a thread, outlives their dlclose in
// that thread's DTV, where LeakSanitizer's exit-time scan crashed on it. A pointer fits
// in the static TLS that glibc sets aside for such modules.
[[gnu::tls_model("initial-exec")]] thread_local CompileBudget* t_budget = nullptr;
}  // namespace

CompileBudget::CompileBudget(std::function<bool()> should_stop)
    : should_stop_(std::move(should_stop)), outer_(t_budget) {
  t_budget = this;
}

CompileBudget::~CompileBudget() { t_budget = outer_; }

bool CompileBudget::installed() { return t_budget != nullptr; }

void CompileBudget::charge(size_t units) {
  CompileBudget* b = t_budget;
  if (b == nullptr) return;
  b->units_ += units;
  if (b->units_ < kPollUnits) return;
  b->units_ = 0;
  if (b->should_stop_()) throw CompileStopped();
}

}  // namespace tsr::constraints
