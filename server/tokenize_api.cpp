#include "server/tokenize_api.h"

#include "server/http_message.h"

#include "core/engine/engine.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/prompts.h"

namespace tsr::server {

namespace {

using nlohmann::json;

std::vector<int32_t> text_tokens(const ApiContext& ctx, const json& body) {
  const json* prompt = field(body, "prompt");
  if (prompt == nullptr || !prompt->is_string()) throw bad_param("prompt", "'prompt' must be a string");
  const std::string& text = prompt->get_ref<const std::string&>();
  check_text_fits(text.size(), ctx.engine, "prompt");
  return ctx.engine.tokenizer().encode(text, get_bool(body, "add_special_tokens").value_or(true), false);
}

std::vector<int32_t> chat_tokens(const ApiContext& ctx, const json& body) {
  // The template writes BOS and the turn markers itself; add_special_tokens would add
  // them a second time, so it is refused rather than honoured wrongly.
  if (get_bool(body, "add_special_tokens").value_or(false)) {
    throw bad_param("add_special_tokens", "add_special_tokens is not supported with messages (the template adds them)");
  }
  return chat_prompt(body, ctx.engine, get_bool(body, "add_generation_prompt").value_or(true));
}

json token_strings(const ApiContext& ctx, const std::vector<int32_t>& ids) {
  json strs = json::array();
  for (const int32_t id : ids) strs.push_back(ctx.engine.tokenizer().vocab().tokens[size_t(id)]);
  return strs;
}

}  // namespace

void handle_tokenize(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const json body = parse_body(req);
  check_model(ctx, body);
  const bool chat = field(body, "messages") != nullptr;
  if (chat == (field(body, "prompt") != nullptr)) throw bad_param("prompt", "give either 'prompt' or 'messages'");
  const std::vector<int32_t> ids = chat ? chat_tokens(ctx, body) : text_tokens(ctx, body);
  const bool strs = get_bool(body, "return_token_strs").value_or(false);
  const json out{{"count", ids.size()},
                 {"max_model_len", ctx.engine.context_length()},
                 {"tokens", ids},
                 {"token_strs", strs ? token_strings(ctx, ids) : json(nullptr)}};
  res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void handle_detokenize(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const json body = parse_body(req);
  check_model(ctx, body);
  const json* tokens = field(body, "tokens");
  if (tokens == nullptr || !tokens->is_array()) throw bad_param("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (const json& t : *tokens) ids.push_back(int32_t(as_int(t, "tokens", 0, ctx.engine.tokenizer().n_tokens() - 1)));
  const std::string text = ctx.engine.tokenizer().decode(ids, true, true);
  res.set_content(json{{"prompt", text}}.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

}  // namespace tsr::server
