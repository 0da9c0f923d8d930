// `tessera run`: llama.cpp-style generation from -p PROMPT or -f FILE (one prompt a line).
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <chrono>
#include <optional>
#include <random>

#include "apps/tessera/app_config.h"
#include "apps/tessera/chat_repl.h"
#include "apps/tessera/commands.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "base/error.h"

namespace tsr::app {

namespace {

// tessera run's -n when neither the flag nor [sampling] max_tokens gives one (clarified).
constexpr int32_t kDefaultNPredict = 128;

struct RunFlags {
  EngineFlags engine;
  std::string prompt, prompt_file, system_prompt;
  // Sampling flags left unset take the config's [sampling] defaults.
  std::optional<int32_t> n_predict, top_k, repeat_last_n;
  std::optional<float> temperature, top_p, min_p, typical_p, repeat_penalty, presence_penalty,
      frequency_penalty;
  std::optional<std::string> samplers;
  // Constrained output (llama.cpp's flags, plus --regex); at most one.
  std::string grammar, grammar_file, json_schema, regex;
  int64_t seed = -1;  // -1: random, as llama.cpp's default
  bool ignore_eos = false, echo = false, json = false, conversation = false;
};

// "\n", "\t" and "\\" in a prompt line stand for a newline, a tab and a backslash.
std::string unescape(const std::string& line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      const char c = line[i + 1];
      if (c == 'n' || c == 't' || c == '\\') {
        out += c == 'n' ? '\n' : c == 't' ? '\t' : '\\';
        ++i;
        continue;
      }
    }
    out += line[i];
  }
  return out;
}

constexpr std::streamsize kMaxInputFileBytes = std::streamsize{64} << 20;

// A whole file of at most kMaxInputFileBytes, read with the bound checked as it is read:
// a directory is refused by name, and /dev/zero or a FIFO that never ends fail at the bound.
std::string read_bounded(const std::string& path, const char* what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(std::string(what) + " " + path + " is a directory", TSR_STATUS_IO_ERROR);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(std::string("cannot open ") + what + " " + path, TSR_STATUS_IO_ERROR);
  std::string text(static_cast<size_t>(kMaxInputFileBytes) + 1, '\0');
  in.read(text.data(), kMaxInputFileBytes + 1);
  if (in.bad()) throw Error(std::string("cannot read ") + what + " " + path, TSR_STATUS_IO_ERROR);
  if (in.gcount() > kMaxInputFileBytes) {
    throw Error(std::string(what) + " " + path + " is larger than " + std::to_string(kMaxInputFileBytes >> 20) + " MiB");
  }
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

std::vector<std::string> read_prompts(const std::string& path) {
  std::istringstream in(read_bounded(path, "prompt file"));
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts.push_back(unescape(line));
  }
  if (prompts.empty()) throw Error("prompt file " + path + " has no prompt (one per line)");
  return prompts;
}

std::string read_file(const std::string& path) { return read_bounded(path, "grammar file"); }

// Sampling flags are refused where the config refuses the keys they stand for: the same
// ranges and the same words, with the flag named. -n also takes llama.cpp's -1 (-s's -1,
// a random seed, is drawn before any request: see register_run).
void check_sampling_flags(const RunFlags& f) {
  const auto check = [](const char* flag, const char* key, auto value) {
    if (value) config_parse_string(fmt::format("[sampling]\n{} = {}\n", key, *value), flag);
  };
  check("--temp", "temperature", f.temperature);
  check("--top-k", "top_k", f.top_k);
  check("--top-p", "top_p", f.top_p);
  check("--min-p", "min_p", f.min_p);
  check("--typical", "typical_p", f.typical_p);
  check("--repeat-penalty", "repeat_penalty", f.repeat_penalty);
  check("--repeat-last-n", "repeat_last_n", f.repeat_last_n);
  check("--presence-penalty", "presence_penalty", f.presence_penalty);
  check("--frequency-penalty", "frequency_penalty", f.frequency_penalty);
  if (f.n_predict && *f.n_predict < -1) {
    throw Error("-n " + std::to_string(*f.n_predict) + ": must be -1 (until the context is full), 0 or more");
  }
}

std::optional<ConstraintSpec> constraint_from(const RunFlags& f) {
  if (!f.grammar.empty()) return ConstraintSpec{"gbnf", f.grammar};
  if (!f.grammar_file.empty()) return ConstraintSpec{"gbnf", read_file(f.grammar_file)};
  if (!f.json_schema.empty()) {
    // llama.cpp's -j {} means "any JSON object".
    if (f.json_schema == "{}") return ConstraintSpec{"json_object", ""};
    return ConstraintSpec{"json_schema", f.json_schema};
  }
  if (!f.regex.empty()) return ConstraintSpec{"regex", f.regex};
  return std::nullopt;
}

// Prompt `index` of the run (0 for -p). Its seed is the run's plus the index, as the
// server gives choice i of a request seed + i: repeated prompts in -f give different
// samples, and the same seed repeats the whole run.
RequestParams request_from(const Engine& engine, const RunFlags& f, std::vector<int32_t> prompt, size_t index = 0) {
  check_sampling_flags(f);  // a refusal is the request's (with --json: its error object)
  RequestParams p = engine.request_defaults();
  p.prompt = std::move(prompt);
  // -n, else [sampling] max_tokens, else 128 (llama.cpp's old default; the server's is the
  // rest of the context, as an API request without max_tokens).
  const int32_t n = f.n_predict.value_or(engine.config().sampling.max_tokens.value_or(kDefaultNPredict));
  p.max_tokens = n < 0 ? INT32_MAX : n;
  if (f.seed >= 0) p.seed = static_cast<uint64_t>(f.seed);
  if (p.seed) *p.seed += index;
  p.ignore_eos = f.ignore_eos;
  SamplingParams& s = p.sampling;
  s.temperature = f.temperature.value_or(s.temperature);
  s.top_k = f.top_k.value_or(s.top_k);
  s.top_p = f.top_p.value_or(s.top_p);
  s.min_p = f.min_p.value_or(s.min_p);
  s.typical_p = f.typical_p.value_or(s.typical_p);
  s.repeat_penalty = f.repeat_penalty.value_or(s.repeat_penalty);
  s.repeat_last_n = f.repeat_last_n.value_or(s.repeat_last_n);
  s.presence_penalty = f.presence_penalty.value_or(s.presence_penalty);
  s.frequency_penalty = f.frequency_penalty.value_or(s.frequency_penalty);
  if (f.samplers) s.order = parse_sampler_order(*f.samplers);
  p.constraint = constraint_from(f);
  return p;
}

void log_stats(const RequestStats& s, tsr_finish_reason reason) {
  const double pp = s.ttft_ms > 0 ? s.prompt_tokens * 1000.0 / s.ttft_ms : 0;
  const double tg = s.tpot_ms > 0 ? 1000.0 / s.tpot_ms : 0;
  spdlog::info("prompt: {} tokens ({} cached), first token after {:.1f} ms ({:.1f} tok/s); "
               "generated {} tokens at {:.1f} tok/s; finish: {}",
               s.prompt_tokens, s.cached_tokens, s.ttft_ms, pp, s.completion_tokens, tg,
               finish_reason_name(reason));
  if (s.draft_tokens > 0) {
    spdlog::info("speculative: {} of {} draft tokens accepted ({:.1f}%), {:.2f} tokens per verifying pass",
                 s.accepted_tokens, s.draft_tokens, 100.0 * s.accepted_tokens / s.draft_tokens,
                 double(s.accepted_tokens + s.verifications) / double(std::max<int64_t>(s.verifications, 1)));
  }
}

// Engine-wide totals, e.g. how many target forward passes each output token cost.
void log_engine_stats(const Engine& engine) {
  const EngineStats s = engine.stats();
  spdlog::info("engine: {} steps for {} generated tokens ({:.3f} target passes per token); "
               "prefix cache hit rate {:.1f}%; {} preemptions",
               s.steps, s.generated_tokens,
               s.generated_tokens ? double(s.steps) / s.generated_tokens : 0.0,
               100 * s.prefix_hit_rate, s.preemptions);
  if (s.draft_tokens > 0) {
    spdlog::info("speculative: {} of {} draft tokens accepted ({:.1f}%), {:.2f} tokens per verifying pass",
                 s.accepted_tokens, s.draft_tokens, 100.0 * s.accepted_tokens / s.draft_tokens,
                 double(s.accepted_tokens + s.verifications) / double(std::max<int64_t>(s.verifications, 1)));
  }
}

nlohmann::json completion_json(const std::string& prompt, const GenerateResult& r) {
  nlohmann::json j{{"prompt", prompt}, {"text", r.text}, {"ids", r.tokens},
                   {"prompt_tokens", r.stats.prompt_tokens},
                   {"cached_tokens", r.stats.cached_tokens},
                   {"completion_tokens", r.stats.completion_tokens},
                   {"finish_reason", finish_reason_name(r.finish_reason)}};
  if (r.finish_reason == TSR_FINISH_ERROR) j["error"] = r.error;
  return j;
}

// -n 0, as llama.cpp's: nothing is generated; the prompt is only tokenized. No request is submitted
// (the engine refuses max_tokens 0); the result says "length" with the prompt's size.
bool generates_nothing(const RunFlags& f) { return f.n_predict == 0; }

GenerateResult nothing_generated(const Engine& engine, const std::string& prompt) {
  GenerateResult r;
  r.finish_reason = TSR_FINISH_LENGTH;
  r.stats.prompt_tokens = static_cast<decltype(r.stats.prompt_tokens)>(engine.tokenize(prompt).size());
  return r;
}

int run_single(Engine& engine, const RunFlags& f) {
  if (f.json) {  // one object, with finish_reason "error" when the request is refused too
    GenerateResult r;
    try {
      r = generates_nothing(f) ? nothing_generated(engine, f.prompt)
                               : engine.generate(request_from(engine, f, engine.tokenize(f.prompt)));
    } catch (const Error& e) {
      r.finish_reason = TSR_FINISH_ERROR;
      r.error = e.what();
    }
    std::puts(completion_json(f.prompt, r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    log_engine_stats(engine);
    return r.finish_reason == TSR_FINISH_ERROR ? 1 : 0;
  }
  if (f.echo) std::fwrite(f.prompt.data(), 1, f.prompt.size(), stdout);
  if (generates_nothing(f)) {
    std::fputc('\n', stdout);
    return 0;
  }
  const GenerateResult r =
      engine.generate(request_from(engine, f, engine.tokenize(f.prompt)), [](const RequestOutput& out) {
        std::fwrite(out.text.data(), 1, out.text.size(), stdout);
        std::fflush(stdout);
      });
  std::fputc('\n', stdout);
  if (r.finish_reason == TSR_FINISH_ERROR) throw Error(r.error);
  log_stats(r.stats, r.finish_reason);
  log_engine_stats(engine);
  return 0;
}

// All prompts go to the scheduler at once; results print in input order.
int run_file(Engine& engine, const RunFlags& f) {
  const std::vector<std::string> prompts = read_prompts(f.prompt_file);
  std::vector<GenerateResult> results(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (generates_nothing(f)) {
      results[i] = nothing_generated(engine, prompts[i]);
      continue;
    }
    try {
      engine.submit(request_from(engine, f, engine.tokenize(prompts[i]), i), [&results, i](const RequestOutput& out) {
        GenerateResult& r = results[i];
        r.tokens.insert(r.tokens.end(), out.tokens.begin(), out.tokens.end());
        r.text += out.text;
        r.finish_reason = out.finish_reason;
        r.error = out.error;
        r.stats = out.stats;
      });
    } catch (const Error& e) {
      results[i].finish_reason = TSR_FINISH_ERROR;
      results[i].error = e.what();
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  while (engine.step()) {
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t generated = 0;
  for (const GenerateResult& r : results) generated += static_cast<int64_t>(r.tokens.size());
  spdlog::info("{} tokens for {} prompts in {:.2f} s: {:.1f} tok/s aggregate", generated,
               prompts.size(), seconds, generated / seconds);
  int status = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const GenerateResult& r = results[i];
    if (r.finish_reason == TSR_FINISH_ERROR) status = 1;
    if (f.json) {
      std::puts(completion_json(prompts[i], r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (r.finish_reason == TSR_FINISH_ERROR) {
      spdlog::error("prompt {}: {}", i + 1, r.error);
      std::putchar('\n');  // line i of the output stays prompt i's
    } else {
      std::printf("%s%s\n", f.echo ? prompts[i].c_str() : "", r.text.c_str());
    }
  }
  spdlog::info("{} prompts", prompts.size());
  log_engine_stats(engine);
  return status;
}

// -cnv: -sys (or -p) is the system prompt; turn i samples with seed + i; without -n a reply
// runs to its end-of-turn token (llama-cli's conversation default), not 128 tokens.
ConversationOptions conversation_options(const Engine& engine, std::shared_ptr<const RunFlags> f) {
  ConversationOptions o;
  o.system_prompt = f->system_prompt.empty() ? f->prompt : f->system_prompt;
  o.request = [&engine, f](std::vector<int32_t> prompt, size_t turn) {
    RequestParams p = request_from(engine, *f, std::move(prompt), turn);
    if (!f->n_predict) p.max_tokens = engine.config().sampling.max_tokens.value_or(INT32_MAX);
    return p;
  };
  return o;
}

}  // namespace

std::function<int()> register_run(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  add_engine_flags(app, f->engine, {.ctx_size = true, .chat_template = true});
  auto* p = app.add_option("-p,--prompt", f->prompt, "prompt text (with -cnv: the system prompt unless -sys gives one)");
  app.add_option("-f,--file", f->prompt_file, "file with one prompt per line")->excludes(p);
  app.add_option("-n,--n-predict", f->n_predict, "tokens to generate (-1: until the context is full; 0: none; default [sampling] max_tokens, else 128)");
  app.add_option("--temp", f->temperature, "temperature, 0 = greedy (default 0.8)");
  app.add_option("--top-k", f->top_k, "top-k, 0 = off (default 40)");
  app.add_option("--top-p", f->top_p, "top-p, 1 = off (default 0.95)");
  app.add_option("--min-p", f->min_p, "min-p, 0 = off (default 0.05)");
  app.add_option("--typical", f->typical_p, "locally typical sampling, 1 = off (default 1)");
  app.add_option("--repeat-penalty", f->repeat_penalty, "llama.cpp repetition penalty, 1 = off");
  app.add_option("--repeat-last-n", f->repeat_last_n, "tokens the repetition penalty looks back (-1: all)");
  app.add_option("--presence-penalty", f->presence_penalty, "OpenAI presence penalty over the output");
  app.add_option("--frequency-penalty", f->frequency_penalty, "OpenAI frequency penalty over the output");
  app.add_option("--samplers", f->samplers, "stage order, e.g. \"penalties;top_k;top_p;min_p;temperature\"");
  auto* g = app.add_option("--grammar", f->grammar, "GBNF grammar the output must match");
  auto* gf = app.add_option("--grammar-file", f->grammar_file, "file with a GBNF grammar")->excludes(g);
  auto* js = app.add_option("-j,--json-schema", f->json_schema, "JSON Schema the output must satisfy ({}: any object)")
                 ->excludes(g)->excludes(gf);
  app.add_option("--regex", f->regex, "regex the whole output must match")->excludes(g)->excludes(gf)->excludes(js);
  app.add_option("-s,--seed", f->seed, "random seed (-1: random)");
  app.add_flag("--ignore-eos", f->ignore_eos, "do not stop at end-of-generation tokens");
  app.add_flag("--echo", f->echo, "print the prompt before the continuation");
  app.add_flag("--json", f->json, "one JSON object per completion (text, ids, usage, finish_reason)");
  auto* cnv = app.add_flag("-i,--interactive,--conversation", f->conversation,
                           "chat in the terminal with the model's template (-cnv; /exit ends it)");
  cnv->excludes("--file")->excludes("--json");
  app.add_option("--system-prompt", f->system_prompt, "conversation: the system prompt (-sys)")->needs(cnv);
  return [f]() -> int {
    try {
      const Config config = load_app_config(f->engine);
      if (!f->conversation && f->prompt_file.empty() && f->prompt.empty()) {
        throw Error("give a prompt with -p or -f (or chat with -cnv)");
      }
      if (f->seed < -1) throw Error("-s " + std::to_string(f->seed) + ": must be -1 (random) or a seed >= 0");
      auto flags = std::make_shared<RunFlags>(*f);
      if (flags->seed < 0 && !config.sampling.seed) {  // llama.cpp's -s -1: a random seed, logged
        flags->seed = static_cast<int64_t>(std::random_device{}() & 0x7fffffffu);
        spdlog::info("seed: {} (random; -s {} repeats this run; prompt i of -f takes seed + i)", flags->seed, flags->seed);
      }
      auto engine = Engine::create(config);
      if (flags->conversation) return run_conversation(*engine, conversation_options(*engine, flags));
      return flags->prompt_file.empty() ? run_single(*engine, *flags) : run_file(*engine, *flags);
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      return 1;
    }
  };
}

}  // namespace tsr::app
