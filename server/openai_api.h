// The OpenAI-compatible endpoints: POST /v1/completions, POST /v1/chat/completions
// (whole or streamed as server-sent events) and GET /v1/models. Handlers throw ApiError;
// the HTTP layer turns it into the error response.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/generation_job.h"
#include "server/openai_format.h"

#include "server/http_message.h"

namespace tsr {
class Engine;
}

namespace tsr::server {

class Admission;
class Metrics;

struct ApiContext {
  Engine& engine;
  std::string model_id;    // what /v1/models lists
  std::string model_path;  // also accepted as "model"
  std::shared_ptr<Metrics> metrics;
  std::shared_ptr<Admission> admission;
  int32_t max_choices;  // prompts x n of one request, at most
  const std::atomic<bool>& stopping;  // the server shuts down: requests are cancelled
  // Responses still being written; HttpServer::stop() lets them finish before it closes.
  std::shared_ptr<std::atomic<int32_t>> in_flight;
};

// The request body as a JSON object, at most 512 levels deep; throws ApiError 400.
nlohmann::json parse_body(const HttpRequest& req);
// A "model" field naming another model than the served one is a 404.
void check_model(const ApiContext& ctx, const nlohmann::json& body);
// More than [server] max_choices engine requests for one call (prompts x n, or inputs) is
// a 400 too_many_choices naming `param`; checked before anything is tokenized.
void check_choices(const ApiContext& ctx, int64_t choices, const std::string& param);
// Admits the call's engine requests as one (503 queue_full when the queue is full) and
// submits them; metrics, the access log and admission see each one finish.
std::shared_ptr<GenerationJob> start_job(const ApiContext& ctx, std::vector<RequestParams> choices,
                                         std::optional<int32_t> logprobs);

// Counts a response as in flight (HttpServer::stop() lets it end properly) for as long as
// the returned token lives.
std::shared_ptr<void> in_flight_token(const ApiContext& ctx);

// A chat generation from a chat-completions body, checked and started (the queue's 503,
// a bad parameter's 400 as for /v1/chat/completions): what /v1/responses runs.
struct StartedChat {
  std::shared_ptr<GenerationJob> job;
  ResponseMeta meta;
  bool stream = false;
};
StartedChat start_chat(const ApiContext& ctx, const nlohmann::json& chat_body);

void handle_completions(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_chat_completions(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_models(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res);
void handle_model(const ApiContext& ctx, const std::string& id, HttpResponse& res);  // /v1/models/{id}

}  // namespace tsr::server
