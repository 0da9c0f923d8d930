// OpenAI response bodies: text_completion / chat.completion objects, their streaming
// chunks, usage and logprobs, built from the engine's per-choice increments.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/generation_job.h"
#include "server/generation_params.h"

namespace tsr {
class Tokenizer;
}

namespace tsr::server {

struct ResponseMeta {
  Endpoint endpoint = Endpoint::COMPLETIONS;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;
  // Chat with tools: the format replies are split into content and tool calls in (the
  // handler fills ChoiceDelta::tool_calls).
  std::optional<ToolCallFormat> tool_format = std::nullopt;
  // Completions with best_of: the samples per prompt the n best are chosen from (0: none).
  int32_t best_of = 0;
  // Chat with a reasoning template: replies split into reasoning_content and content (the
  // value: whether the prompt opened the block).
  std::optional<bool> reasoning = std::nullopt;
};

// A fresh response id with the endpoint's prefix.
std::string new_response_id(Endpoint endpoint);

// A whole chat reply split as `meta` says: reasoning_content off the front, then tool calls.
void split_reply(ChoiceDelta& c, const ResponseMeta& meta);

// Appends an increment to a choice's running total (non-streaming responses).
void accumulate(ChoiceDelta& total, ChoiceDelta&& delta);

// Prompt tokens count once per prompt (choice i of n belongs to prompt i / n), completion
// tokens once per choice, as OpenAI counts them.
nlohmann::json usage_json(const std::vector<RequestStats>& finals, int32_t n);

// The whole response; `choices` are whole choices in index order.
nlohmann::json response_json(const ResponseMeta& meta, const std::vector<ChoiceDelta>& choices, int32_t n,
                             const Tokenizer& tokenizer);

// One streaming chunk for one choice's increment. `first` marks the choice's first chunk
// (chat sends the assistant role there); `text_offset` is the completions logprobs'
// running offset, advanced past this chunk's tokens.
nlohmann::json chunk_json(const ResponseMeta& meta, const ChoiceDelta& delta, bool first, size_t& text_offset,
                          const Tokenizer& tokenizer);

// The last chunk with stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ResponseMeta& meta, nlohmann::json usage);

}  // namespace tsr::server
