#include "apps/tessera/app_config.h"

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "core/model/gguf.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"
#include "tessera/sdk/cpu_topology.hpp"

namespace tsr::app {

namespace {

// GPU backends in the order -ngl tries them.
constexpr const char* kGpuBackends[] = {"cuda", "hip"};

int64_t model_layers(const std::string& path) {
  if (path.empty()) throw Error("-ngl needs the model: pass -m MODEL or set [model] path");
  const auto gguf = GgufFile::open(path);
  const std::optional<std::string> arch = gguf->get_string("general.architecture");
  const std::optional<int64_t> layers = arch ? gguf->get_int(*arch + ".block_count") : std::nullopt;
  if (!layers) throw Error(path + ": no general.architecture / <arch>.block_count to count layers for -ngl");
  return *layers;
}

// The first GPU backend whose plugin loads and sees a device, or an error naming why each
// did not.
std::string gpu_backend(const Config& c, int32_t ngl) {
  std::string why;
  for (const char* name : kGpuBackends) {
    try {
      const auto plugin = Plugin::find(TSR_PLUGIN_BACKEND, name, plugin_search_dirs(c.plugin_dir));
      if (Backend::device_count(*plugin) > c.backend.device) return name;
      why += std::string("; ") + name + ": no device " + std::to_string(c.backend.device);
    } catch (const Error& e) {
      why += std::string("; ") + name + ": " + e.what();
    }
  }
  throw Error("-ngl " + std::to_string(ngl) + " asks for a GPU, and no GPU backend loads" + why +
              ". -ngl 0 runs on the CPU");
}

// llama.cpp's -ngl, with one backend per engine: 0 layers is the CPU backend, all of them
// (or more, as the customary -ngl 99; -1 too) the GPU backend that loads; a split is refused.
void apply_gpu_layers(Config& c, int32_t ngl) {
  if (ngl == 0) {
    c.backend.plugin = "cpu";
    return;
  }
  const int64_t layers = model_layers(c.model.path);
  if (ngl > 0 && ngl < layers) {
    throw Error("-ngl " + std::to_string(ngl) + ": the model has " + std::to_string(layers) +
                " layers, and splitting them between the CPU and a GPU is not supported (one backend per "
                "engine): use -ngl 0 for the CPU or -ngl " + std::to_string(layers) + " (or 99) for the GPU");
  }
  c.backend.plugin = gpu_backend(c, ngl);
  spdlog::info("-ngl {}: all {} layers on the '{}' backend", ngl, layers, c.backend.plugin);
}

}  // namespace

void add_engine_flags(CLI::App& app, EngineFlags& f, EngineFlagSet set) {
  app.add_option("--config", f.config, "TOML configuration file (every key: configs/README.md)");
  app.add_option("-m,--model", f.model, "GGUF model file (overrides [model] path)");
  app.add_option("-t,--threads", f.threads, "threads (default: physical cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--n-gpu-layers,--gpu-layers", f.n_gpu_layers,
                 "layers on the GPU (-ngl): 0 the CPU backend, all (e.g. 99) the GPU backend that loads");
  app.add_option("--hf-repo", f.hf_repo, "(-hf; refused: models are not downloaded, pass -m FILE)");
  app.add_flag("-v,--verbose", f.verbose, "debug logging");
  app.add_option("--cache-type-k", f.cache_type_k, "KV cache dtype of K (-ctk): f32, f16, bf16, q8_0, q4_0, fp8_e4m3 (default f16)");
  app.add_option("--cache-type-v", f.cache_type_v, "KV cache dtype of V (-ctv): f32, f16, bf16, q8_0, q4_0, fp8_e4m3 (default f16)");
  if (set.ctx_size) {
    app.add_option("-c,--ctx-size", f.ctx_size, "context in tokens (0: the model's, as [cache] memory allows)")
        ->check(CLI::NonNegativeNumber);
  }
  if (set.chat_template) {
    app.add_option("--chat-template", f.chat_template,
                   "chat template: chatml, llama2, llama3, gemma, phi3, or a Jinja file (default: the model's)");
  }
}

Config load_app_config(const EngineFlags& f) {
  if (!f.hf_repo.empty()) throw Error("models are not downloaded (-hf " + f.hf_repo + "): pass -m FILE");
  Config c = f.config.empty() ? Config{} : config_parse_file(f.config);
  if (!f.model.empty()) c.model.path = f.model;
  if (f.threads > 0) {
    config_parse_string("[backend]\nthreads = " + std::to_string(f.threads) + "\n", "-t");  // the key's range
    c.backend.threads = f.threads;
  }
  if (c.backend.threads == 0) c.backend.threads = tsr::sdk::cpu_physical_cores();
  if (f.ctx_size) c.model.context = *f.ctx_size;
  // Checked as the config keys are (the same names and message).
  if (!f.cache_type_k.empty()) c.cache.dtype_k = config_parse_string("[cache]\ndtype_k = \"" + f.cache_type_k + "\"\n", "-ctk").cache.dtype_k;
  if (!f.cache_type_v.empty()) c.cache.dtype_v = config_parse_string("[cache]\ndtype_v = \"" + f.cache_type_v + "\"\n", "-ctv").cache.dtype_v;
  if (!f.chat_template.empty()) c.model.chat_template = f.chat_template;
  if (f.verbose) c.log.level = "debug";
  spdlog::set_level(spdlog::level::from_str(c.log.level));
  if (f.n_gpu_layers) apply_gpu_layers(c, *f.n_gpu_layers);
  return c;
}

}  // namespace tsr::app
