// Request input -> prompt token ids: the completions "prompt" field and the chat
// "messages" rendered with the model's chat template.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tsr {
class Engine;
}

namespace tsr::server {

// "prompt": a string, an array of token ids, or an array of those (one choice set per
// prompt). Strings get BOS as the model wants; token arrays are used as given.
std::vector<std::vector<int32_t>> completion_prompts(const nlohmann::json& body, const Engine& engine);
// The same for any field of that form (/v1/embeddings' "input"); errors name `param`.
std::vector<std::vector<int32_t>> prompt_list(const nlohmann::json& body, const std::string& param,
                                              const Engine& engine);
// How many prompts a field of that form holds, before any is tokenized.
size_t num_prompts(const nlohmann::json& value);

// "messages" through the model's tokenizer.chat_template (ChatML when it has none), with
// the vocabulary's BOS and EOS strings. Special-token text in the rendered prompt becomes
// those tokens; BOS is added only when the template did not write it already.
std::vector<int32_t> chat_prompt(const nlohmann::json& body, const Engine& engine, bool add_generation_prompt = true);

// Throws ApiError 400 context_length_exceeded when `bytes` of text need more tokens than
// the context holds even at the vocabulary's longest token (no tokenizer pass).
void check_text_fits(size_t bytes, const Engine& engine, const std::string& param);

}  // namespace tsr::server
