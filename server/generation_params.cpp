#include "server/generation_params.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>

#include "core/chat/reasoning.h"
#include "core/engine/engine.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace tsr::server {

namespace {

using nlohmann::json;

constexpr int32_t kMaxN = 128;
constexpr int32_t kMaxTopLogprobs = 20;

// A request relying on what is not served must not silently get plain text: tools on
// completions (they are chat's), the deprecated functions, a completion's suffix.
void refuse_unsupported(const json& body, Endpoint endpoint) {
  const json* functions = field(body, "functions");
  if (functions && !(functions->is_array() && functions->empty())) {
    throw unsupported_param("functions", "the deprecated functions (use tools)");
  }
  // Audio output and web search would silently be plain text.
  if (field(body, "audio")) throw unsupported_param("audio", "audio output");
  if (const json* m = field(body, "modalities"); m && !(m->is_array() && std::all_of(m->begin(), m->end(), [](const json& v) {
                                                     return v == "text";
                                                   }))) {
    throw unsupported_param("modalities", "output modalities other than text");
  }
  if (field(body, "web_search_options")) throw unsupported_param("web_search_options", "web search");
  if (endpoint == Endpoint::COMPLETIONS) {
    const json* tools = field(body, "tools");
    if (tools && !(tools->is_array() && tools->empty())) throw unsupported_param("tools", "tools on completions (use chat)");
    if (field(body, "suffix")) throw unsupported_param("suffix", "a suffix");
  }
}

// The request fields of the engine beyond OpenAI's, as vLLM names them: priority (lower
// runs first under [scheduler] policy = "priority"), cache_salt (prefix-cache isolation)
// and min_tokens (no end of generation, and no stop string, before that many tokens).
void parse_engine_fields(const json& body, RequestParams& p) {
  if (auto v = get_int(body, "priority", INT32_MIN, INT32_MAX)) p.priority = int32_t(*v);
  if (const json* salt = field(body, "cache_salt")) {
    if (!salt->is_string() || salt->get_ref<const std::string&>().empty() || salt->get_ref<const std::string&>().size() > 1024) {
      throw bad_param("cache_salt", "'cache_salt' must be a non-empty string of at most 1024 bytes");
    }
    p.cache_salt = salt->get<std::string>();
  }
  if (auto v = get_int(body, "min_tokens", 0, p.max_tokens)) p.min_tokens = int32_t(*v);
}

// OpenAI's response_format: text, json_object, or json_schema {name, schema, strict}.
std::optional<ConstraintSpec> response_format(const json& rf) {
  const json* type = rf.is_object() ? field(rf, "type") : nullptr;
  if (!type || !type->is_string()) throw bad_param("response_format", "'response_format' must be an object with a 'type'");
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") return ConstraintSpec{"json_object", ""};
  if (*type != "json_schema") {
    throw bad_param("response_format", "'response_format.type' must be 'text', 'json_object' or 'json_schema'");
  }
  const json* js = field(rf, "json_schema");
  const json* schema = js && js->is_object() ? field(*js, "schema") : nullptr;
  if (!schema) throw bad_param("response_format", "'response_format.json_schema.schema' is required");
  if (!schema->is_object() && !schema->is_boolean()) {
    throw bad_param("response_format", "'response_format.json_schema.schema' must be a JSON Schema object");
  }
  return ConstraintSpec{"json_schema", schema->dump()};
}

// A regex whose only match is `s`.
std::string regex_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string string_param(const json& v, const char* key) {
  if (!v.is_string()) throw bad_param(key, std::string("'") + key + "' must be a string");
  return v.get<std::string>();
}

// The constraint a request asks for, through OpenAI's response_format, Tessera's `grammar`
// (GBNF) and `regex`, or vLLM's guided_* parameters; at most one of them.
std::optional<Constraint> parse_constraint(const json& body) {
  std::optional<Constraint> out;
  auto set = [&](const char* key, std::optional<ConstraintSpec> spec) {
    if (!spec) return;
    if (out) throw bad_param(key, std::string("'") + key + "' cannot be combined with '" + out->param + "'");
    out = Constraint{key, std::move(*spec)};
  };
  if (const json* v = field(body, "response_format")) set("response_format", response_format(*v));
  if (const json* v = field(body, "grammar")) set("grammar", ConstraintSpec{"gbnf", string_param(*v, "grammar")});
  if (const json* v = field(body, "regex")) set("regex", ConstraintSpec{"regex", string_param(*v, "regex")});
  if (const json* v = field(body, "guided_grammar")) set("guided_grammar", ConstraintSpec{"gbnf", string_param(*v, "guided_grammar")});
  if (const json* v = field(body, "guided_regex")) set("guided_regex", ConstraintSpec{"regex", string_param(*v, "guided_regex")});
  if (const json* v = field(body, "guided_json")) {
    if (!v->is_object() && !v->is_string()) throw bad_param("guided_json", "'guided_json' must be a JSON Schema (object or string)");
    set("guided_json", ConstraintSpec{"json_schema", v->is_string() ? v->get<std::string>() : v->dump()});
  }
  if (const json* v = field(body, "constraint")) {  // any kind a loaded plugin serves
    const json* kind = v->is_object() ? field(*v, "kind") : nullptr;
    if (!kind || !kind->is_string()) throw bad_param("constraint", "'constraint' must be an object with a string 'kind'");
    const json* text = field(*v, "text");
    set("constraint", ConstraintSpec{kind->get<std::string>(), text ? string_param(*text, "constraint") : ""});
  }
  if (const json* v = field(body, "guided_choice")) {
    if (!v->is_array() || v->empty()) throw bad_param("guided_choice", "'guided_choice' must be a non-empty array of strings");
    std::string alternatives;
    for (const json& c : *v) alternatives += (alternatives.empty() ? "" : "|") + regex_literal(string_param(c, "guided_choice"));
    set("guided_choice", ConstraintSpec{"regex", "(" + alternatives + ")"});
  }
  return out;
}

std::vector<std::string> parse_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) stops.push_back(v->get<std::string>());
  else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) throw bad_param("stop", "'stop' must be a string or an array of strings");
      stops.push_back(s.get<std::string>());
    }
  } else {
    throw bad_param("stop", "'stop' must be a string or an array of strings");
  }
  // Every generated token is checked against every stop string on the engine's step
  // thread, which all requests share: bounded so that one request cannot slow the rest.
  constexpr size_t kMaxStops = 64, kMaxStopBytes = 1024;
  if (stops.size() > kMaxStops) throw bad_param("stop", "'stop' takes at most " + std::to_string(kMaxStops) + " strings");
  for (const std::string& s : stops) {
    if (s.empty()) throw bad_param("stop", "'stop' strings must not be empty");
    if (s.size() > kMaxStopBytes) throw bad_param("stop", "'stop' strings must be at most " + std::to_string(kMaxStopBytes) + " bytes");
  }
  return stops;
}

std::vector<LogitBias> parse_logit_bias(const json& body, int32_t n_vocab) {
  const json* v = field(body, "logit_bias");
  if (!v) return {};
  if (!v->is_object()) throw bad_param("logit_bias", "'logit_bias' must be an object mapping token ids to biases");
  std::vector<LogitBias> out;
  for (const auto& [key, bias] : v->items()) {
    size_t used = 0;
    long id = -1;
    try {
      id = std::stol(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id >= n_vocab) {
      throw bad_param("logit_bias", "'logit_bias' key '" + key + "' is not a token id below " + std::to_string(n_vocab));
    }
    out.push_back({static_cast<int32_t>(id), static_cast<float>(as_number(bias, "logit_bias", -100, 100))});
  }
  return out;
}

void parse_sampling(const json& body, SamplingParams& s, int32_t n_vocab) {
  if (auto t = get_number(body, "temperature", 0, 1e6)) s.temperature = float(*t);
  if (auto p = get_number(body, "top_p", 0, 1)) {
    if (*p == 0) throw bad_param("top_p", "'top_p' must be greater than 0");
    s.top_p = float(*p);
  }
  if (auto k = get_int(body, "top_k", -1, INT32_MAX)) s.top_k = *k < 0 ? 0 : int32_t(*k);  // -1: off (vLLM)
  if (auto p = get_number(body, "min_p", 0, 1)) s.min_p = float(*p);
  if (auto p = get_number(body, "typical_p", 0, 1)) {
    if (*p == 0) throw bad_param("typical_p", "'typical_p' must be greater than 0");
    s.typical_p = float(*p);
  }
  if (auto p = get_number(body, "presence_penalty", -2, 2)) s.presence_penalty = float(*p);
  if (auto p = get_number(body, "frequency_penalty", -2, 2)) s.frequency_penalty = float(*p);
  if (auto p = get_number(body, "repetition_penalty", 0, 1e6)) {
    if (*p == 0) throw bad_param("repetition_penalty", "'repetition_penalty' must be greater than 0");
    s.repeat_penalty = float(*p);
  }
  s.logit_bias = parse_logit_bias(body, n_vocab);
}

std::optional<int32_t> parse_logprobs(const json& body, Endpoint endpoint) {
  if (endpoint == Endpoint::COMPLETIONS) {
    const auto n = get_int(body, "logprobs", 0, kMaxTopLogprobs);
    return n ? std::optional(int32_t(*n)) : std::nullopt;
  }
  const bool on = get_bool(body, "logprobs").value_or(false);
  const auto top = get_int(body, "top_logprobs", 0, kMaxTopLogprobs);
  if (top && !on) throw bad_param("top_logprobs", "'top_logprobs' requires 'logprobs': true");
  return on ? std::optional(int32_t(top.value_or(0))) : std::nullopt;
}

void parse_stream(const json& body, GenerationSpec& spec) {
  spec.stream = get_bool(body, "stream").value_or(false);
  const json* opts = field(body, "stream_options");
  if (!opts) return;
  if (!spec.stream) throw bad_param("stream_options", "'stream_options' is only allowed when 'stream' is true");
  if (!opts->is_object()) throw bad_param("stream_options", "'stream_options' must be an object");
  const json* usage = field(*opts, "include_usage");
  if (usage && !usage->is_boolean()) throw bad_param("stream_options", "'stream_options.include_usage' must be a boolean");
  spec.include_usage = usage && usage->get<bool>();
}

// best_of (completions): n of best_of samples, chosen once all are done, so never streamed
// (as OpenAI); chat takes none but n.
void parse_best_of(const json& body, Endpoint endpoint, GenerationSpec& spec) {
  const std::optional<int64_t> best_of = get_int(body, "best_of", 1, kMaxN);
  if (!best_of || *best_of == spec.n) return;
  if (endpoint == Endpoint::CHAT) throw unsupported_param("best_of", "best_of on chat (completions take it)");
  if (*best_of < spec.n) throw bad_param("best_of", "'best_of' must be at least 'n'");
  if (spec.stream) throw bad_param("best_of", "'best_of' cannot be streamed: the best are known only at the end");
  spec.best_of = int32_t(*best_of);
}

// use_beam_search (completions): width from beam_width, best_of or n. What the beams do not
// carry (a stream, logprobs, stop strings, echo, constraints) is refused rather than ignored.
bool parse_beam_search(const json& body, Endpoint endpoint, GenerationSpec& spec) {
  if (!get_bool(body, "use_beam_search").value_or(false)) return false;
  if (endpoint == Endpoint::CHAT) throw unsupported_param("use_beam_search", "beam search on chat (completions take it)");
  for (const char* key : {"stream", "logprobs", "stop", "echo", "response_format", "grammar", "regex", "constraint",
                          "guided_json", "guided_regex", "guided_grammar", "guided_choice", "min_tokens"}) {
    const json* v = field(body, key);
    if (v && *v != json(false)) throw unsupported_param(key, std::string("'") + key + "' with beam search");
  }
  const auto best_of = get_int(body, "best_of", 1, kMaxN);
  const int64_t width = get_int(body, "beam_width", 1, kMaxN).value_or(best_of.value_or(spec.n));
  if (width < spec.n) throw bad_param("beam_width", "the beam width must be at least 'n'");
  spec.beam = BeamSpec{int32_t(width), get_number(body, "length_penalty", -10, 10).value_or(1.0)};
  return true;
}

// reasoning_effort (low, medium, high) or, exact, max_reasoning_tokens: a thinking budget.
void parse_reasoning(const json& body, GenerationSpec& spec) {
  if (auto effort = get_string(body, "reasoning_effort")) {
    const std::array<const char*, 3> names{"low", "medium", "high"};
    const auto it = std::find(names.begin(), names.end(), *effort);
    if (it == names.end()) throw bad_param("reasoning_effort", "'reasoning_effort' must be 'low', 'medium' or 'high'");
    spec.reasoning_budget = kReasoningEffortBudgets[it - names.begin()];
  }
  if (auto max = get_int(body, "max_reasoning_tokens", 1, INT32_MAX)) {
    spec.reasoning_budget = int32_t(*max);
    spec.reasoning_budget_asked = true;
  }
}

// What completions and chat read, and OpenAI's fields they accept and ignore (user, store,
// metadata, service_tier): the rest is logged once as unknown.
void log_unknown_generation_fields(const json& body, Endpoint endpoint) {
  log_unknown_fields(body,
                     {"model", "prompt", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
                      "top_k", "min_p", "typical_p", "repetition_penalty", "presence_penalty", "frequency_penalty",
                      "seed", "stop", "n", "best_of", "logprobs", "top_logprobs", "logit_bias", "echo", "suffix",
                      "stream", "stream_options", "ignore_eos", "min_tokens", "priority", "cache_salt",
                      "response_format", "grammar", "regex", "constraint", "guided_json", "guided_regex",
                      "guided_grammar", "guided_choice", "tools", "tool_choice", "parallel_tool_calls", "functions",
                      "user", "store", "metadata", "service_tier", "audio", "modalities", "web_search_options",
                      "use_beam_search", "beam_width", "length_penalty", "reasoning_effort", "max_reasoning_tokens",
                      "chat_template_kwargs"},
                     endpoint == Endpoint::CHAT ? "/v1/chat/completions" : "/v1/completions");
}

}  // namespace

GenerationSpec parse_generation(const json& body, Endpoint endpoint, RequestParams defaults, int32_t n_vocab) {
  log_unknown_generation_fields(body, endpoint);
  refuse_unsupported(body, endpoint);
  GenerationSpec spec;
  spec.params = std::move(defaults);
  RequestParams& p = spec.params;
  const char* max_key = field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (auto m = get_int(body, max_key, 1, INT32_MAX)) p.max_tokens = int32_t(*m);
  parse_sampling(body, p.sampling, n_vocab);
  if (auto s = get_int(body, "seed", INT64_MIN, INT64_MAX)) p.seed = static_cast<uint64_t>(*s);
  p.stop = parse_stop(body);
  p.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  parse_engine_fields(body, p);
  spec.n = int32_t(get_int(body, "n", 1, kMaxN).value_or(1));
  spec.logprobs = parse_logprobs(body, endpoint);
  parse_stream(body, spec);
  if (!parse_beam_search(body, endpoint, spec)) parse_best_of(body, endpoint, spec);
  if (endpoint == Endpoint::COMPLETIONS) spec.echo = get_bool(body, "echo").value_or(false);
  if (spec.echo && spec.logprobs) throw unsupported_param("echo", "echo with logprobs (prompt logprobs)");
  spec.constraint = parse_constraint(body);
  if (spec.constraint) p.constraint = spec.constraint->spec;
  if (endpoint == Endpoint::CHAT) {
    spec.tools = parse_tools(body);
    parse_reasoning(body, spec);
  }
  return spec;
}

std::optional<bool> apply_reasoning(GenerationSpec& spec, const Engine& engine, const std::vector<int32_t>& prompt) {
  if (!template_has_reasoning(engine.chat_template())) {
    if (spec.reasoning_budget_asked) {
      throw bad_param("max_reasoning_tokens", "this model's chat template has no reasoning block (<think> ... </think>)");
    }
    return std::nullopt;
  }
  const Tokenizer& tok = engine.tokenizer();
  const size_t tail = std::min<size_t>(prompt.size(), 8);
  const bool opened = prompt_opens_reasoning(tok.decode(std::span(prompt).last(tail), false, true));
  if (spec.reasoning_budget) {
    spec.params.reasoning_budget = ReasoningBudgetParams{*spec.reasoning_budget, std::string(kThinkOpen),
                                                         std::string(kThinkClose), tok.encode("\n</think>\n\n", false, true),
                                                         opened};
  }
  return opened;
}

std::optional<ToolCallFormat> apply_tool_choice(GenerationSpec& spec, const std::string& chat_template) {
  if (!spec.tools || spec.tools->choice == ToolChoice::NONE) return std::nullopt;
  // Templates that print no tools get them as text in the hermes format.
  const ToolCallFormat format = template_renders_tools(chat_template) ? tool_call_format(chat_template) : ToolCallFormat::HERMES;
  std::optional<ToolConstraint> c = tool_constraint(*spec.tools, format);
  if (!c) return format;
  if (spec.constraint) {
    // auto's lazy constraint gives way to the caller's own; a forced call cannot.
    if (!c->trigger.empty()) return format;
    throw bad_param("tool_choice", "a required or named 'tool_choice' cannot be combined with '" + spec.constraint->param + "'");
  }
  spec.constraint = Constraint{"tool_choice", c->spec};
  spec.params.constraint = std::move(c->spec);
  spec.params.constraint_trigger = std::move(c->trigger);
  return format;
}

std::vector<RequestParams> expand_choices(const GenerationSpec& spec, const std::vector<std::vector<int32_t>>& prompts) {
  static std::atomic<uint64_t> groups{0};
  std::vector<RequestParams> out;
  for (const std::vector<int32_t>& prompt : prompts) {
    const uint64_t group = spec.samples() > 1 ? ++groups : 0;  // they compute the prompt once
    for (int32_t i = 0; i < spec.samples(); ++i) {
      RequestParams p = spec.params;
      p.prompt = prompt;
      p.prompt_group = group;
      if (p.seed) *p.seed += uint64_t(i);
      out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace tsr::server
