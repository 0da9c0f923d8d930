// `tessera bench --url URL`: the HTTP serving benchmark against `tessera serve` or any
// OpenAI-compatible server. For each concurrency level of the sweep it sends streamed
// completions with Poisson arrivals, prompt and output lengths drawn from ranges, a share
// of prompts opening with one common prefix, and a share of clients that disconnect
// mid-stream. It reports throughput, goodput under TTFT/TPOT SLOs and TTFT/TPOT
// p50/p99, and checks that no request that was not abandoned failed, that streamed greedy
// text equals the non-streamed text, that the KV pool is whole after each level (Tessera's
// /metrics), and, with --pid, the server's resident memory across rounds.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace tsr::app {

struct HttpBenchOptions {
  std::string url, model, api_key;
  int64_t pid = 0;                       // server process, for its RSS (0: not measured)
  std::vector<int32_t> concurrency{1, 4, 16};
  int32_t requests = 64;                 // per level and round
  double rate = std::numeric_limits<double>::infinity();  // arrivals per second
  std::pair<int32_t, int32_t> prompt_words{16, 128};
  std::pair<int32_t, int32_t> output_tokens{16, 64};
  double shared_prefix = 0.5;            // share of prompts opening with the common prefix
  int32_t prefix_words = 64;
  double disconnect = 0.1;               // share of clients leaving mid-stream
  int32_t rounds = 1;
  double slo_ttft_ms = 1000, slo_tpot_ms = 100;
  uint64_t seed = 1;
  bool json = false;
};

// Runs the sweep; prints a table (and with `json` one JSON object as the last line).
// Returns 0 when every check passed.
int run_http_bench(const HttpBenchOptions& o);

}  // namespace tsr::app
