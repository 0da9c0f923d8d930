#include "core/engine/engine.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <random>

#include "core/error.h"
#include "core/kv/kv_cache.h"
#include "core/model/gguf.h"
#include "core/model/llama_forward.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"
#include "samplers/sampling.h"

namespace tsr {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Logs load progress in 10 % steps for files large enough to take a while.
LoadProgress progress_logger(const std::string& what) {
  return [what, last = -1](uint64_t done, uint64_t total) mutable {
    if (total < (64ull << 20)) return;
    const int pct = static_cast<int>(done * 100 / total);
    if (pct / 10 != last / 10 || done == total) {
      spdlog::info("loading {}: {:3d}% ({} / {} MiB)", what, pct, done >> 20, total >> 20);
      last = pct;
    }
  };
}

// Features whose plugins arrive later are looked up like any plugin, so that a config
// asking for one is refused with the plugin and the directories searched, never ignored.
void require_optional_plugins(const Config& c, const std::vector<std::filesystem::path>& dirs) {
  if (c.quant.scheme != "auto") Plugin::find(TSR_PLUGIN_QUANT, c.quant.scheme, dirs);
  if (c.speculative.method != "none") {
    const std::string name = c.speculative.method == "draft_model" ? "model" : c.speculative.method;
    Plugin::find(TSR_PLUGIN_DRAFT, name, dirs);
  }
  for (const std::string& p : c.constraints.plugins) Plugin::find(TSR_PLUGIN_CONSTRAINT, p, dirs);
}

}  // namespace

struct Engine::Impl {
  Config config;
  std::unique_ptr<Backend> backend;
  std::shared_ptr<const GgufFile> gguf;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<LlamaForward> forward;
  int32_t n_ctx = 0;

  void load();
  StepBatch step_batch(std::span<const int32_t> tokens, int32_t first_pos) const;
};

void Engine::Impl::load() {
  if (config.model.path.empty()) {
    throw Error("no model given: set [model] path in the config or pass -m MODEL");
  }
  const auto dirs = plugin_search_dirs(config.plugin_dir);
  auto plugin = Plugin::find(TSR_PLUGIN_BACKEND, config.backend.plugin, dirs);
  require_optional_plugins(config, dirs);
  backend = Backend::create(plugin, config.backend.device, config.backend.threads);

  gguf = GgufFile::open(config.model.path);
  model = LlamaModel::load(gguf, *backend, progress_logger(config.model.path));
  tokenizer = Tokenizer::create(vocab_from_gguf(*gguf));
  if (tokenizer->n_tokens() != model->hparams().n_vocab) {
    throw Error(config.model.path + ": the vocabulary has " +
                std::to_string(tokenizer->n_tokens()) + " tokens, the embedding " +
                std::to_string(model->hparams().n_vocab));
  }
  const LlamaHParams& hp = model->hparams();
  KvCacheShape shape{hp.n_layer, hp.n_head_kv, hp.head_dim, config.cache.block_size, 0};
  shape.num_blocks = kv_cache_num_blocks(shape, config.cache.memory_bytes, hp.n_ctx_train,
                                         config.scheduler.max_seqs);
  cache = std::make_unique<KvCache>(*backend, shape);
  forward = std::make_unique<LlamaForward>(*model, *backend, *cache);
  n_ctx = hp.n_ctx_train;
}

// One sequence occupying blocks 0, 1, 2, ...: slot = position.
StepBatch Engine::Impl::step_batch(std::span<const int32_t> tokens, int32_t first_pos) const {
  StepBatch b;
  const int32_t n = static_cast<int32_t>(tokens.size());
  const int32_t block_size = cache->shape().block_size;
  b.tokens.assign(tokens.begin(), tokens.end());
  for (int32_t i = 0; i < n; ++i) {
    b.positions.push_back(first_pos + i);
    b.slot_mapping.push_back(first_pos + i);
  }
  b.query_start_loc = {0, n};
  b.seq_lens = {first_pos + n};
  b.max_blocks = (first_pos + n + block_size - 1) / block_size;
  for (int32_t blk = 0; blk < b.max_blocks; ++blk) b.block_tables.push_back(blk);
  b.logit_rows = {n - 1};
  return b;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::create(const Config& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->load();
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const Config& Engine::config() const { return impl_->config; }
const Tokenizer& Engine::tokenizer() const { return *impl_->tokenizer; }
const LlamaHParams& Engine::hparams() const { return impl_->model->hparams(); }
int32_t Engine::context_length() const { return impl_->n_ctx; }

GenerateResult Engine::generate(std::string_view prompt, const GenerateOptions& options) {
  const std::vector<int32_t> ids = impl_->tokenizer->encode(prompt, true, false);
  return generate(ids, options);
}

GenerateResult Engine::generate(std::span<const int32_t> prompt, const GenerateOptions& opt) {
  Impl& m = *impl_;
  if (prompt.empty()) throw Error("the prompt is empty");
  if (static_cast<int32_t>(prompt.size()) > m.n_ctx) {
    throw Error("the prompt has " + std::to_string(prompt.size()) +
                " tokens; the context holds " + std::to_string(m.n_ctx));
  }
  if (opt.max_tokens < 0) throw Error("max_tokens must be >= 0");
  if (opt.temperature < 0) throw Error("temperature must be >= 0");
  const uint64_t seed = opt.seed ? *opt.seed : std::random_device{}();
  if (!opt.seed && opt.temperature > 0) spdlog::info("sampling seed: {}", seed);
  std::mt19937_64 rng(seed);

  GenerateResult r;
  r.prompt_tokens = static_cast<int32_t>(prompt.size());
  std::vector<int32_t> pending(prompt.begin(), prompt.end());
  int32_t pos = 0;
  std::vector<float> logits;
  const auto t0 = Clock::now();
  const int32_t chunk = std::max(1, m.config.scheduler.max_batch_tokens);
  while (static_cast<int32_t>(r.tokens.size()) < opt.max_tokens) {
    // Prompts longer than the token budget are processed in chunks.
    for (size_t done = 0; done < pending.size(); done += chunk) {
      const size_t n = std::min(pending.size() - done, size_t(chunk));
      m.forward->run(m.step_batch(std::span(pending).subspan(done, n), pos), logits);
      pos += static_cast<int32_t>(n);
    }
    if (opt.on_logits) opt.on_logits(logits);
    const int32_t token = opt.temperature == 0 ? sample_greedy(logits)
                                               : sample_temperature(logits, opt.temperature, rng);
    if (r.tokens.empty()) r.prompt_ms = ms_since(t0);
    r.tokens.push_back(token);
    if (!opt.ignore_eos && m.tokenizer->is_eog(token)) {
      r.finish_reason = TSR_FINISH_STOP;
      break;
    }
    const std::string piece = m.tokenizer->token_to_piece(token);
    r.text += piece;
    if (opt.on_token && !opt.on_token(token, piece)) {
      r.finish_reason = TSR_FINISH_ABORT;
      break;
    }
    if (pos >= m.n_ctx) break;  // the next token would not fit
    pending.assign(1, token);
  }
  if (r.finish_reason == TSR_FINISH_NONE) r.finish_reason = TSR_FINISH_LENGTH;
  r.decode_ms = r.tokens.empty() ? 0 : ms_since(t0) - r.prompt_ms;
  return r;
}

}  // namespace tsr
