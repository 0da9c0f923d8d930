#include "apps/tessera/http_bench.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <random>
#include <regex>
#include <thread>

#include "base/error.h"

namespace tsr::app {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * double(v.size())))];
}

struct Planned {
  json body;
  int32_t abort_after = 0;  // text chunks after which the client leaves (0: never)
};

struct Outcome {
  bool ok = false, aborted = false;
  std::string text, error;
  double ttft_ms = 0, tpot_ms = 0;
  int64_t tokens = 0;
};

class HttpBench {
 public:
  explicit HttpBench(const HttpBenchOptions& o) : o_(o), rng_(o.seed) {}
  int run();

 private:
  httplib::Client client() const;
  httplib::Headers headers() const;
  std::string model_id();
  std::string words(int32_t n);
  std::vector<Planned> plan(int32_t n);
  Outcome streamed(const json& body, int32_t abort_after) const;
  std::string whole(const json& body) const;
  json metrics() const;
  json wait_kv_whole() const;
  std::vector<Outcome> run_level(const std::vector<Planned>& reqs, int32_t concurrency, double* seconds);
  json summarize(int32_t level, const std::vector<Outcome>& results, double seconds) const;
  int64_t rss_kib() const;

  const HttpBenchOptions& o_;
  std::mt19937_64 rng_;
  std::string model_;
};

httplib::Client HttpBench::client() const {
  httplib::Client c(o_.url);
  c.set_read_timeout(600, 0);
  c.set_default_headers(headers());
  return c;
}

httplib::Headers HttpBench::headers() const {
  if (o_.api_key.empty()) return {};
  return {{"Authorization", "Bearer " + o_.api_key}};
}

std::string HttpBench::model_id() {
  if (!o_.model.empty()) return o_.model;
  auto r = client().Get("/v1/models");
  if (!r || r->status != 200) throw Error("GET " + o_.url + "/v1/models failed", TSR_STATUS_IO_ERROR);
  return json::parse(r->body)["data"][0]["id"].get<std::string>();
}

std::string HttpBench::words(int32_t n) {
  static const char* const kWords[] = {"the", "a", "little", "girl", "boy", "dog", "cat", "sun", "tree",
                                       "house", "ball", "big", "happy", "sad", "played", "ran", "saw",
                                       "went", "day", "park", "friend", "mom", "said"};
  std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
  std::string out;
  for (int32_t i = 0; i < n; ++i) out += (i ? " " : "") + std::string(kWords[pick(rng_)]);
  return out;
}

std::vector<Planned> HttpBench::plan(int32_t n) {
  const std::string prefix = words(o_.prefix_words);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<Planned> out;
  for (int32_t i = 0; i < n; ++i) {
    const bool shared = u(rng_) < o_.shared_prefix;
    const int32_t prompt_len = std::uniform_int_distribution<int32_t>(o_.prompt_words.first, o_.prompt_words.second)(rng_);
    const int32_t max_tokens = std::uniform_int_distribution<int32_t>(o_.output_tokens.first, o_.output_tokens.second)(rng_);
    const std::string prompt = (shared ? prefix + " " : "") + words(prompt_len);
    Planned p{{{"model", model_}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}}};
    if (u(rng_) < o_.disconnect) p.abort_after = 1 + std::uniform_int_distribution<int32_t>(0, std::max(1, max_tokens / 2) - 1)(rng_);
    out.push_back(std::move(p));
  }
  return out;
}

// Reads server-sent events as they arrive; leaves (closing the connection) after
// `abort_after` text chunks.
Outcome HttpBench::streamed(const json& body, int32_t abort_after) const {
  Outcome out;
  json b = body;
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = headers();
  req.set_header("Content-Type", "application/json");
  req.body = b.dump();
  const auto t0 = Clock::now();
  std::string buf;
  int32_t chunks = 0;
  double t_first = 0, t_last = 0;
  bool done = false;
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    buf.append(data, size);
    for (size_t end; (end = buf.find("\n\n")) != std::string::npos; buf.erase(0, end + 2)) {
      const std::string event = buf.substr(0, end);
      if (!event.starts_with("data: ")) continue;
      if (event == "data: [DONE]") {
        done = true;
        continue;
      }
      const json j = json::parse(event.substr(6), nullptr, false);
      if (j.is_discarded() || j.contains("error")) {
        out.error = j.is_discarded() ? "malformed event" : j["error"].value("message", "error event");
        return false;
      }
      if (j.contains("usage") && j["usage"].is_object()) out.tokens = j["usage"]["completion_tokens"].get<int64_t>();
      for (const json& c : j["choices"]) {
        const std::string text = c.value("text", "");
        if (text.empty()) continue;
        t_last = ms_since(t0);
        if (t_first == 0) t_first = t_last;
        out.text += text;
        if (++chunks == abort_after) {
          out.aborted = true;
          return false;
        }
      }
    }
    return true;
  };
  auto res = client().send(req);
  if (out.aborted || !out.error.empty()) return out;
  if (!res) return out.error = "connection failed: " + httplib::to_string(res.error()), out;
  if (res->status != 200) return out.error = "HTTP " + std::to_string(res->status), out;
  if (!done) return out.error = "stream ended without [DONE]", out;
  out.ttft_ms = t_first;
  out.tpot_ms = out.tokens > 1 ? (t_last - t_first) / double(out.tokens - 1) : 0;
  out.ok = true;
  return out;
}

std::string HttpBench::whole(const json& body) const {
  auto r = client().Post("/v1/completions", body.dump(), "application/json");
  if (!r || r->status != 200) return "<failed>";
  return json::parse(r->body)["choices"][0]["text"].get<std::string>();
}

// Tessera's KV gauges and prefix-hit rate from /metrics (absent on other servers).
json HttpBench::metrics() const {
  auto r = client().Get("/metrics");
  json m = json::object();
  if (!r || r->status != 200) return m;
  static const std::regex line(R"re(^(tessera_kv_blocks\{state="(\w+)"\}|tessera_kv_blocks_total|tessera_prefix_cache_hit_rate) (\S+)$)re");
  std::istringstream in(r->body);
  for (std::string l; std::getline(in, l);) {
    std::smatch m2;
    if (!std::regex_match(l, m2, line)) continue;
    m[m2[2].matched ? m2[2].str() : m2[1].str()] = std::stod(m2[3].str());
  }
  return m;
}

// Abandoned requests finish at the server's next write: give them a moment.
json HttpBench::wait_kv_whole() const {
  json m;
  for (int i = 0; i < 100; ++i) {
    m = metrics();
    if (!m.contains("used")) return m;
    if (m["used"] == 0 && m["free"] == m["tessera_kv_blocks_total"]) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return m;
}

// Poisson arrivals; at most `concurrency` requests in flight, each on its own thread.
std::vector<Outcome> HttpBench::run_level(const std::vector<Planned>& reqs, int32_t concurrency, double* seconds) {
  std::vector<Outcome> results(reqs.size());
  std::mutex mutex;
  std::condition_variable cv;
  int32_t in_flight = 0;
  std::vector<std::thread> threads;
  std::exponential_distribution<double> gap(std::isfinite(o_.rate) ? o_.rate : 1.0);
  const auto t0 = Clock::now();
  double arrival_s = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (std::isfinite(o_.rate)) {
      arrival_s += gap(rng_);
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival_s)));
    }
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return in_flight < concurrency; });
    ++in_flight;
    threads.emplace_back([&, i] {
      results[i] = streamed(reqs[i].body, reqs[i].abort_after);
      std::lock_guard done(mutex);
      --in_flight;
      cv.notify_one();
    });
  }
  for (std::thread& t : threads) t.join();
  *seconds = ms_since(t0) / 1000;
  return results;
}

json HttpBench::summarize(int32_t level, const std::vector<Outcome>& results, double seconds) const {
  std::vector<double> ttft, tpot;
  int64_t tokens = 0, completed = 0, aborted = 0, failed = 0, good = 0;
  std::string first_error;
  for (const Outcome& r : results) {
    if (r.aborted) ++aborted;
    if (!r.ok && !r.aborted && ++failed == 1) first_error = r.error;
    if (!r.ok) continue;
    ++completed;
    tokens += r.tokens;
    ttft.push_back(r.ttft_ms);
    if (r.tokens > 1) tpot.push_back(r.tpot_ms);
    good += r.ttft_ms <= o_.slo_ttft_ms && r.tpot_ms <= o_.slo_tpot_ms;
  }
  return {{"concurrency", level}, {"requests", results.size()}, {"completed", completed}, {"aborted", aborted},
          {"failed", failed}, {"first_error", first_error}, {"throughput_tok_s", double(tokens) / seconds},
          {"goodput_req_s", double(good) / seconds}, {"ttft_ms_p50", percentile(ttft, 50)},
          {"ttft_ms_p99", percentile(ttft, 99)}, {"tpot_ms_p50", percentile(tpot, 50)},
          {"tpot_ms_p99", percentile(tpot, 99)}};
}

int64_t HttpBench::rss_kib() const {
  if (o_.pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(o_.pid) + "/status");
  for (std::string l; std::getline(in, l);) {
    if (l.starts_with("VmRSS:")) return std::stoll(l.substr(6));
  }
  return -1;
}

int HttpBench::run() {
  model_ = model_id();
  const json greedy{{"model", model_}, {"prompt", "Once upon a time there was"}, {"max_tokens", 48}, {"temperature", 0}};
  const Outcome s = streamed(greedy, 0);
  json checks{{"streamed_equals_whole", s.ok && s.text == whole(greedy)}};
  bool ok = checks["streamed_equals_whole"].get<bool>();
  json rounds = json::array();
  for (int32_t round = 1; round <= o_.rounds; ++round) {
    json levels = json::array();
    for (int32_t c : o_.concurrency) {
      double seconds = 0;
      const std::vector<Outcome> results = run_level(plan(o_.requests), c, &seconds);
      json level = summarize(c, results, seconds);
      const json m = wait_kv_whole();
      level["kv_whole"] = !m.contains("used") || (m["used"] == 0 && m["free"] == m["tessera_kv_blocks_total"]);
      level["prefix_hit_rate"] = m.value("tessera_prefix_cache_hit_rate", 0.0);
      ok = ok && level["failed"] == 0 && level["kv_whole"].get<bool>();
      spdlog::info("round {} c={}: {} ok, {} aborted, {} failed; {:.1f} tok/s, goodput {:.2f} req/s, TTFT p50/p99 "
                   "{:.1f}/{:.1f} ms, TPOT p50/p99 {:.2f}/{:.2f} ms, KV whole: {}{}",
                   round, c, level["completed"].get<int64_t>(), level["aborted"].get<int64_t>(),
                   level["failed"].get<int64_t>(), level["throughput_tok_s"].get<double>(),
                   level["goodput_req_s"].get<double>(), level["ttft_ms_p50"].get<double>(),
                   level["ttft_ms_p99"].get<double>(), level["tpot_ms_p50"].get<double>(),
                   level["tpot_ms_p99"].get<double>(), level["kv_whole"].get<bool>(),
                   level["first_error"].get<std::string>().empty() ? "" : "; first error: " + level["first_error"].get<std::string>());
      levels.push_back(level);
    }
    const int64_t rss = rss_kib();
    if (rss >= 0) spdlog::info("round {}: server RSS {:.1f} MiB", round, double(rss) / 1024);
    rounds.push_back({{"round", round}, {"levels", levels}, {"rss_kib", rss}});
  }
  // Growth from round 2 on: round 1 includes allocator and thread-pool warm-up.
  if (o_.rounds >= 2 && o_.pid > 0) {
    checks["rss_growth_kib"] = rounds.back()["rss_kib"].get<int64_t>() - rounds[std::min(1, o_.rounds - 1)]["rss_kib"].get<int64_t>();
  }
  checks["passed"] = ok;
  std::printf("%-12s %10s %10s %10s %12s %12s %12s %12s %12s %10s\n", "concurrency", "completed", "aborted", "failed",
              "tok/s", "goodput/s", "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99");
  for (const json& l : rounds.back()["levels"]) {
    std::printf("%-12d %10lld %10lld %10lld %12.1f %12.2f %12.1f %12.1f %12.2f %10.2f\n", l["concurrency"].get<int>(),
                (long long)l["completed"].get<int64_t>(), (long long)l["aborted"].get<int64_t>(),
                (long long)l["failed"].get<int64_t>(), l["throughput_tok_s"].get<double>(),
                l["goodput_req_s"].get<double>(), l["ttft_ms_p50"].get<double>(), l["ttft_ms_p99"].get<double>(),
                l["tpot_ms_p50"].get<double>(), l["tpot_ms_p99"].get<double>());
  }
  std::printf("checks: %s\n", checks.dump().c_str());
  if (o_.json) {
    json out = rounds.back()["levels"].back();  // the top level of the last round, flat
    out["url"] = o_.url;
    out["model"] = model_;
    out["rounds"] = rounds;
    out["checks"] = checks;
    std::puts(out.dump().c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace

int run_http_bench(const HttpBenchOptions& o) { return HttpBench(o).run(); }

}  // namespace tsr::app
