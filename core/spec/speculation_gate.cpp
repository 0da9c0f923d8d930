#include "core/spec/speculation_gate.h"

#include <algorithm>
#include <bit>

namespace tsr {

namespace {

constexpr double kSmoothing = 0.2;  // weight of the newest step in a rate's moving average

}  // namespace

int SpeculationGate::class_of(int32_t running) {
  const auto r = static_cast<uint32_t>(std::max(running, 1));
  return std::min(kClasses - 1, static_cast<int>(std::bit_width(r)) - 1);
}

bool SpeculationGate::drafts(int32_t running) {
  Class& c = classes_[size_t(class_of(running))];
  const int64_t d = c.decisions++;
  if (c.on.samples < kWarmup || c.off.samples < kWarmup) return c.on.samples <= c.off.samples;
  if (c.on.rate >= c.off.rate) return d % kExploreOff != 0;
  return probes_ && d % kExploreOn == 0;
}

void SpeculationGate::observe(int32_t running, bool drafted, int64_t tokens, double seconds) {
  if (tokens <= 0 || seconds <= 0) return;
  Mode& m = drafted ? classes_[size_t(class_of(running))].on : classes_[size_t(class_of(running))].off;
  const double rate = double(tokens) / seconds;
  m.rate = m.samples == 0 ? rate : (1 - kSmoothing) * m.rate + kSmoothing * rate;
  ++m.samples;
}

double SpeculationGate::rate(int32_t running, bool drafted) const {
  const Class& c = classes_[size_t(class_of(running))];
  return drafted ? c.on.rate : c.off.rate;
}

}  // namespace tsr
