// OpenAI's POST /v1/embeddings: each input's output-norm states pooled as the model's GGUF
// says (mean, cls or last; generative models: the last token, as llama.cpp returns) and
// L2-normalized, as float arrays or base64 of little-endian float32. Handlers throw ApiError;
// the HTTP layer turns it into the error response.
#pragma once

#include "server/openai_api.h"

namespace tsr::server {

// {"input": a string, an array of strings, an array of token ids or an array of those,
//  "encoding_format": "float" | "base64", "dimensions": only the model's own width,
//  "model", "user"} -> {"object": "list", "data": [{"object": "embedding", "index",
//  "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}.
// Strings get BOS and EOS as the vocabulary adds them; every input counts as one choice
// against [server] max_choices.
void handle_embeddings(const ApiContext& ctx, const HttpRequest& req, HttpResponse& res);

}  // namespace tsr::server
