// A progress bar on stderr for long-running subcommands: redrawn in place on a terminal,
// printed at each 10% elsewhere (logs, CI), with an optional label in front.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tsr::app {

class ProgressBar {
 public:
  explicit ProgressBar(uint64_t total, std::string label = {})
      : total_(std::max<uint64_t>(total, 1)), label_(std::move(label)), tty_(isatty(STDERR_FILENO) != 0) {
    if (!label_.empty()) label_ += ' ';
  }
  // `status` (e.g. a loss) follows the bar.
  void update(uint64_t done, const std::string& status = {}) {
    const int percent = static_cast<int>(std::min(done, total_) * 100 / total_);
    if (percent == shown_ || (!tty_ && percent / 10 == shown_ / 10)) return;
    shown_ = percent;
    const std::string bar(static_cast<size_t>(percent / 2), '#');
    std::fprintf(stderr, "%s%s[%-50s] %3d%%%s%s%s", tty_ ? "\r" : "", label_.c_str(), bar.c_str(), percent,
                 status.empty() ? "" : " ", status.c_str(), tty_ ? "" : "\n");
    if (tty_ && percent == 100) std::fputc('\n', stderr);
  }

 private:
  uint64_t total_;
  std::string label_;
  bool tty_;
  int shown_ = -1;
};

}  // namespace tsr::app
