// OpenAI request bodies: any JSON body becomes generation parameters within the engine's
// limits and prompt token ids within the vocabulary (completions' "prompt" forms, chat
// "messages" through the model's template), or an ApiError (a 400 naming the
// parameter); nothing else escapes. The prompts need a model: stories260K from
// ../shared, when present.
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "core/config/config.h"
#include "core/engine/engine.h"
#include "core/request/request.h"
#include "server/api_error.h"
#include "server/generation_params.h"
#include "server/prompts.h"

namespace {

std::unique_ptr<tsr::Engine> load_engine() {
  const std::string model = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(model)) return nullptr;
  spdlog::set_level(spdlog::level::off);
  tsr::Config config;
  config.model.path = model;
  config.plugin_dir = TESSERA_PLUGIN_DIR;
  config.backend.threads = 1;
  config.cache.memory_bytes = 8ull << 20;
  return tsr::Engine::create(config);
}

void check_ids(const std::vector<int32_t>& ids, int32_t n_vocab) {
  for (const int32_t id : ids) {
    if (id < 0 || id >= n_vocab) {
      std::fprintf(stderr, "request_fuzz: prompt id %d outside the vocabulary of %d\n", id, n_vocab);
      std::abort();
    }
  }
}

void prompts(const nlohmann::json& body, const tsr::Engine& engine) {
  const int32_t n_vocab = engine.tokenizer().n_tokens();
  try {
    for (const auto& p : tsr::server::completion_prompts(body, engine)) check_ids(p, n_vocab);
  } catch (const tsr::server::ApiError&) {
  }
  try {
    check_ids(tsr::server::chat_prompt(body, engine), n_vocab);
  } catch (const tsr::server::ApiError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<tsr::Engine> engine = load_engine();
  const auto body = nlohmann::json::parse(data, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
  const int32_t n_vocab = engine ? engine->tokenizer().n_tokens() : 32000;
  for (const auto endpoint : {tsr::server::Endpoint::COMPLETIONS, tsr::server::Endpoint::CHAT}) {
    try {
      const auto spec = tsr::server::parse_generation(body, endpoint, tsr::RequestParams{}, n_vocab);
      tsr::server::expand_choices(spec, {{1, 2, 3}});
    } catch (const tsr::server::ApiError&) {
    }
  }
  if (engine) prompts(body, *engine);
  return 0;
}
