// `tessera bench`: one command, four modes — `-m MODEL` the engine benchmark
// (engine_bench.h), `--serving` the in-process serving benchmark (here: N requests sharing
// a prefix go through the engine's background thread at a fixed concurrency, once with
// prefix caching and once without, in the same run), `--kv-tier` the host tier's TTFT
// against recompute (kv_tier_bench.h), `--url URL` the HTTP serving benchmark
// (http_bench.h).
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <mutex>
#include <random>

#include "apps/tessera/app_config.h"
#include "apps/tessera/commands.h"
#include "apps/tessera/engine_bench.h"
#include "apps/tessera/http_bench.h"
#include "apps/tessera/kv_tier_bench.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "base/error.h"

namespace tsr::app {

namespace {

struct ServingFlags {
  EngineFlags engine;
  std::vector<int32_t> concurrency{8};
  int32_t requests = 32, prefix_len = 400, suffix_len = 16, max_tokens = 32;
  double slo_ttft_ms = 1000, slo_tpot_ms = 100;
  uint64_t seed = 1;
  bool json = false;
};

struct ServingResult {
  double wall_s = 0;
  int64_t output_tokens = 0;
  std::vector<RequestStats> stats;
  EngineStats engine;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * double(v.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

// Random ordinary tokens (ids 3.. skip the special ones llama vocabularies start with).
std::vector<std::vector<int32_t>> make_prompts(const ServingFlags& f, int32_t n_vocab) {
  std::mt19937_64 rng(f.seed);
  std::uniform_int_distribution<int32_t> token(3, n_vocab - 1);
  std::vector<int32_t> prefix{1};
  for (int32_t i = 1; i < f.prefix_len; ++i) prefix.push_back(token(rng));
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t r = 0; r < f.requests; ++r) {
    std::vector<int32_t> p = prefix;
    for (int32_t i = 0; i < f.suffix_len; ++i) p.push_back(token(rng));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

ServingResult run_serving(const Config& config, const ServingFlags& f) {
  auto engine = Engine::create(config);
  const auto prompts = make_prompts(f, engine->hparams().n_vocab);
  engine->start();
  ServingResult result;
  std::mutex mu;
  std::condition_variable cv;
  int32_t in_flight = 0, done = 0;
  const auto t0 = Clock::now();
  for (const auto& prompt : prompts) {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return in_flight < f.concurrency.front(); });
      ++in_flight;
    }
    RequestParams p;
    p.prompt = prompt;
    p.max_tokens = f.max_tokens;
    p.sampling.temperature = 0;
    p.ignore_eos = true;
    engine->submit(std::move(p), [&](const RequestOutput& out) {
      if (!out.finished) return;
      std::lock_guard lock(mu);
      result.stats.push_back(out.stats);
      result.output_tokens += out.stats.completion_tokens;
      --in_flight;
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done == f.requests; });
  result.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  result.engine = engine->stats();
  return result;
}

nlohmann::json summarize(const ServingResult& r, const ServingFlags& f) {
  std::vector<double> ttft, tpot;
  int32_t good = 0;
  for (const RequestStats& s : r.stats) {
    ttft.push_back(s.ttft_ms);
    tpot.push_back(s.tpot_ms);
    if (s.ttft_ms <= f.slo_ttft_ms && s.tpot_ms <= f.slo_tpot_ms) ++good;
  }
  return {{"requests", f.requests},
          {"concurrency", f.concurrency.front()},
          {"throughput_tok_s", r.output_tokens / r.wall_s},
          {"ttft_ms_p50", percentile(ttft, 50)},
          {"ttft_ms_p99", percentile(ttft, 99)},
          {"tpot_ms_p50", percentile(tpot, 50)},
          {"tpot_ms_p99", percentile(tpot, 99)},
          {"prefix_hit_rate", r.engine.prefix_hit_rate},
          {"goodput_req_s", good / r.wall_s}};
}

void print_table(const nlohmann::json& on, const nlohmann::json& off) {
  std::printf("%-18s %14s %14s\n", "", "prefix cache", "no cache");
  for (const char* key : {"throughput_tok_s", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
                          "tpot_ms_p99", "prefix_hit_rate", "goodput_req_s"}) {
    std::printf("%-18s %14.3f %14.3f\n", key, on[key].get<double>(), off[key].get<double>());
  }
}

int bench_serving(const ServingFlags& f) {
  Config config = load_app_config(f.engine);
  spdlog::info("serving benchmark: {} requests, concurrency {}, shared prefix {} + {} tokens, {} out",
               f.requests, f.concurrency.front(), f.prefix_len, f.suffix_len, f.max_tokens);
  std::vector<nlohmann::json> runs;
  for (bool caching : {true, false}) {
    config.cache.prefix_caching = caching;
    spdlog::info("run {}/2: prefix caching {}", runs.size() + 1, caching ? "on" : "off");
    runs.push_back(summarize(run_serving(config, f), f));
  }
  print_table(runs[0], runs[1]);
  nlohmann::json out = runs[0];
  out["no_prefix_cache"] = runs[1];
  out["ttft_p50_ratio"] = runs[0]["ttft_ms_p50"].get<double>() / runs[1]["ttft_ms_p50"].get<double>();
  std::printf("ttft p50 with cache / without: %.3f\n", out["ttft_p50_ratio"].get<double>());
  if (f.json) std::puts(out.dump().c_str());
  return 0;
}

int bench_engine(const ServingFlags& f, const EngineBenchOptions& o) {
  Config config = load_app_config(f.engine);
  const nlohmann::json j = run_engine_bench(config, o);
  std::printf("%-16s %12s\n", "test", "value");
  std::vector<std::string> keys = {"pp" + std::to_string(o.pp_tokens) + "_tok_s",
                                   "tg" + std::to_string(o.tg_tokens) + "_tok_s"};
  for (int32_t b : o.batches) keys.push_back("b" + std::to_string(b) + "_tok_s");
  const std::string pp_macs = "pp" + std::to_string(o.pp_tokens) + "_g_mac_s";
  keys.insert(keys.end(), {"kv_bytes_per_token", "kv_max_contexts", "load_ms", "load_to_first_token_ms", "mem_read_gb_s", "roofline_tok_s", pp_macs, "peak_f32_fma_g_s", "peak_i8_mac_g_s"});
  for (const std::string& key : keys) {
    if (j.contains(key)) std::printf("%-16s %12.2f\n", key.c_str(), j[key].get<double>());
  }
  const std::string tg = "tg" + std::to_string(o.tg_tokens) + "_tok_s";
  if (j.contains("roofline_tok_s") && j.contains(tg)) {
    std::printf("tg%d / roofline: %.1f%%\n", o.tg_tokens, 100 * j[tg].get<double>() / j["roofline_tok_s"].get<double>());
  }
  if (f.json) std::puts(j.dump().c_str());
  return 0;
}

int bench_kv_tier(const ServingFlags& f, int32_t repetitions) {
  const Config config = load_app_config(f.engine);
  const KvTierBenchOptions o{f.prefix_len, f.suffix_len, repetitions, f.seed};
  spdlog::info("KV host tier benchmark: a {}-token prefix evicted from a one-context pool, then {} + {} tokens",
               o.prefix_len, o.prefix_len, o.suffix_len);
  const nlohmann::json j = run_kv_tier_bench(config, o);
  std::printf("%-16s %12s %14s %12s\n", "", "host tier", "disk, restart", "recompute");
  std::printf("%-16s %12.1f %14.1f %12.1f\n", "ttft_ms", j["ttft_ms_host_tier"].get<double>(),
              j["ttft_ms_disk_restart"].get<double>(), j["ttft_ms_recompute"].get<double>());
  std::printf("%-16s %12d %14d %12d\n", "cached_tokens", j["cached_tokens_host_tier"].get<int>(),
              j["cached_tokens_disk_restart"].get<int>(), j["cached_tokens_recompute"].get<int>());
  std::printf("ttft / recompute: host tier %.3f, disk after a restart %.3f\n", j["ttft_ratio"].get<double>(),
              j["ttft_ratio_disk_restart"].get<double>());
  if (f.json) std::puts(j.dump().c_str());
  return 0;
}

// "16-128" (or "16") -> {16, 128}.
std::pair<int32_t, int32_t> parse_range(const std::string& s, const char* flag) {
  try {
    const size_t dash = s.find('-');
    const int32_t lo = std::stoi(s.substr(0, dash));
    const int32_t hi = dash == std::string::npos ? lo : std::stoi(s.substr(dash + 1));
    if (lo >= 0 && hi >= lo) return {lo, hi};
  } catch (const std::exception&) {
  }
  throw Error(std::string(flag) + ": expected LO-HI with 0 <= LO <= HI, got '" + s + "'");
}

void add_http_flags(CLI::App& app, HttpBenchOptions& h, std::string& prompt_len, std::string& output_len,
                    std::string& rate) {
  app.add_option("--url", h.url, "HTTP serving benchmark against this OpenAI-compatible server");
  app.add_option("--model-name", h.model, "--url: model id to request (default: the server's first)");
  app.add_option("--api-key", h.api_key, "--url: bearer token");
  app.add_option("--pid", h.pid, "--url: server process id, to follow its resident memory");
  app.add_option("--rate", rate, "--url: Poisson arrivals per second, or inf (default)");
  app.add_option("--prompt-len", prompt_len, "--url: prompt words, LO-HI (default 16-128)");
  app.add_option("--output-len", output_len, "--url: output tokens, LO-HI (default 16-64)");
  app.add_option("--shared-prefix", h.shared_prefix, "--url: share of prompts with the common prefix")->check(CLI::Range(0.0, 1.0));
  app.add_option("--prefix-words", h.prefix_words, "--url: words in the common prefix")->check(CLI::NonNegativeNumber);
  app.add_option("--disconnect", h.disconnect, "--url: share of clients leaving mid-stream")->check(CLI::Range(0.0, 1.0));
  app.add_option("--rounds", h.rounds, "--url: repetitions of the sweep (memory is compared across them)")->check(CLI::PositiveNumber);
}

int bench_http(const ServingFlags& f, HttpBenchOptions h, const std::string& prompt_len,
               const std::string& output_len, const std::string& rate) {
  h.concurrency = f.concurrency;
  h.requests = f.requests;
  h.slo_ttft_ms = f.slo_ttft_ms;
  h.slo_tpot_ms = f.slo_tpot_ms;
  h.seed = f.seed;
  h.json = f.json;
  if (!prompt_len.empty()) h.prompt_words = parse_range(prompt_len, "--prompt-len");
  if (!output_len.empty()) h.output_tokens = parse_range(output_len, "--output-len");
  if (!rate.empty() && rate != "inf") h.rate = std::stod(rate);
  if (!(h.rate > 0)) throw Error("--rate must be positive or inf");
  spdlog::info("HTTP serving benchmark: {} requests per level at concurrency {}, {} round(s)", h.requests,
               fmt::format("{}", fmt::join(h.concurrency, ",")), h.rounds);
  return run_http_bench(h);
}

}  // namespace

std::function<int()> register_bench(CLI::App& app) {
  auto f = std::make_shared<ServingFlags>();
  auto serving = std::make_shared<bool>(false);
  auto kv_tier = std::make_shared<bool>(false);
  auto engine_opts = std::make_shared<EngineBenchOptions>();
  auto http = std::make_shared<HttpBenchOptions>();
  auto ranges = std::make_shared<std::array<std::string, 3>>();  // prompt-len, output-len, rate
  add_http_flags(app, *http, (*ranges)[0], (*ranges)[1], (*ranges)[2]);
  app.add_option("--reps", engine_opts->repetitions, "engine benchmark: repetitions (best of)")->check(CLI::PositiveNumber);
  app.add_option("-p,--n-prompt", engine_opts->pp_tokens, "engine benchmark: prompt tokens of the prefill test (0: skip)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-n,--n-gen", engine_opts->tg_tokens, "engine benchmark: tokens of the decode test (0: skip)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-d,--n-depth", engine_opts->depth, "engine benchmark: context tokens before the decode test")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batches", engine_opts->batches, "engine benchmark: batched decode sizes (0: none)")
      ->delimiter(',')->check(CLI::NonNegativeNumber);
  app.add_flag("--serving", *serving, "in-process serving benchmark (shared prefix, caching on/off)");
  app.add_flag("--kv-tier", *kv_tier, "KV tier benchmark: TTFT of an evicted --prefix-len prefix from the host tier, from disk after a restart, recomputed");
  add_engine_flags(app, f->engine);
  app.add_option("--requests", f->requests, "number of requests")->check(CLI::PositiveNumber);
  app.add_option("--concurrency", f->concurrency, "requests in flight; --url: a sweep, e.g. 1,4,16")
      ->delimiter(',')->check(CLI::PositiveNumber);
  app.add_option("--prefix-len", f->prefix_len, "shared prefix tokens (BOS included)")->check(CLI::PositiveNumber);
  app.add_option("--suffix-len", f->suffix_len, "unique tokens per request")->check(CLI::NonNegativeNumber);
  app.add_option("--max-tokens", f->max_tokens, "output tokens per request")->check(CLI::PositiveNumber);
  app.add_option("--slo-ttft-ms", f->slo_ttft_ms, "goodput SLO on TTFT");
  app.add_option("--slo-tpot-ms", f->slo_tpot_ms, "goodput SLO on TPOT");
  app.add_option("--seed", f->seed, "seed of the random prompts");
  app.add_flag("--json", f->json, "print one JSON object as the last line");
  return [f, serving, kv_tier, engine_opts, http, ranges]() -> int {
    try {
      if (!http->url.empty()) return bench_http(*f, *http, (*ranges)[0], (*ranges)[1], (*ranges)[2]);
      if (*kv_tier) return bench_kv_tier(*f, engine_opts->repetitions);
      return *serving ? bench_serving(*f) : bench_engine(*f, *engine_opts);
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      return 1;
    }
  };
}

}  // namespace tsr::app
