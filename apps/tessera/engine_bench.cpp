#include "apps/tessera/engine_bench.h"

#include <immintrin.h>
#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>

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

// Prefill throughput: one request of n tokens, time to its first token.
double bench_pp(Engine& engine, int32_t n, uint64_t seed) {
  const GenerateResult r = engine.generate(greedy(random_prompt(engine, n, seed), 1));
  return n / (r.stats.ttft_ms / 1000.0);
}

// B requests decoding together: tokens per second over `steps` steps after prefill.
double bench_batch(Engine& engine, int32_t batch, int32_t steps, uint64_t seed) {
  for (int32_t b = 0; b < batch; ++b) engine.submit(greedy(random_prompt(engine, 8, seed + b), steps + 1), {});
  while (engine.stats().generated_tokens < batch + engine.stats().generated_tokens % batch) {
    if (!engine.step()) break;
  }
  const int64_t before = engine.stats().generated_tokens;
  const auto t0 = Clock::now();
  while (engine.step()) {
  }
  return double(engine.stats().generated_tokens - before) / seconds_since(t0);
}

double best_of(int32_t reps, const std::function<double(int32_t)>& run) {
  double best = 0;
  for (int32_t i = 0; i < reps; ++i) best = std::max(best, run(i));
  return best;
}

}  // namespace

namespace {

// Sums `n` words with four independent accumulators so that the loads, not the adds, are
// the limit (a single dependency chain measures latency, not bandwidth).
__attribute__((target("avx512f")))
uint64_t sum_avx512(const uint64_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  const auto* v = reinterpret_cast<const __m512i*>(p);
  for (size_t i = 0; i + 4 <= n / 8; i += 4) {
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(v + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(v + i + 1));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(v + i + 2));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(v + i + 3));
  }
  return _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}

uint64_t sum_generic(const uint64_t* p, size_t n) {
  uint64_t a[4] = {0, 0, 0, 0};
  for (size_t i = 0; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; ++k) a[k] += p[i + k];
  }
  return a[0] + a[1] + a[2] + a[3];
}

}  // namespace

double measure_read_bandwidth(int32_t threads) {
  const size_t n = size_t(1) << 27;  // 1 GiB of 8-byte words, far beyond any cache
  std::vector<uint64_t> buffer(n, 1);
  const bool avx512 = __builtin_cpu_supports("avx512f");
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    uint64_t sum = 0;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sum)
    {
      const size_t chunk = n / size_t(omp_get_num_threads()) / 32 * 32;
      const uint64_t* p = buffer.data() + chunk * size_t(omp_get_thread_num());
      sum += avx512 ? sum_avx512(p, chunk) : sum_generic(p, chunk);
    }
    const double s = seconds_since(t0);
    const size_t read = n / 32 * 32 / size_t(threads) * size_t(threads);
    if (sum == 0) spdlog::warn("bandwidth probe read nothing");
    best = std::max(best, double(read * sizeof(uint64_t)) / s / 1e9);
  }
  return best;
}

nlohmann::json run_engine_bench(const Config& base, const EngineBenchOptions& o) {
  Config config = base;
  config.cache.prefix_caching = false;  // every repetition must compute its prompt
  config.scheduler.max_batch_tokens = std::max(config.scheduler.max_batch_tokens, o.pp_tokens);
  auto engine = Engine::create(config);
  const int32_t threads = config.backend.threads;
  nlohmann::json j{{"model", config.model.path}, {"threads", threads}};
  // The bandwidth this shared machine gives swings from minute to minute, so it is probed
  // before and after the tests and the best is kept: a roofline from a dip would flatter.
  const bool host = engine->device().type == TSR_DEVICE_CPU;
  double gb_s = 0;
  if (host) {
    spdlog::info("bench: memory read bandwidth ...");
    gb_s = measure_read_bandwidth(threads);
  }

  if (o.pp_tokens > 0) {
    const int32_t pp = std::min(o.pp_tokens, engine->context_length() - 1);
    spdlog::info("bench: pp{} ...", pp);
    j["pp" + std::to_string(o.pp_tokens) + "_tok_s"] =
        best_of(o.repetitions, [&](int32_t i) { return bench_pp(*engine, pp, 100 + i); });
  }
  if (o.tg_tokens > 0) {
    const int32_t tg = std::min(o.tg_tokens, engine->context_length() - 9);
    spdlog::info("bench: tg{} ...", tg);
    j["tg" + std::to_string(o.tg_tokens) + "_tok_s"] =
        best_of(o.repetitions, [&](int32_t i) { return bench_batch(*engine, 1, tg, 200 + i); });
  }
  for (int32_t b : o.batches) {
    if (b <= 0) continue;
    spdlog::info("bench: batched decode B={} ...", b);
    j["b" + std::to_string(b) + "_tok_s"] =
        best_of(o.repetitions, [&](int32_t i) { return bench_batch(*engine, b, o.batch_steps, 300 + 100 * i); });
  }
  j["weight_bytes"] = engine->weight_bytes();
  j["step_read_bytes"] = engine->step_read_bytes();
  // The roofline from host memory bandwidth holds where the weights live in host memory;
  // a GPU's is its device memory's (bench/gpu_check.sh measures that one).
  if (!host) return j;
  spdlog::info("bench: memory read bandwidth, again ...");
  gb_s = std::max(gb_s, measure_read_bandwidth(threads));
  j["mem_read_gb_s"] = gb_s;
  j["roofline_tok_s"] = gb_s * 1e9 / double(engine->step_read_bytes());
  return j;
}

}  // namespace tsr::app
