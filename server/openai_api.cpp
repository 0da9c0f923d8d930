#include "server/openai_api.h"

#include "server/http_message.h"
#include <spdlog/spdlog.h>

#include <chrono>

#include "core/engine/engine.h"
#include "core/request/detokenizer.h"
#include "base/error.h"
#include "server/access_log.h"
#include "server/admission.h"
#include "server/api_error.h"
#include "server/beam_search.h"
#include "server/event_stream.h"
#include "server/json_fields.h"
#include "server/metrics.h"
#include "server/openai_format.h"
#include "server/prompts.h"
#include "server/whole_response.h"
#include "base/json_depth.h"
#include "server/body_precheck.h"

namespace tsr::server {

using nlohmann::json;

// Deeper documents are refused: nlohmann's parser is iterative, but destroying or dumping
// a document recurses per level, and ~100k levels fit in a body of 200 KB.
constexpr int kMaxJsonDepth = 512;

json parse_body(const HttpRequest& req) {
  if (json_deeper_than(req.body, kMaxJsonDepth)) {
    throw ApiError(400, "the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels",
                   "invalid_request_error");
  }
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) throw ApiError(400, "the request body is not valid JSON", "invalid_request_error");
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object", "invalid_request_error");
  return body;
}

void check_model(const ApiContext& ctx, const json& body) {
  const auto model = get_string(body, "model");
  if (model && *model != ctx.model_id && *model != ctx.model_path) {
    throw ApiError(404, "the model '" + *model + "' does not exist; this server serves '" + ctx.model_id + "'",
                   "invalid_request_error", "model", "model_not_found");
  }
}

// An idle server admits any one request, so one of 1,000 prompts x n = 128 would hold the
// engine for everyone else for minutes: the count is bounded before anything is tokenized.
void check_choices(const ApiContext& ctx, int64_t choices, const std::string& param) {
  if (choices > ctx.max_choices) {
    throw ApiError(400, "the request asks for " + std::to_string(choices) + " choices (prompts x n); this server takes " +
                            std::to_string(ctx.max_choices) + " per request ([server] max_choices)",
                   "invalid_request_error", param, "too_many_choices");
  }
}

// Admits `n` engine requests holding `tokens` prompt tokens, or answers 503 with the reason.
void admit(const ApiContext& ctx, int32_t n, int64_t tokens) {
  switch (ctx.admission->try_admit(n, tokens, ctx.engine.stats().num_running)) {
    case Admission::Verdict::ADMITTED: return;
    case Admission::Verdict::QUEUE_FULL:
      throw ApiError(503, "the request queue is full; retry later", "server_error", "", "queue_full");
    case Admission::Verdict::TOO_MANY_TOKENS:
      throw ApiError(503, "the server holds " + std::to_string(ctx.admission->max_tokens()) +
                              " prompt tokens of unfinished requests at most ([server] max_queue_tokens), and this "
                              "request's " + std::to_string(tokens) + " do not fit now; retry later",
                     "server_error", "", "queue_full");
  }
}

std::shared_ptr<GenerationJob> start_job(const ApiContext& ctx, std::vector<RequestParams> choices,
                                         std::optional<int32_t> logprobs) {
  const auto n = static_cast<int32_t>(choices.size());
  int64_t tokens = 0;
  for (const RequestParams& p : choices) tokens += int64_t(p.prompt.size());
  admit(ctx, n, tokens);
  auto metrics = ctx.metrics;
  auto admission = ctx.admission;
  auto access = access_record_current();
  return std::make_shared<GenerationJob>(
      ctx.engine, std::move(choices), logprobs,
      [metrics, admission, access](const RequestOutput& out) {
        metrics->on_finished(out);
        admission->release(1, out.stats.prompt_tokens);
        if (access) {
          access->prompt_tokens += out.stats.prompt_tokens;
          access->cached_tokens += out.stats.cached_tokens;
          access->generated_tokens += out.stats.completion_tokens;
        }
      },
      [admission, tokens](int32_t refused) { admission->release(refused, tokens); });
}

namespace {
using namespace std::chrono_literals;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<std::string> echo_texts(const Engine& engine, const std::vector<std::vector<int32_t>>& prompts) {
  std::vector<std::string> out;
  for (const auto& p : prompts) out.push_back(engine.tokenizer().decode(p));
  return out;
}


// The choices a completion asks for (prompts x n), counted before any prompt is tokenized.
void check_generation_choices(const ApiContext& ctx, Endpoint endpoint, const json& body, int32_t n) {
  const json* prompt = endpoint == Endpoint::CHAT ? nullptr : field(body, "prompt");
  const int64_t prompts = prompt != nullptr ? int64_t(num_prompts(*prompt)) : 1;
  check_choices(ctx, prompts * n, prompts > 1 ? "prompt" : "n");
}

// Beam search answers whole, after every prompt's search: `n` best hypotheses each, the
// beams admitted as `width` choices per prompt.
void respond_beam_search(const ApiContext& ctx, const GenerationSpec& spec,
                         const std::vector<std::vector<int32_t>>& prompts, HttpResponse& res) {
  const int32_t width = spec.beam->width;
  int64_t tokens = 0;
  for (const std::vector<int32_t>& prompt : prompts) tokens += int64_t(prompt.size()) * width;
  admit(ctx, width, tokens);
  const std::shared_ptr<void> admitted(nullptr, [a = ctx.admission, width, tokens](void*) { a->release(width, tokens); });
  const ResponseMeta meta{Endpoint::COMPLETIONS, new_response_id(Endpoint::COMPLETIONS), unix_now(), ctx.model_id, false};
  std::vector<ChoiceDelta> choices;
  for (const std::vector<int32_t>& prompt : prompts) {
    for (Hypothesis& h : run_beam_search(ctx.engine, prompt, spec.params, width, spec.beam->length_penalty, spec.n,
                                         ctx.stopping)) {
      ChoiceDelta c;
      c.index = int32_t(choices.size());
      c.finished = true;
      c.finish_reason = h.ended ? TSR_FINISH_STOP : TSR_FINISH_LENGTH;
      if (h.ended) h.tokens.pop_back();  // the end-of-generation token is not text
      IncrementalDetokenizer detok(ctx.engine.tokenizer());  // as a request's text: pieces in whole characters
      for (const int32_t t : h.tokens) c.text += detok.push(t);
      c.text += detok.flush();
      c.stats.prompt_tokens = int32_t(prompt.size());
      c.stats.completion_tokens = int32_t(h.tokens.size()) + (h.ended ? 1 : 0);
      c.tokens = std::move(h.tokens);
      choices.push_back(std::move(c));
    }
  }
  res.set_content(response_json(meta, choices, spec.n, ctx.engine.tokenizer()).dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
}

// A generation request checked and tokenized: its spec (tool choice and constraint applied,
// the constraint compiled so that a bad one is a 400, not a failed stream) and prompts.
struct Prepared {
  GenerationSpec spec;
  std::vector<std::vector<int32_t>> prompts;
  std::optional<ToolCallFormat> tool_format;
};

Prepared prepare_generation(const ApiContext& ctx, Endpoint endpoint, const json& body) {
  if (ctx.stopping) throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  check_model(ctx, body);
  Prepared p{parse_generation(body, endpoint, ctx.engine.request_defaults(), ctx.engine.tokenizer().n_tokens()), {}, {}};
  check_generation_choices(ctx, endpoint, body, p.spec.beam ? std::max(p.spec.samples(), p.spec.beam->width) : p.spec.samples());
  p.tool_format = apply_tool_choice(p.spec, ctx.engine.chat_template());
  if (p.spec.constraint) {
    try {
      ctx.engine.compile_constraint(p.spec.constraint->spec);
    } catch (const Error& e) {
      throw bad_param(p.spec.constraint->param, e.what());
    }
  }
  p.prompts = endpoint == Endpoint::CHAT ? std::vector<std::vector<int32_t>>{chat_prompt(body, ctx.engine)}
                                         : completion_prompts(body, ctx.engine);
  return p;
}

// A completion's one prompt string too long for the context is refused before the body is
// parsed (10 MB of JSON take ~80 ms to parse).
void precheck_prompt(const ApiContext& ctx, Endpoint endpoint, const HttpRequest& req) {
  if (endpoint != Endpoint::COMPLETIONS) return;
  const std::optional<std::string_view> prompt = raw_member(req.body, "prompt");
  if (prompt && prompt->starts_with('"')) check_text_fits(min_decoded_bytes(*prompt), ctx.engine, "prompt");
}

void handle_generation(const ApiContext& ctx, Endpoint endpoint, const HttpRequest& req, HttpResponse& res) {
  precheck_prompt(ctx, endpoint, req);
  Prepared p = prepare_generation(ctx, endpoint, parse_body(req));
  GenerationSpec& spec = p.spec;
  if (spec.beam) return respond_beam_search(ctx, spec, p.prompts, res);
  const std::optional<bool> reasoning =
      endpoint == Endpoint::CHAT ? apply_reasoning(spec, ctx.engine, p.prompts.front()) : std::nullopt;
  const std::vector<std::string> echo = spec.echo ? echo_texts(ctx.engine, p.prompts) : std::vector<std::string>{};
  auto job = start_job(ctx, expand_choices(spec, p.prompts), spec.collected_logprobs());
  const ResponseMeta meta{endpoint, new_response_id(endpoint), unix_now(), ctx.model_id, spec.logprobs.has_value(),
                          p.tool_format, spec.best_of, reasoning};
  auto in_flight = in_flight_token(ctx);
  if (!spec.stream) {
    return respond_whole(res, job, meta, spec.n, echo, ctx.engine.tokenizer(), ctx.stopping, std::move(in_flight));
  }
  start_event_stream(res, std::make_shared<EventStream>(job, meta, spec.n, spec.include_usage, echo,
                                                        ctx.engine.tokenizer(), ctx.stopping),
                     std::move(in_flight));
}

json model_json(const ApiContext& ctx) {
  return {{"id", ctx.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "tessera"},
          {"max_model_len", ctx.engine.context_length()}};
}

}  // namespace

std::shared_ptr<void> in_flight_token(const ApiContext& ctx) {
  ++*ctx.in_flight;
  return std::shared_ptr<void>(nullptr, [n = ctx.in_flight](void*) { --*n; });
}

StartedChat start_chat(const ApiContext& ctx, const json& chat_body) {
  Prepared p = prepare_generation(ctx, Endpoint::CHAT, chat_body);
  const std::optional<bool> reasoning = apply_reasoning(p.spec, ctx.engine, p.prompts.front());
  auto job = start_job(ctx, expand_choices(p.spec, p.prompts), p.spec.collected_logprobs());
  return {std::move(job),
          ResponseMeta{Endpoint::CHAT, new_response_id(Endpoint::CHAT), unix_now(), ctx.model_id, false, p.tool_format, 0,
                       reasoning},
          p.spec.stream};
}

void handle_completions(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res) {
  handle_generation(ctx, Endpoint::COMPLETIONS, req, res);
}

void handle_chat_completions(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res) {
  handle_generation(ctx, Endpoint::CHAT, req, res);
}

void handle_models(const ApiContext& ctx, const HttpRequest&, HttpResponse& res) {
  res.set_content(json{{"object", "list"}, {"data", json::array({model_json(ctx)})}}.dump(), "application/json");
}

void handle_model(const ApiContext& ctx, const std::string& id, HttpResponse& res) {
  if (id != ctx.model_id) {
    throw ApiError(404, "the model '" + id + "' does not exist", "invalid_request_error", "model", "model_not_found");
  }
  res.set_content(model_json(ctx).dump(), "application/json");
}

}  // namespace tsr::server
