// vLLM's token endpoints: POST /tokenize (a prompt, or chat messages through the template)
// and POST /detokenize (token ids back to text), with vLLM's request and response shapes.
// Handlers throw ApiError; the HTTP layer turns it into the error response.
#pragma once

#include "server/openai_api.h"

namespace tsr::server {

// {"prompt": "..."} or {"messages": [...]}, with "add_special_tokens" (default true for a
// prompt: BOS as the model wants; false for messages, as the template writes its own),
// "add_generation_prompt" (messages, default true) and "return_token_strs" ->
// {"count", "max_model_len", "tokens", "token_strs"}.
void handle_tokenize(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res);
// {"tokens": [...]} -> {"prompt": "..."}; special tokens are written out, as Hugging Face's
// decode does by default.
void handle_detokenize(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res);

}  // namespace tsr::server
