// The configuration a subcommand runs with, built the same way by run, serve, bench and
// perplexity: the --config file (or the defaults), then the llama.cpp-style flags on top.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "core/config/config.h"

namespace tsr::app {

struct EngineFlags {
  std::string config, model, chat_template, hf_repo;
  int32_t threads = 0;
  std::optional<int32_t> ctx_size;      // -c: [model] context
  std::optional<int32_t> n_gpu_layers;  // -ngl: 0 the CPU, all layers a GPU backend
  std::string cache_type_k, cache_type_v;  // -ctk / -ctv: [cache] dtype_k / dtype_v
  bool verbose = false;
};

// What a subcommand takes beyond --config, -m, -t, -ngl, -hf and -v.
struct EngineFlagSet {
  bool ctx_size = true;       // -c, --ctx-size N
  bool chat_template = false; // --chat-template NAME|FILE
};

void add_engine_flags(CLI::App& app, EngineFlags& f, EngineFlagSet set = {});

// Threads left at 0 become the physical cores; [log] level is applied (-v: debug); -ngl
// chooses the backend (reading the model's layer count). Throws tsr::Error for an
// unreadable or invalid config file, -hf, and an -ngl that no backend can honour.
Config load_app_config(const EngineFlags& f);

}  // namespace tsr::app
