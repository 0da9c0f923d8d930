#include "server/embeddings_api.h"

#include "server/http_message.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>

#include "core/engine/engine.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/prompts.h"

namespace tsr::server {

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kPollInterval = 250ms;  // how often a waiting handler checks for shutdown

// "float" (the default) or "base64".
bool base64_wanted(const json& body) {
  const std::string format = get_string(body, "encoding_format").value_or("float");
  if (format != "float" && format != "base64") {
    throw bad_param("encoding_format", "'encoding_format' must be 'float' or 'base64', not '" + format.substr(0, 64) + "'");
  }
  return format == "base64";
}

// OpenAI's shortened embeddings (Matryoshka-trained models) cannot be made from a model
// that was not trained for them, so only the model's own width is accepted.
void check_dimensions(const json& body, int32_t width) {
  const std::optional<int64_t> dims = get_int(body, "dimensions", 1, INT32_MAX);
  if (dims && *dims != width) {
    throw bad_param("dimensions", "this model's embeddings have " + std::to_string(width) +
                                      " dimensions and cannot be shortened to " + std::to_string(*dims));
  }
}

// OpenAI refuses an empty string (the vocabulary's BOS alone would embed nothing of it).
void refuse_empty_strings(const json& input) {
  const bool empty = input.is_string() ? input.get_ref<const std::string&>().empty()
                                       : input.is_array() && std::any_of(input.begin(), input.end(), [](const json& v) {
                                           return v.is_string() && v.get_ref<const std::string&>().empty();
                                         });
  if (empty) throw bad_param("input", "'input' must not contain an empty string");
}

Pooling model_pooling(const Engine& engine) {
  const Pooling pooling = engine.pooling();
  if (pooling == Pooling::RANK) {
    throw ApiError(400, "this model is a reranker (rank pooling): it gives scores, not embeddings",
                   "invalid_request_error", "model", "model_not_supported");
  }
  return pooling;
}

std::string base64(std::span<const float> values) {
  static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32");
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  const size_t n = values.size_bytes();
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t b = uint32_t(bytes[i]) << 16 | (i + 1 < n ? uint32_t(bytes[i + 1]) << 8 : 0) |
                       (i + 2 < n ? uint32_t(bytes[i + 2]) : 0);
    out += kDigits[b >> 18 & 63];
    out += kDigits[b >> 12 & 63];
    out += i + 1 < n ? kDigits[b >> 6 & 63] : '=';
    out += i + 2 < n ? kDigits[b & 63] : '=';
  }
  return out;
}

// Every input's final increment, in input order; a server shutting down cancels them.
std::vector<ChoiceDelta> wait_all(const ApiContext& ctx, GenerationJob& job) {
  std::vector<ChoiceDelta> done(size_t(job.num_choices()));
  while (!job.done()) {
    if (ctx.stopping) job.cancel();
    for (ChoiceDelta& d : job.next(kPollInterval)) {
      if (d.finished) done[size_t(d.index)] = std::move(d);
    }
  }
  for (const ChoiceDelta& d : done) {
    if (d.finish_reason == TSR_FINISH_ERROR) throw ApiError(500, "embedding failed: " + d.error, "server_error");
    if (d.finish_reason == TSR_FINISH_ABORT) {
      throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
    }
  }
  return done;
}

json response_json(const ApiContext& ctx, const std::vector<ChoiceDelta>& results, bool base64_format) {
  json data = json::array();
  int64_t prompt_tokens = 0;
  for (const ChoiceDelta& d : results) {
    data.push_back({{"object", "embedding"},
                    {"index", d.index},
                    {"embedding", base64_format ? json(base64(d.embedding)) : json(d.embedding)}});
    prompt_tokens += d.stats.prompt_tokens;
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", ctx.model_id},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace

void handle_embeddings(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res) {
  if (ctx.stopping) throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  const json body = parse_body(req);
  log_unknown_fields(body, {"model", "input", "encoding_format", "dimensions", "user"}, "/v1/embeddings");
  check_model(ctx, body);
  const bool base64_format = base64_wanted(body);
  check_dimensions(body, ctx.engine.embedding_width());
  const Pooling pooling = model_pooling(ctx.engine);
  if (const json* input = field(body, "input")) {
    check_choices(ctx, int64_t(num_prompts(*input)), "input");
    refuse_empty_strings(*input);
  }
  std::vector<RequestParams> requests;
  for (std::vector<int32_t>& ids : prompt_list(body, "input", ctx.engine)) {
    RequestParams p = ctx.engine.request_defaults();
    p.prompt = std::move(ids);
    p.embed = pooling;
    requests.push_back(std::move(p));
  }
  const std::shared_ptr<GenerationJob> job = start_job(ctx, std::move(requests), std::nullopt);
  const json out = response_json(ctx, wait_all(ctx, *job), base64_format);
  res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

}  // namespace tsr::server
