// `tessera run -cnv` (or -i): a conversation in the terminal, as llama-cli's conversation
// mode. Each turn renders the whole conversation with the engine's chat template and
// submits it; the prefix cache holds the earlier turns' KV blocks, so a turn computes only
// what is new. Replies stream as they are generated.
//
// Input: one line a turn ("\" at the end of a line continues it on the next). /exit or
// /quit (or end of input) ends the session, /clear starts the conversation again. Ctrl-C
// during a reply stops that reply, which stays in the history as far as it got; at the
// prompt it ends the session.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/engine/engine.h"

namespace tsr::app {

struct ConversationOptions {
  std::string system_prompt;  // empty: none
  // The request for turn `turn` (from 0) with this rendered prompt: the run's sampling flags.
  std::function<RequestParams(std::vector<int32_t> prompt, size_t turn)> request;
};

// Reads stdin and writes stdout until the session ends; returns the exit status.
int run_conversation(Engine& engine, const ConversationOptions& options);

}  // namespace tsr::app
