// engine.h: the C entry points. Every C++ exception stops here and becomes a tsr_status
// plus an error object.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "core/engine/engine.h"
#include "base/error.h"
#include "core/plugin_host/host_services.h"
#include "tessera/engine.h"

namespace {

// What a callback-less request produced and nobody polled yet.
struct PollBuffer {
  std::vector<int32_t> ids;
  std::string text;
  bool finished = false;
  tsr_finish_reason reason = TSR_FINISH_NONE;
  tsr::RequestStats stats;
};

}  // namespace

struct tsr_engine {
  std::unique_ptr<tsr::Engine> engine;
  std::mutex poll_mutex;
  std::unordered_map<tsr::RequestId, PollBuffer> polled;
};

namespace {

using tsr::guarded;

// Reads ptr->field only when the caller's struct is big enough to hold it.
#define TSR_FIELD(ptr, type, field, fallback) \
  (TSR_STRUCT_HAS(ptr, type, field) ? (ptr)->field : (fallback))

void require(bool cond, const char* message) {
  if (!cond) throw tsr::Error(message);
}

template <class T>
void require_struct(const T* p, const char* what) {
  if (p == nullptr) throw tsr::Error(std::string(what) + " is NULL");
  if (p->struct_size < sizeof(size_t)) throw tsr::Error(std::string(what) + ": struct_size is not set");
}

tsr::Config config_from(const tsr_engine_params& p) {
  const char* path = TSR_FIELD(&p, tsr_engine_params, config_path, nullptr);
  const char* toml = TSR_FIELD(&p, tsr_engine_params, config_toml, nullptr);
  tsr::Config c = path ? tsr::config_parse_file(path)
                       : toml ? tsr::config_parse_string(toml, "<config_toml>") : tsr::Config{};
  if (const char* model = TSR_FIELD(&p, tsr_engine_params, model_path, nullptr)) c.model.path = model;
  if (const char* dir = TSR_FIELD(&p, tsr_engine_params, plugin_dir, nullptr)) c.plugin_dir = dir;
  const int32_t threads = TSR_FIELD(&p, tsr_engine_params, n_threads, 0);
  if (threads > 0) c.backend.threads = threads;
  return c;
}

tsr_request_stats c_stats(const tsr::RequestStats& s) {
  tsr_request_stats c{};
  c.struct_size = sizeof(c);
  c.queue_ms = s.queue_ms;
  c.ttft_ms = s.ttft_ms;
  c.tpot_ms = s.tpot_ms;
  c.e2e_ms = s.e2e_ms;
  c.prompt_tokens = s.prompt_tokens;
  c.cached_tokens = s.cached_tokens;
  c.completion_tokens = s.completion_tokens;
  c.preemptions = s.preemptions;
  return c;
}

// Copies `full` into a caller struct of possibly older (smaller) size.
template <class T>
void copy_out(T* dst, const T& full) {
  const size_t caller_size = dst->struct_size;
  std::memcpy(dst, &full, std::min(caller_size, sizeof(T)));
  dst->struct_size = caller_size;
}

tsr::RequestParams request_from(tsr_engine& e, const tsr_request_params& p) {
  tsr::RequestParams r;
  const char* prompt = TSR_FIELD(&p, tsr_request_params, prompt, nullptr);
  const int32_t* ids = TSR_FIELD(&p, tsr_request_params, prompt_ids, nullptr);
  if (prompt != nullptr) {
    r.prompt = e.engine->tokenize(std::string_view(prompt, TSR_FIELD(&p, tsr_request_params, prompt_len, 0)));
  } else {
    require(ids != nullptr, "tsr_request_params: neither prompt nor prompt_ids is given");
    r.prompt.assign(ids, ids + TSR_FIELD(&p, tsr_request_params, n_prompt_ids, 0));
  }
  r.max_tokens = TSR_FIELD(&p, tsr_request_params, max_tokens, 128);
  tsr::SamplingParams& s = r.sampling;
  s.temperature = TSR_FIELD(&p, tsr_request_params, temperature, 0.8f);
  s.top_k = TSR_FIELD(&p, tsr_request_params, top_k, 40);
  s.top_p = TSR_FIELD(&p, tsr_request_params, top_p, 0.95f);
  s.min_p = TSR_FIELD(&p, tsr_request_params, min_p, 0.05f);
  s.typical_p = TSR_FIELD(&p, tsr_request_params, typical_p, 1.0f);
  s.repeat_penalty = TSR_FIELD(&p, tsr_request_params, repeat_penalty, 1.0f);
  s.repeat_last_n = TSR_FIELD(&p, tsr_request_params, repeat_last_n, 64);
  s.frequency_penalty = TSR_FIELD(&p, tsr_request_params, frequency_penalty, 0.0f);
  s.presence_penalty = TSR_FIELD(&p, tsr_request_params, presence_penalty, 0.0f);
  const size_t n_bias = TSR_FIELD(&p, tsr_request_params, n_logit_bias, 0);
  const int32_t* bias_ids = TSR_FIELD(&p, tsr_request_params, logit_bias_ids, nullptr);
  const float* bias_values = TSR_FIELD(&p, tsr_request_params, logit_bias_values, nullptr);
  require(n_bias == 0 || (bias_ids != nullptr && bias_values != nullptr), "tsr_request_params: logit_bias arrays are NULL");
  for (size_t i = 0; i < n_bias; ++i) s.logit_bias.push_back({bias_ids[i], bias_values[i]});
  if (const char* order = TSR_FIELD(&p, tsr_request_params, samplers, nullptr)) s.order = tsr::parse_sampler_order(order);
  if (TSR_FIELD(&p, tsr_request_params, has_seed, 0)) r.seed = TSR_FIELD(&p, tsr_request_params, seed, 0);
  r.ignore_eos = TSR_FIELD(&p, tsr_request_params, ignore_eos, 0) != 0;
  const char* const* stop = TSR_FIELD(&p, tsr_request_params, stop, nullptr);
  const size_t n_stop = TSR_FIELD(&p, tsr_request_params, n_stop, 0);
  require(stop != nullptr || n_stop == 0, "tsr_request_params: stop is NULL");
  for (size_t i = 0; i < n_stop; ++i) {
    require(stop[i] != nullptr, "tsr_request_params: a stop string is NULL");
    r.stop.emplace_back(stop[i]);
  }
  r.priority = TSR_FIELD(&p, tsr_request_params, priority, 0);
  const double timeout = TSR_FIELD(&p, tsr_request_params, timeout_ms, 0.0);
  if (timeout > 0) r.timeout_ms = timeout;
  if (const char* salt = TSR_FIELD(&p, tsr_request_params, cache_salt, nullptr)) r.cache_salt = salt;
  if (const char* kind = TSR_FIELD(&p, tsr_request_params, constraint_kind, nullptr)) {
    const char* text = TSR_FIELD(&p, tsr_request_params, constraint_text, nullptr);
    const size_t len = TSR_FIELD(&p, tsr_request_params, constraint_text_len, 0);
    require(text != nullptr || len == 0, "tsr_request_params: constraint_text is NULL");
    r.constraint = tsr::ConstraintSpec{kind, std::string(text ? text : "", len)};
  }
  return r;
}

// Streams to the C callback, or collects for tsr_engine_poll.
tsr::OutputCallback output_sink(tsr_engine& e, const tsr_request_params& p) {
  const tsr_output_callback cb = TSR_FIELD(&p, tsr_request_params, callback, nullptr);
  void* user = TSR_FIELD(&p, tsr_request_params, user_data, nullptr);
  if (cb != nullptr) {
    tsr::Engine* engine = e.engine.get();
    return [cb, user, engine](const tsr::RequestOutput& o) {
      tsr_output out{};
      out.struct_size = sizeof(out);
      out.id = o.id;
      out.tokens = o.tokens.data();
      out.n_tokens = o.tokens.size();
      out.text = o.text.c_str();
      out.text_len = o.text.size();
      out.finished = o.finished;
      out.finish_reason = o.finish_reason;
      out.error = o.error.c_str();
      out.stats = c_stats(o.stats);
      if (cb(user, &out) != 0 && !o.finished) engine->cancel(o.id);
    };
  }
  tsr_engine* eng = &e;
  return [eng](const tsr::RequestOutput& o) {
    std::lock_guard lock(eng->poll_mutex);
    PollBuffer& b = eng->polled[o.id];
    b.ids.insert(b.ids.end(), o.tokens.begin(), o.tokens.end());
    b.text += o.text;
    b.finished = o.finished;
    b.reason = o.finish_reason;
    b.stats = o.stats;
  };
}

// Bytes of `text` that fit in `capacity` without splitting a UTF-8 character.
size_t utf8_fit(const std::string& text, size_t capacity) {
  if (capacity >= text.size()) return text.size();
  size_t n = capacity;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

extern "C" {

tsr_engine_params tsr_engine_default_params(void) {
  tsr_engine_params p{};
  p.struct_size = sizeof(p);
  return p;
}

tsr_request_params tsr_request_default_params(void) {
  tsr_request_params p{};
  p.struct_size = sizeof(p);
  p.max_tokens = 128;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.typical_p = 1.0f;
  p.repeat_penalty = 1.0f;
  p.repeat_last_n = 64;
  return p;
}

tsr_status tsr_engine_create(const tsr_engine_params* params, tsr_engine** out, tsr_error** error) {
  return guarded(error, [&] {
    require_struct(params, "tsr_engine_create: params");
    require(out != nullptr, "tsr_engine_create: out is NULL");
    *out = nullptr;
    auto engine = tsr::Engine::create(config_from(*params));
    *out = new tsr_engine{std::move(engine), {}, {}};
  });
}

void tsr_engine_destroy(tsr_engine* engine) { delete engine; }

tsr_status tsr_engine_tokenize(tsr_engine* engine, const char* text, size_t text_len,
                               int32_t add_special, int32_t* ids, size_t capacity,
                               size_t* n_ids, tsr_error** error) {
  return guarded(error, [&] {
    require(engine != nullptr && n_ids != nullptr && (text != nullptr || text_len == 0) &&
                (ids != nullptr || capacity == 0),
            "tsr_engine_tokenize: NULL argument");
    const auto tokens = engine->engine->tokenizer().encode(
        std::string_view(text ? text : "", text_len), add_special != 0, false);
    *n_ids = tokens.size();
    std::copy_n(tokens.begin(), std::min(capacity, tokens.size()), ids);
  });
}

tsr_status tsr_engine_submit(tsr_engine* engine, const tsr_request_params* params,
                             tsr_request_id* out_id, tsr_error** error) {
  return guarded(error, [&] {
    require(engine != nullptr && out_id != nullptr, "tsr_engine_submit: NULL argument");
    require_struct(params, "tsr_engine_submit: params");
    tsr::RequestParams r = request_from(*engine, *params);
    *out_id = engine->engine->submit(std::move(r), output_sink(*engine, *params));
  });
}

tsr_status tsr_engine_cancel(tsr_engine* engine, tsr_request_id id, tsr_error** error) {
  return guarded(error, [&] {
    require(engine != nullptr, "tsr_engine_cancel: engine is NULL");
    engine->engine->cancel(id);
  });
}

tsr_status tsr_engine_poll(tsr_engine* engine, tsr_request_id id, tsr_poll_result* result,
                           tsr_error** error) {
  return guarded(error, [&] {
    require(engine != nullptr, "tsr_engine_poll: engine is NULL");
    require_struct(result, "tsr_engine_poll: result");
    require(result->ids != nullptr || result->ids_capacity == 0, "tsr_engine_poll: ids is NULL");
    require(result->text != nullptr || result->text_capacity == 0, "tsr_engine_poll: text is NULL");
    tsr_poll_result out = *result;
    out.n_ids = out.text_len = 0;
    out.finished = 0;
    std::lock_guard lock(engine->poll_mutex);
    auto it = engine->polled.find(id);
    if (it != engine->polled.end()) {
      PollBuffer& b = it->second;
      out.n_ids = std::min(b.ids.size(), result->ids_capacity);
      std::copy_n(b.ids.begin(), out.n_ids, result->ids);
      b.ids.erase(b.ids.begin(), b.ids.begin() + out.n_ids);
      out.text_len = utf8_fit(b.text, result->text_capacity);
      std::memcpy(result->text, b.text.data(), out.text_len);
      b.text.erase(0, out.text_len);
      out.finish_reason = b.reason;
      out.stats = c_stats(b.stats);
      if (b.finished && b.ids.empty() && b.text.empty()) {
        out.finished = 1;
        engine->polled.erase(it);
      }
    }
    copy_out(result, out);
  });
}

tsr_status tsr_engine_step(tsr_engine* engine, int32_t* n_active, tsr_error** error) {
  return guarded(error, [&] {
    require(engine != nullptr, "tsr_engine_step: engine is NULL");
    engine->engine->step();
    if (n_active) *n_active = engine->engine->stats().num_unfinished;
  });
}

tsr_status tsr_engine_start(tsr_engine* engine, tsr_error** error) {
  return guarded(error, [&] {
    require(engine != nullptr, "tsr_engine_start: engine is NULL");
    engine->engine->start();
  });
}

void tsr_engine_stop(tsr_engine* engine) {
  if (engine != nullptr) engine->engine->stop();
}

tsr_status tsr_engine_get_stats(tsr_engine* engine, tsr_engine_stats* stats, tsr_error** error) {
  return guarded(error, [&] {
    require(engine != nullptr, "tsr_engine_get_stats: engine is NULL");
    require_struct(stats, "tsr_engine_get_stats: stats");
    const tsr::EngineStats s = engine->engine->stats();
    tsr_engine_stats c{};
    c.struct_size = sizeof(c);
    c.kv_blocks_total = s.kv_blocks_total;
    c.kv_blocks_used = s.kv_blocks_used;
    c.kv_blocks_cached = s.kv_blocks_cached;
    c.kv_blocks_free = s.kv_blocks_free;
    c.prompt_tokens = s.prompt_tokens;
    c.cached_prompt_tokens = s.cached_prompt_tokens;
    c.prefix_hit_rate = s.prefix_hit_rate;
    c.num_waiting = s.num_waiting;
    c.num_running = s.num_running;
    c.requests_finished = s.requests_finished;
    c.preemptions = s.preemptions;
    c.steps = s.steps;
    c.generated_tokens = s.generated_tokens;
    copy_out(stats, c);
  });
}

tsr_status tsr_engine_generate(tsr_engine* engine, const tsr_request_params* params,
                               tsr_request_stats* stats, tsr_error** error) {
  return guarded(error, [&] {
    require(engine != nullptr, "tsr_engine_generate: engine is NULL");
    require_struct(params, "tsr_engine_generate: params");
    const tsr_output_callback cb = TSR_FIELD(params, tsr_request_params, callback, nullptr);
    tsr::RequestParams r = request_from(*engine, *params);
    tsr::OutputCallback sink;
    if (cb != nullptr) sink = output_sink(*engine, *params);
    const tsr::GenerateResult result = engine->engine->generate(std::move(r), std::move(sink));
    if (result.finish_reason == TSR_FINISH_ERROR) throw tsr::Error(result.error, TSR_STATUS_INTERNAL);
    if (stats != nullptr) {
      require(stats->struct_size >= sizeof(size_t), "tsr_engine_generate: stats struct_size is not set");
      copy_out(stats, c_stats(result.stats));
    }
  });
}

}  // extern "C"
