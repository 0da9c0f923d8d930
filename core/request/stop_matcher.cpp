#include "core/request/stop_matcher.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace tsr {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

StopMatcher::Result StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  pending_ += text;
  // Text released earlier can hold no part of an occurrence: pending_ starts with the
  // longest suffix that could begin one, so every occurrence lies inside pending_.
  const Found found = earliest_stop();
  if (found.index < stops_.size()) {
    stopped_ = true;
    Result result{pending_.substr(0, found.start), true, found.index};
    pending_.clear();
    return result;
  }
  const size_t release = pending_.size() - held_back_length();
  Result result{pending_.substr(0, release)};
  pending_.erase(0, release);
  return result;
}

std::string StopMatcher::flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

// index == stops_.size() when no stop string occurs.
StopMatcher::Found StopMatcher::earliest_stop() const {
  Found best{0, 0, stops_.size()};
  for (size_t i = 0; i < stops_.size(); ++i) {
    const std::string& stop = stops_[i];
    const size_t start = stop.empty() ? std::string::npos : pending_.find(stop);
    if (start == std::string::npos) continue;
    const Found f{start, start + stop.size(), i};
    // Ending first wins, then starting first (the longer one); on a full tie the one
    // listed first stays.
    if (best.index == stops_.size() || std::tie(f.end, f.start) < std::tie(best.end, best.start)) {
      best = f;
    }
  }
  return best;
}

// The longest suffix of pending_ that is a proper prefix of some stop string.
size_t StopMatcher::held_back_length() const {
  size_t longest = 0;
  const std::string_view text = pending_;
  for (const std::string& stop : stops_) {
    if (stop.empty()) continue;
    const size_t limit = std::min(stop.size() - 1, text.size());
    for (size_t n = limit; n > longest; --n) {
      if (text.ends_with(std::string_view(stop).substr(0, n))) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

}  // namespace tsr
