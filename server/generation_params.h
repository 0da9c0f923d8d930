// The generation parameters /v1/completions and /v1/chat/completions share: OpenAI's
// (max_tokens, temperature, top_p, stop, n, seed, logprobs, penalties, logit_bias, stream)
// plus llama.cpp/vLLM extensions (top_k, min_p, typical_p, repetition_penalty, ignore_eos),
// and constrained output: response_format (json_object, json_schema), Tessera's `grammar`
// (GBNF), `regex` and `constraint` ({kind, text}: any kind a loaded plugin serves), and vLLM's guided_json / guided_regex / guided_grammar /
// guided_choice; chat's tools (server/tool_choice.h). Parameters naming features the
// engine lacks are refused with a 400 that names them, never ignored.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <vector>

#include "core/request/request.h"
#include "server/tool_choice.h"

namespace tsr {
class Engine;
}

namespace tsr::server {

enum class Endpoint { COMPLETIONS, CHAT };

struct Constraint {
  std::string param;  // the request parameter it came from, for error messages
  ConstraintSpec spec;
};

// vLLM's beam search extension on completions (server/beam_search.h).
struct BeamSpec {
  int32_t width = 1;            // beam_width, else best_of, else n
  double length_penalty = 1.0;  // a hypothesis scores logprob / tokens^length_penalty
};

struct GenerationSpec {
  RequestParams params;           // everything but the prompt
  int32_t n = 1;                  // choices per prompt
  int32_t best_of = 0;            // completions: samples per prompt the n of highest
                                  // cumulative logprob are chosen from (0: n, no choice)
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  std::optional<int32_t> logprobs;  // alternatives per token; absent: no logprobs
  bool echo = false;              // completions: the prompt precedes the text
  std::optional<Constraint> constraint;  // also in params.constraint
  std::optional<ToolRequest> tools;       // chat: tools, tool_choice, parallel_tool_calls
  std::optional<BeamSpec> beam;           // completions with use_beam_search
  // Chat: max_reasoning_tokens, or reasoning_effort's budget (kReasoningEffortBudgets).
  std::optional<int32_t> reasoning_budget;
  bool reasoning_budget_asked = false;    // by max_reasoning_tokens (a model without a block refuses it)

  int32_t samples() const { return best_of > 0 ? best_of : n; }  // engine requests per prompt
  // Per-token logprobs the job collects: those asked for, or (best_of) the sampled token's
  // alone, to rank the samples by.
  std::optional<int32_t> collected_logprobs() const { return logprobs ? logprobs : best_of > 0 ? std::optional(0) : std::nullopt; }
};

// reasoning_effort's thinking budgets in tokens: low, medium, high.
constexpr int32_t kReasoningEffortBudgets[] = {256, 1024, 4096};

// `defaults` are the engine's request defaults ([sampling] in the config).
GenerationSpec parse_generation(const nlohmann::json& body, Endpoint endpoint, RequestParams defaults,
                                int32_t n_vocab);

// Required and named tool choices become the request's constraint, in the chat
// template's call format (a 400 when another constraint is asked for too). Returns the
// format replies are parsed in, or nullopt without tools or with tool_choice "none".
std::optional<ToolCallFormat> apply_tool_choice(GenerationSpec& spec, const std::string& chat_template);

// A chat template with a reasoning block: the thinking budget (if any) becomes the request's,
// forcing "\n</think>\n\n" at it; returns whether the prompt opened the block, or nullopt
// for a template without one (then max_reasoning_tokens is a 400; reasoning_effort does
// nothing, as for any model that does not reason).
std::optional<bool> apply_reasoning(GenerationSpec& spec, const Engine& engine, const std::vector<int32_t>& prompt);

// One engine request per prompt and sample (samples(): n, or best_of), in order
// (prompt-major). With several per prompt they share a prompt group (its KV computed once, then forked), and
// with a seed, choice i gets seed + i so that the choices differ but the response stays
// reproducible.
std::vector<RequestParams> expand_choices(const GenerationSpec& spec, const std::vector<std::vector<int32_t>>& prompts);

}  // namespace tsr::server
