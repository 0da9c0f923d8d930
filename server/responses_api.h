// OpenAI's Responses API, POST /v1/responses, over the chat machinery: the request becomes
// a chat-completions request (input items → messages, instructions → a system message,
// function tools, text.format → response_format, max_output_tokens, reasoning.effort),
// runs as one, and its reply becomes output items (reasoning, message, function_call),
// whole or as the streaming events the official clients consume. previous_response_id
// continues a stored conversation (ResponseStore); store: false keeps nothing.
#pragma once

#include <memory>

#include "server/openai_api.h"
#include "server/response_store.h"

namespace tsr::server {

// At most this many responses are stored, this many bytes in all, for this long.
constexpr size_t kResponseStoreEntries = 4096;
constexpr size_t kResponseStoreBytes = size_t{256} << 20;
constexpr std::chrono::seconds kResponseStoreTtl{3600};

void handle_responses(const ApiContext& ctx, ResponseStore& store, const HttpRequest& req,
                      HttpResponse& res);

}  // namespace tsr::server
