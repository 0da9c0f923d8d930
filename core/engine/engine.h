// The engine behind engine.h: configuration, backend, model, tokenizer and KV cache wired
// together, with generation for one request at a time. Externally synchronized.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/model/llama_model.h"
#include "core/tokenizer/tokenizer.h"
#include "tessera/engine.h"

namespace tsr {

struct GenerateOptions {
  int32_t max_tokens = 128;
  float temperature = 0.8f;       // 0 = greedy
  std::optional<uint64_t> seed;   // absent: random (logged)
  bool ignore_eos = false;
  // Called per generated token with its piece; return false to stop (finish: abort).
  std::function<bool(int32_t token, std::string_view piece)> on_token;
  // Called with the logits row each generated token was chosen from.
  std::function<void(std::span<const float> logits)> on_logits;
};

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string text;
  int32_t prompt_tokens = 0;
  tsr_finish_reason finish_reason = TSR_FINISH_NONE;
  double prompt_ms = 0;
  double decode_ms = 0;
};

class Engine {
 public:
  // Loads everything `config` names. Throws tsr::Error naming what failed.
  static std::unique_ptr<Engine> create(const Config& config);
  ~Engine();

  const Config& config() const;
  const Tokenizer& tokenizer() const;
  const LlamaHParams& hparams() const;
  int32_t context_length() const;

  GenerateResult generate(std::span<const int32_t> prompt, const GenerateOptions& options);
  GenerateResult generate(std::string_view prompt, const GenerateOptions& options);

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tsr
