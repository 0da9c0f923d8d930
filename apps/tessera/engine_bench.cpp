#include "apps/tessera/engine_bench.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>

#include "apps/tessera/machine_probe.h"
#include "base/error.h"
#include "core/engine/engine.h"

namespace tsr::app {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<int32_t> random_prompt(const Engine& engine, int32_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(3, engine.hparams().n_vocab - 1);
  std::vector<int32_t> p{engine.tokenizer().vocab().bos_id >= 0 ? engine.tokenizer().vocab().bos_id : 1};
  while (static_cast<int32_t>(p.size()) < n) p.push_back(token(rng));
  return p;
}

RequestParams greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  return p;
}

// Reads the whole file once, so that a timed load measures the engine, not the disk.
void read_into_page_cache(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) {
  }
}

// Prefill throughput: one request of n tokens, time to its first token.
double bench_pp(Engine& engine, int32_t n, uint64_t seed) {
  const GenerateResult r = engine.generate(greedy(random_prompt(engine, n, seed), 1));
  return n / (r.stats.ttft_ms / 1000.0);
}

// B requests decoding together: tokens per second over `steps` steps after prefill. The
// clock starts once every request has its first token (the engine's count is cumulative
// over the runs of one bench), so that no prefill step is timed.
// Each request's prompt has `prompt_len` tokens: the context the timed steps attend over.
double bench_batch(Engine& engine, int32_t batch, int32_t steps, uint64_t seed, int32_t prompt_len = 8) {
  const int64_t start = engine.stats().generated_tokens;
  for (int32_t b = 0; b < batch; ++b) engine.submit(greedy(random_prompt(engine, prompt_len, seed + b), steps + 1), {});
  while (engine.stats().generated_tokens - start < batch) {
    if (!engine.step()) break;
  }
  const int64_t before = engine.stats().generated_tokens;
  const auto t0 = Clock::now();
  while (engine.step()) {
  }
  return double(engine.stats().generated_tokens - before) / seconds_since(t0);
}

// Multiply-adds of the layers' matmuls per prompt token (the output head runs for the
// last token only; attention's share at 512 tokens is under 1 %).
uint64_t prompt_macs_per_token(const LlamaHParams& hp) {
  const uint64_t q = uint64_t(hp.n_head) * hp.head_dim, kv = uint64_t(hp.n_head_kv) * hp.head_dim;
  return uint64_t(hp.n_layer) * hp.n_embd * (2 * q + 2 * kv + 3 * uint64_t(hp.n_ff));
}

// The KV cache's dtypes, bytes per token, and how many full contexts its pool holds.
void add_kv_figures(const Engine& engine, nlohmann::json& j) {
  const CacheConfig& c = engine.config().cache;
  j["cache_type_k"] = c.k_dtype();
  j["cache_type_v"] = c.v_dtype();
  j["context"] = engine.context_length();
  j["kv_bytes_per_token"] = engine.kv_bytes_per_token();
  j["kv_pool_bytes"] = engine.kv_bytes_per_token() * uint64_t(engine.kv_tokens());
  j["kv_max_contexts"] = engine.kv_tokens() / engine.context_length();
}

double best_of(int32_t reps, const std::function<double(int32_t)>& run) {
  double best = 0;
  for (int32_t i = 0; i < reps; ++i) best = std::max(best, run(i));
  return best;
}

}  // namespace

nlohmann::json run_engine_bench(const Config& base, const EngineBenchOptions& o) {
  Config config = base;
  config.cache.prefix_caching = false;  // every repetition must compute its prompt
  config.scheduler.max_batch_tokens = std::max(config.scheduler.max_batch_tokens, o.pp_tokens);
  // Start-up as a user sees it, less the disk: the file is read into the page cache first,
  // then the clock runs from Engine::create to the first token of an 8-token prompt.
  spdlog::info("bench: load to first token ...");
  read_into_page_cache(config.model.path);
  const auto load_start = Clock::now();
  auto engine = Engine::create(config);
  const double load_s = seconds_since(load_start);
  engine->generate(greedy(random_prompt(*engine, 8, 7), 1));
  const double first_token_s = seconds_since(load_start);
  const int32_t threads = config.backend.threads;
  nlohmann::json j{{"model", config.model.path}, {"threads", threads}, {"load_ms", 1000 * load_s},
                   {"load_to_first_token_ms", 1000 * first_token_s}};
  // The bandwidth this shared machine gives swings from minute to minute, so it is probed
  // before and after the tests and the best is kept: a roofline from a dip would flatter.
  const bool host = engine->device().type == TSR_DEVICE_CPU;
  double gb_s = 0;
  ComputePeak peak;
  if (host) {
    spdlog::info("bench: memory read bandwidth and multiply-add peak ...");
    gb_s = measure_read_bandwidth(threads);
    peak = measure_compute_peak(threads);
  }

  if (o.pp_tokens > 0) {
    const int32_t pp = std::min(o.pp_tokens, engine->context_length() - 1);
    spdlog::info("bench: pp{} ...", pp);
    j["pp" + std::to_string(o.pp_tokens) + "_tok_s"] =
        best_of(o.repetitions, [&](int32_t i) { return bench_pp(*engine, pp, 100 + i); });
  }
  if (o.tg_tokens > 0) {
    const int32_t prompt = std::max(8, o.depth);
    if (prompt + o.tg_tokens + 1 > engine->context_length()) {
      throw Error(fmt::format("bench: -d {} and -n {} need a context of {} tokens, the engine has {} (-c)", o.depth,
                              o.tg_tokens, prompt + o.tg_tokens + 1, engine->context_length()));
    }
    spdlog::info("bench: tg{} after {} tokens ...", o.tg_tokens, prompt);
    j["tg" + std::to_string(o.tg_tokens) + "_tok_s"] =
        best_of(o.repetitions, [&](int32_t i) { return bench_batch(*engine, 1, o.tg_tokens, 200 + i, prompt); });
    j["depth"] = prompt;
  }
  for (int32_t b : o.batches) {
    if (b <= 0) continue;
    spdlog::info("bench: batched decode B={} ...", b);
    j["b" + std::to_string(b) + "_tok_s"] =
        best_of(o.repetitions, [&](int32_t i) { return bench_batch(*engine, b, o.batch_steps, 300 + 100 * i); });
  }
  add_kv_figures(*engine, j);
  j["weight_bytes"] = engine->weight_bytes();
  j["step_read_bytes"] = engine->step_read_bytes();
  // The roofline from host memory bandwidth holds where the weights live in host memory;
  // a GPU's is its device memory's (bench/gpu_check.sh measures that one).
  if (!host) return j;
  spdlog::info("bench: memory read bandwidth and multiply-add peak, again ...");
  gb_s = std::max(gb_s, measure_read_bandwidth(threads));
  const ComputePeak again = measure_compute_peak(threads);
  j["mem_read_gb_s"] = gb_s;
  j["roofline_tok_s"] = gb_s * 1e9 / double(engine->step_read_bytes());
  // Prompts are bound by multiply-adds instead: the peaks say how far from that bound the
  // pp figure is, in numbers of this run.
  j["peak_f32_fma_g_s"] = std::max(peak.f32_fma_g_s, again.f32_fma_g_s);
  j["peak_i8_mac_g_s"] = std::max(peak.i8_mac_g_s, again.i8_mac_g_s);
  const std::string pp = "pp" + std::to_string(o.pp_tokens);
  if (j.contains(pp + "_tok_s")) {
    j[pp + "_g_mac_s"] = j[pp + "_tok_s"].get<double>() * double(prompt_macs_per_token(engine->hparams())) / 1e9;
  }
  return j;
}

}  // namespace tsr::app
