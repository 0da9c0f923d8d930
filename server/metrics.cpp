#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace tsr::server {

namespace {

void header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename T>
void single(std::string& out, const std::string& name, const std::string& help, const char* type, T value) {
  header(out, name, help, type);
  out += fmt::format("{} {}\n", name, value);
}

// Latency buckets in seconds, from sub-millisecond decode steps to slow prefills.
std::vector<double> latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

void render_engine(std::string& out, const EngineStats& s) {
  header(out, "tessera_kv_blocks", "KV cache blocks by state (cached blocks may also be used or free).", "gauge");
  out += fmt::format("tessera_kv_blocks{{state=\"used\"}} {}\n", s.kv_blocks_used);
  out += fmt::format("tessera_kv_blocks{{state=\"cached\"}} {}\n", s.kv_blocks_cached);
  out += fmt::format("tessera_kv_blocks{{state=\"free\"}} {}\n", s.kv_blocks_free);
  single(out, "tessera_kv_blocks_total", "KV cache blocks in the pool.", "gauge", s.kv_blocks_total);
  single(out, "tessera_prefix_cache_hit_rate", "Prompt tokens served from the prefix cache over prompt tokens scheduled.",
         "gauge", s.prefix_hit_rate);
  single(out, "tessera_kv_host_tier_blocks", "KV blocks held by the host tier ([cache] host_memory).", "gauge",
         s.kv_host_blocks);
  single(out, "tessera_kv_host_tier_stored_total", "KV blocks the pool evicted into the host tier.", "counter",
         s.kv_host_stored);
  single(out, "tessera_kv_host_tier_restored_total", "KV blocks prefix hits took back from the host tier.", "counter",
         s.kv_host_restored);
  single(out, "tessera_kv_disk_tier_blocks", "KV block files of the disk tier ([cache] disk_path).", "gauge",
         s.kv_disk_blocks);
  single(out, "tessera_kv_disk_tier_written_total", "KV block files written to the disk tier.", "counter",
         s.kv_disk_written);
  single(out, "tessera_kv_disk_tier_loaded_total", "KV blocks read back from the disk tier and verified.", "counter",
         s.kv_disk_loaded);
  single(out, "tessera_kv_disk_tier_rejected_total", "Disk tier files deleted as truncated, malformed or corrupted.",
         "counter", s.kv_disk_rejected);
  single(out, "tessera_num_requests_waiting", "Requests waiting for the running batch.", "gauge", s.num_waiting);
  single(out, "tessera_num_requests_running", "Requests in the running batch.", "gauge", s.num_running);
  single(out, "tessera_preemptions_total", "Requests preempted by recompute.", "counter", s.preemptions);
  single(out, "tessera_engine_steps_total", "Engine steps run.", "counter", s.steps);
  single(out, "tessera_engine_steps_interrupted_total", "Engine steps abandoned for a newly arrived request.",
         "counter", s.steps_interrupted);
  single(out, "tessera_spec_draft_tokens_total", "Speculative draft tokens proposed and verified.", "counter",
         s.draft_tokens);
  single(out, "tessera_spec_accepted_tokens_total", "Speculative draft tokens accepted.", "counter", s.accepted_tokens);
  single(out, "tessera_spec_verifications_total", "Target passes of a request that verified its drafts.", "counter",
         s.verifications);
  single(out, "tessera_spec_draft_model_passes_total", "Forward passes of draft models (one per round for all requests).",
         "counter", s.draft_model_passes);
  single(out, "tessera_graph_replays_total", "Decode steps replayed from a recorded backend graph.", "counter",
         s.graph_replays);
  single(out, "tessera_graphs_recorded", "Decode graphs recorded (one per batch-size bucket).", "gauge",
         s.graphs_recorded);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double x) {
  const auto i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), x) - bounds_.begin());
  ++counts_[i];
  sum_ += x;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, help, "histogram");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

Metrics::Metrics()
    : ttft_(latency_buckets()), tpot_(latency_buckets()), e2e_(latency_buckets()), queue_(latency_buckets()) {}

void Metrics::on_finished(const RequestOutput& out) {
  const RequestStats& s = out.stats;
  std::lock_guard lock(mutex_);
  ++by_reason_[finish_reason_name(out.finish_reason)];
  prompt_tokens_ += uint64_t(s.prompt_tokens);
  cached_prompt_tokens_ += uint64_t(s.cached_tokens);
  generated_tokens_ += uint64_t(s.completion_tokens);
  if (s.completion_tokens > 0) ttft_.observe(s.ttft_ms / 1000);
  if (s.completion_tokens > 1) tpot_.observe(s.tpot_ms / 1000);
  e2e_.observe(s.e2e_ms / 1000);
  queue_.observe(s.queue_ms / 1000);
}

void Metrics::on_response(int status) {
  std::lock_guard lock(mutex_);
  ++by_status_[status];
}

std::string Metrics::render(const EngineStats& stats) const {
  std::string out;
  std::lock_guard lock(mutex_);
  header(out, "tessera_requests_total", "Finished generation requests by finish reason.", "counter");
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    const auto it = by_reason_.find(reason);
    out += fmt::format("tessera_requests_total{{finish_reason=\"{}\"}} {}\n", reason,
                       it == by_reason_.end() ? 0 : it->second);
  }
  header(out, "tessera_http_responses_total", "HTTP responses by status code.", "counter");
  for (const auto& [status, n] : by_status_) out += fmt::format("tessera_http_responses_total{{code=\"{}\"}} {}\n", status, n);
  single(out, "tessera_prompt_tokens_total", "Prompt tokens of finished requests.", "counter", prompt_tokens_);
  single(out, "tessera_prompt_tokens_cached_total",
         "Prompt tokens of finished requests served from the prefix cache or forked from another choice's prompt.",
         "counter", cached_prompt_tokens_);
  single(out, "tessera_prompt_tokens_computed_total", "Prompt tokens of finished requests the engine computed.",
         "counter", prompt_tokens_ - cached_prompt_tokens_);
  single(out, "tessera_generation_tokens_total", "Generated tokens of finished requests.", "counter", generated_tokens_);
  ttft_.render(out, "tessera_time_to_first_token_seconds", "Arrival to first generated token.");
  tpot_.render(out, "tessera_time_per_output_token_seconds", "Mean time per output token after the first, per request.");
  e2e_.render(out, "tessera_e2e_request_latency_seconds", "Arrival to finish.");
  queue_.render(out, "tessera_request_queue_time_seconds", "Arrival to first scheduled.");
  render_engine(out, stats);
  return out;
}

}  // namespace tsr::server
