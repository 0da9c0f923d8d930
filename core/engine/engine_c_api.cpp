// engine.h: the C entry points. Every C++ exception stops here and becomes a tsr_status
// plus an error object.
#include <algorithm>
#include <cstring>
#include <new>

#include "core/engine/engine.h"
#include "core/error.h"
#include "core/plugin_host/host_services.h"
#include "tessera/engine.h"

struct tsr_engine {
  std::unique_ptr<tsr::Engine> engine;
};

namespace {

template <class Body>
tsr_status guarded(tsr_error** error, Body&& body) noexcept {
  auto fail = [&](tsr_status status, std::string message) {
    if (error) *error = tsr::error_new(status, std::move(message));
    return status;
  };
  try {
    body();
    return TSR_STATUS_OK;
  } catch (const tsr::Error& e) {
    return fail(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return fail(TSR_STATUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(TSR_STATUS_INTERNAL, e.what());
  }
}

// Reads params->field only when the caller's struct is big enough to hold it.
#define TSR_FIELD(ptr, type, field, fallback) \
  (TSR_STRUCT_HAS(ptr, type, field) ? (ptr)->field : (fallback))

tsr::Config config_from(const tsr_engine_params& p) {
  const char* path = TSR_FIELD(&p, tsr_engine_params, config_path, nullptr);
  const char* toml = TSR_FIELD(&p, tsr_engine_params, config_toml, nullptr);
  tsr::Config c = path ? tsr::config_parse_file(path)
                       : toml ? tsr::config_parse_string(toml, "<config_toml>") : tsr::Config{};
  if (const char* model = TSR_FIELD(&p, tsr_engine_params, model_path, nullptr)) {
    c.model.path = model;
  }
  if (const char* dir = TSR_FIELD(&p, tsr_engine_params, plugin_dir, nullptr)) c.plugin_dir = dir;
  const int32_t threads = TSR_FIELD(&p, tsr_engine_params, n_threads, 0);
  if (threads > 0) c.backend.threads = threads;
  return c;
}

void require_params(const void* p, size_t struct_size, const char* what) {
  if (p == nullptr) throw tsr::Error(std::string(what) + " is NULL");
  if (struct_size < sizeof(size_t)) throw tsr::Error(std::string(what) + ": struct_size not set");
}

}  // namespace

extern "C" {

tsr_engine_params tsr_engine_default_params(void) {
  tsr_engine_params p{};
  p.struct_size = sizeof(p);
  return p;
}

tsr_generate_params tsr_generate_default_params(void) {
  tsr_generate_params p{};
  p.struct_size = sizeof(p);
  p.max_tokens = 128;
  p.temperature = 0.8f;
  return p;
}

tsr_status tsr_engine_create(const tsr_engine_params* params, tsr_engine** out,
                             tsr_error** error) {
  return guarded(error, [&] {
    require_params(params, params ? params->struct_size : 0, "tsr_engine_create: params");
    if (out == nullptr) throw tsr::Error("tsr_engine_create: out is NULL");
    *out = nullptr;
    auto engine = tsr::Engine::create(config_from(*params));
    *out = new tsr_engine{std::move(engine)};
  });
}

void tsr_engine_destroy(tsr_engine* engine) { delete engine; }

tsr_status tsr_engine_tokenize(tsr_engine* engine, const char* text, size_t text_len,
                               int32_t add_special, int32_t* ids, size_t capacity,
                               size_t* n_ids, tsr_error** error) {
  return guarded(error, [&] {
    if (engine == nullptr || n_ids == nullptr || (text == nullptr && text_len > 0) ||
        (ids == nullptr && capacity > 0)) {
      throw tsr::Error("tsr_engine_tokenize: NULL argument");
    }
    const auto tokens = engine->engine->tokenizer().encode(
        std::string_view(text ? text : "", text_len), add_special != 0, false);
    *n_ids = tokens.size();
    std::copy_n(tokens.begin(), std::min(capacity, tokens.size()), ids);
  });
}

tsr_status tsr_engine_generate(tsr_engine* engine, const char* prompt, size_t prompt_len,
                               const tsr_generate_params* params, tsr_token_callback callback,
                               void* user_data, tsr_generate_result* result,
                               tsr_error** error) {
  return guarded(error, [&] {
    if (engine == nullptr || (prompt == nullptr && prompt_len > 0)) {
      throw tsr::Error("tsr_engine_generate: NULL argument");
    }
    require_params(params, params ? params->struct_size : 0, "tsr_engine_generate: params");
    tsr::GenerateOptions o;
    o.max_tokens = TSR_FIELD(params, tsr_generate_params, max_tokens, 128);
    o.temperature = TSR_FIELD(params, tsr_generate_params, temperature, 0.8f);
    if (TSR_FIELD(params, tsr_generate_params, has_seed, 0)) {
      o.seed = TSR_FIELD(params, tsr_generate_params, seed, 0);
    }
    o.ignore_eos = TSR_FIELD(params, tsr_generate_params, ignore_eos, 0) != 0;
    if (callback) {
      o.on_token = [&](int32_t token, std::string_view piece) {
        return callback(user_data, token, piece.data(), piece.size()) == 0;
      };
    }
    const tsr::GenerateResult r =
        engine->engine->generate(std::string_view(prompt ? prompt : "", prompt_len), o);
    if (result != nullptr) {
      tsr_generate_result full{};
      full.struct_size = sizeof(full);
      full.prompt_tokens = r.prompt_tokens;
      full.completion_tokens = static_cast<int32_t>(r.tokens.size());
      full.finish_reason = r.finish_reason;
      full.prompt_ms = r.prompt_ms;
      full.decode_ms = r.decode_ms;
      // Copy only as many bytes as the caller's struct holds.
      const size_t n = std::min(result->struct_size, sizeof(full));
      const size_t caller_size = result->struct_size;
      std::memcpy(result, &full, n);
      result->struct_size = caller_size;
    }
  });
}

}  // extern "C"
