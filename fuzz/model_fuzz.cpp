// Whole model files through the engine: a GGUF that parses is loaded on the CPU backend
// (tensor names, shapes and types against the hyperparameters, weight packing, and one of
// the quant schemes at load, chosen by the input's size) and, when it loads, generates a
// few greedy tokens. Any file must load and run or fail with
// tsr::Error; a corrupt weight value may change the text but never crash.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

#include "core/config/config.h"
#include "core/engine/engine.h"
#include "base/error.h"

namespace {

// The input as a file (the engine maps model files), in memory-backed /dev/shm when present.
std::string write_temp(const uint8_t* data, size_t size) {
  static const std::string path = std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                                  "/tessera_model_fuzz_" + std::to_string(getpid()) + ".gguf";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return "";
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = write_temp(data, size);
  if (path.empty()) return 0;
  tsr::Config config;
  config.model.path = path;
  config.plugin_dir = TESSERA_PLUGIN_DIR;
  config.backend.threads = 1;
  config.cache.memory_bytes = 8ull << 20;
  static const char* const kSchemes[] = {"auto", "q8_0", "q4_0", "int4_g128", "fp8_e4m3"};
  config.quant.scheme = kSchemes[size % std::size(kSchemes)];
  spdlog::set_level(spdlog::level::off);  // the engine logs each load
  try {
    auto engine = tsr::Engine::create(config);
    tsr::RequestParams p = engine->request_defaults();
    p.prompt = engine->tokenize("Once upon");
    p.max_tokens = 4;
    p.sampling.temperature = 0;
    engine->generate(std::move(p));
  } catch (const tsr::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}
