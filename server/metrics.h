// Prometheus metrics for GET /metrics (text exposition format 0.0.4): request outcomes,
// token counters and latency histograms recorded here, engine gauges (KV blocks, queue,
// prefix cache, speculative decoding) read from EngineStats at scrape time.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/engine/engine.h"

namespace tsr::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double x);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  // A finished engine request (step thread).
  void on_finished(const RequestOutput& out);
  // Every HTTP response, by status code.
  void on_response(int status);
  std::string render(const EngineStats& stats) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, uint64_t> by_reason_;
  std::map<int, uint64_t> by_status_;
  uint64_t prompt_tokens_ = 0, cached_prompt_tokens_ = 0, generated_tokens_ = 0;
  Histogram ttft_, tpot_, e2e_, queue_;
};

}  // namespace tsr::server
