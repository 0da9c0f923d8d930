// OpenAI request bodies: any JSON body becomes generation parameters within the engine's
// limits or an ApiError (a 400 naming the parameter); nothing else escapes.
#include <nlohmann/json.hpp>

#include <cstdint>

#include "core/request/request.h"
#include "server/api_error.h"
#include "server/generation_params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto body = nlohmann::json::parse(data, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
  constexpr int32_t kVocab = 32000;
  for (const auto endpoint : {tsr::server::Endpoint::COMPLETIONS, tsr::server::Endpoint::CHAT}) {
    try {
      const auto spec = tsr::server::parse_generation(body, endpoint, tsr::RequestParams{}, kVocab);
      tsr::server::expand_choices(spec, {{1, 2, 3}});
    } catch (const tsr::server::ApiError&) {
    }
  }
  return 0;
}
