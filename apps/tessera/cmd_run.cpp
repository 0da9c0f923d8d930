// `tessera run`: llama.cpp-style generation from -p PROMPT or -f FILE (one prompt a line).
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "apps/tessera/commands.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "core/error.h"

namespace tsr::app {

namespace {

struct RunFlags {
  std::string model, prompt, prompt_file, config;
  int32_t n_predict = 128;
  float temperature = 0.8f;
  int64_t seed = -1;  // -1: random, as llama.cpp's default
  int32_t threads = 0;
  bool ignore_eos = false, echo = false, json = false, verbose = false;
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

std::vector<std::string> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open prompt file " + path, TSR_STATUS_IO_ERROR);
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts.push_back(unescape(line));
  }
  return prompts;
}

const char* finish_name(tsr_finish_reason r) {
  switch (r) {
    case TSR_FINISH_STOP: return "stop";
    case TSR_FINISH_LENGTH: return "length";
    case TSR_FINISH_ABORT: return "abort";
    case TSR_FINISH_ERROR: return "error";
    default: return "none";
  }
}

Config load_config(const RunFlags& f) {
  Config c = f.config.empty() ? Config{} : config_parse_file(f.config);
  if (!f.model.empty()) c.model.path = f.model;
  if (f.threads > 0) c.backend.threads = f.threads;
  if (f.threads == 0 && c.backend.threads == 0) {
    c.backend.threads = static_cast<int32_t>(std::thread::hardware_concurrency());
  }
  if (f.verbose) c.log.level = "debug";
  return c;
}

GenerateOptions options_from(const RunFlags& f) {
  GenerateOptions o;
  o.max_tokens = f.n_predict < 0 ? INT32_MAX : f.n_predict;
  o.temperature = f.temperature;
  if (f.seed >= 0) o.seed = static_cast<uint64_t>(f.seed);
  o.ignore_eos = f.ignore_eos;
  return o;
}

void log_stats(const GenerateResult& r) {
  const double pp = r.prompt_ms > 0 ? r.prompt_tokens * 1000.0 / r.prompt_ms : 0;
  const size_t decoded = r.tokens.empty() ? 0 : r.tokens.size() - 1;
  const double tg = r.decode_ms > 0 ? decoded * 1000.0 / r.decode_ms : 0;
  spdlog::info("prompt: {} tokens in {:.1f} ms ({:.1f} tok/s); generated {} tokens, "
               "{:.1f} ms ({:.1f} tok/s); finish: {}",
               r.prompt_tokens, r.prompt_ms, pp, r.tokens.size(), r.decode_ms, tg,
               finish_name(r.finish_reason));
}

int run_single(Engine& engine, const RunFlags& f) {
  if (f.echo) std::fwrite(f.prompt.data(), 1, f.prompt.size(), stdout);
  GenerateOptions o = options_from(f);
  o.on_token = [](int32_t, std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  const GenerateResult r = engine.generate(f.prompt, o);
  std::fputc('\n', stdout);
  log_stats(r);
  return 0;
}

nlohmann::json completion_json(const std::string& prompt, const GenerateResult* r,
                               const std::string& error) {
  nlohmann::json j{{"prompt", prompt}};
  if (r == nullptr) {
    j.update({{"text", ""}, {"ids", nlohmann::json::array()}, {"finish_reason", "error"},
              {"error", error}});
    return j;
  }
  j.update({{"text", r->text}, {"ids", r->tokens}, {"prompt_tokens", r->prompt_tokens},
            {"cached_tokens", 0}, {"completion_tokens", r->tokens.size()},
            {"finish_reason", finish_name(r->finish_reason)}});
  return j;
}

int run_file(Engine& engine, const RunFlags& f) {
  int status = 0;
  for (const std::string& prompt : read_prompts(f.prompt_file)) {
    try {
      const GenerateResult r = engine.generate(prompt, options_from(f));
      if (f.json) {
        std::puts(completion_json(prompt, &r, "").dump(-1, ' ', false,
                                                       nlohmann::json::error_handler_t::replace).c_str());
      } else {
        std::printf("%s%s\n", f.echo ? prompt.c_str() : "", r.text.c_str());
      }
      log_stats(r);
    } catch (const Error& e) {
      status = 1;
      if (!f.json) throw;
      std::puts(completion_json(prompt, nullptr, e.what()).dump().c_str());
    }
  }
  return status;
}

}  // namespace

std::function<int()> register_run(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  app.add_option("-m,--model", f->model, "GGUF model file");
  auto* p = app.add_option("-p,--prompt", f->prompt, "prompt text");
  app.add_option("-f,--file", f->prompt_file, "file with one prompt per line")->excludes(p);
  app.add_option("-n,--n-predict", f->n_predict, "tokens to generate (-1: until the context is full)");
  app.add_option("--temp", f->temperature, "temperature (0: greedy)")->check(CLI::NonNegativeNumber);
  app.add_option("-s,--seed", f->seed, "random seed (-1: random)");
  app.add_option("-t,--threads", f->threads, "threads (default: number of cores)")->check(CLI::NonNegativeNumber);
  app.add_option("-c,--config", f->config, "TOML configuration file");
  app.add_flag("--ignore-eos", f->ignore_eos, "do not stop at end-of-generation tokens");
  app.add_flag("--echo", f->echo, "print the prompt before the continuation");
  app.add_flag("--json", f->json, "with -f: one JSON object per completion");
  app.add_flag("-v,--verbose", f->verbose, "debug logging");
  return [f]() -> int {
    try {
      const Config config = load_config(*f);
      spdlog::set_level(spdlog::level::from_str(config.log.level));
      if (f->prompt_file.empty() && f->prompt.empty()) throw Error("give a prompt with -p or -f");
      auto engine = Engine::create(config);
      return f->prompt_file.empty() ? run_single(*engine, *f) : run_file(*engine, *f);
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      return 1;
    }
  };
}

}  // namespace tsr::app
