// `tessera perplexity -m MODEL -f TEXT`: perplexity over a text as llama.cpp computes it
// (chunks of --ctx tokens, each opening with BOS; the second half of every chunk is scored,
// with the first half as context), and with --kl-base REF the KL divergence of the model's
// next-token distributions from a reference model's (e.g. the F32 original of a quantized
// model, or the same file without `--quant`), their top-1 agreement and both perplexities.
// The model's KV cache is the config's ([cache] dtype, -ctk / -ctv); the reference's is
// always F32, so that `--kl-base` on the same file measures what a KV dtype costs.
// With [cache] eviction = "streaming" each chunk runs through the model's streaming window
// (one position a step once the window is full; the reference keeps the full chunk), which
// measures what eviction costs against the same text at full context.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cmath>
#include <optional>

#include "apps/tessera/app_config.h"
#include "apps/tessera/commands.h"
#include "apps/tessera/text_file.h"
#include "core/config/config.h"
#include "base/error.h"
#include "core/model/llama_model.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/engine/quant_setup.h"
#include "core/runner/model_runner.h"
#include "core/tokenizer/tokenizer.h"

namespace tsr::app {

namespace {

struct PerplexityFlags {
  EngineFlags engine;
  std::string kl_base, text_file, quant;
  int32_t ctx = 0, chunks = 0;
  bool json = false;
};

// One model on the CPU backend with a one-sequence KV cache: full-chunk logits.
class LogitsRunner {
 public:
  // `quant`: the [quant] scheme to apply with its options; empty: the file as it is.
  // `exact_kv`: an F32 cache whatever the config says (the reference).
  LogitsRunner(const Config& c, const std::string& path, const std::string& quant, bool exact_kv) {
    const auto dirs = plugin_search_dirs(c.plugin_dir);
    backend_ = Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, c.backend.plugin, dirs), c.backend.device,
                               c.backend.threads);
    gguf_ = GgufFile::open(path);
    model_ = LlamaModel::load(gguf_, *backend_, {}, quant.empty() ? nullptr : quant_scheme_load(quant, c.quant, dirs));
    tokenizer_ = Tokenizer::create(vocab_from_gguf(*gguf_));
    if (!exact_kv) {
      kv_ = ModelRunner::cache_shape(*model_, c.cache).format;
      kv_format_check(*backend_, kv_);
      if (c.cache.eviction == "streaming") streaming_ = StreamingWindow{c.cache.sink_tokens, c.cache.window};
    }
  }

  // A KV cache for one sequence of up to `ctx` tokens, whose blocks it keeps: every chunk
  // is a fresh sequence from position 0 and overwrites the last one's KV.
  void reserve(int32_t ctx) {
    ModelRunnerOptions o;
    if (streaming_) {
      o.streaming = {streaming_->sink_tokens, streaming_->window > 0 ? streaming_->window : ctx - streaming_->sink_tokens};
      if (o.streaming.window < 1 || o.streaming.capacity() > ctx) {
        throw Error(fmt::format("[cache] sink_tokens ({}) + window ({}) must be within -c {}", o.streaming.sink_tokens,
                                o.streaming.window, ctx));
      }
      spdlog::info("streaming window: {} sinks + {} tokens of each {}-token chunk", o.streaming.sink_tokens,
                   o.streaming.window, ctx);
    }
    o.num_blocks = (o.streaming.cached(ctx) + o.block_size - 1) / o.block_size;
    o.kv = kv_;
    runner_.reset();
    runner_ = std::make_unique<ModelRunner>(*model_, *backend_, o);
    if (!runner_->kv().allocate(kSeq, ctx, 0)) throw Error("perplexity: no KV blocks for a context of " + std::to_string(ctx));
  }

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  int32_t n_vocab() const { return model_->hparams().n_vocab; }
  int32_t n_ctx_train() const { return model_->hparams().n_ctx_train; }

  // Logits after each of `tokens`, from position 0 (a fresh sequence): in one pass, or
  // through a streaming window, as much as it holds in one pass and then a token a step.
  std::vector<float> run(const std::vector<int32_t>& tokens) {
    const StreamingWindow& w = runner_->kv().window();
    const auto n = static_cast<int32_t>(tokens.size());
    const int32_t first = w.cached(n);
    std::vector<float> logits, row;
    runner_->run_sequence(kSeq, 0, std::span(tokens).first(first), true, logits);
    for (int32_t pos = first; pos < n; ++pos) {
      runner_->run_sequence(kSeq, pos, std::span(tokens).subspan(pos, 1), false, row, tokens);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    return logits;
  }

 private:
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<const GgufFile> gguf_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ModelRunner> runner_;
  KvFormat kv_;
  std::optional<StreamingWindow> streaming_;  // the config's, its window 0 still to resolve for the chunk size
  static constexpr SeqId kSeq = 1;
};

std::vector<double> log_softmax(const float* logits, int32_t n) {
  double max = logits[0];
  for (int32_t i = 1; i < n; ++i) max = std::max(max, double(logits[i]));
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - max);
  const double lse = max + std::log(sum);
  std::vector<double> out(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) out[i] = double(logits[i]) - lse;
  return out;
}

struct Totals {
  double nll = 0, nll_base = 0, kl = 0, kl_max = 0;
  int64_t tokens = 0, top1_agree = 0;
};

// Scores one chunk: the second half's next-token log-likelihoods, and against the base
// model KL(base || model) per position.
void score(const std::vector<int32_t>& chunk, const std::vector<float>& logits, const std::vector<float>* base,
           int32_t n_vocab, Totals& t) {
  const auto n = static_cast<int32_t>(chunk.size());
  for (int32_t i = n / 2; i + 1 < n; ++i) {
    const float* row = logits.data() + size_t(i) * n_vocab;
    const std::vector<double> lp = log_softmax(row, n_vocab);
    t.nll -= lp[chunk[i + 1]];
    ++t.tokens;
    if (!base) continue;
    const float* brow = base->data() + size_t(i) * n_vocab;
    const std::vector<double> lq = log_softmax(brow, n_vocab);
    t.nll_base -= lq[chunk[i + 1]];
    double kl = 0;
    for (int32_t v = 0; v < n_vocab; ++v) kl += std::exp(lq[v]) * (lq[v] - lp[v]);
    t.kl += kl;
    t.kl_max = std::max(t.kl_max, kl);
    t.top1_agree += std::max_element(row, row + n_vocab) - row == std::max_element(brow, brow + n_vocab) - brow;
  }
}

int run_perplexity(const PerplexityFlags& f) {
  Config c = load_app_config(f.engine);
  if (c.model.path.empty()) throw Error("no model: pass -m MODEL");
  const std::string quant = f.quant.empty() ? c.quant.scheme : f.quant;
  LogitsRunner model(c, c.model.path, quant, false);
  const int32_t ctx = f.ctx > 0 ? f.ctx : std::min(512, model.n_ctx_train());
  if (ctx < 4 || ctx > model.n_ctx_train()) {
    throw Error(fmt::format("-c {} must be between 4 and the model's context {}", ctx, model.n_ctx_train()));
  }
  model.reserve(ctx);
  std::unique_ptr<LogitsRunner> base;
  if (!f.kl_base.empty()) {
    base = std::make_unique<LogitsRunner>(c, f.kl_base, "", true);
    if (base->n_vocab() != model.n_vocab()) throw Error("--kl-base: the vocabularies differ");
    base->reserve(ctx);
  }
  const std::vector<int32_t> all = model.tokenizer().encode(read_text_file(f.text_file, "-f"), false, false);
  int64_t n_chunks = static_cast<int64_t>(all.size()) / (ctx - 1);
  if (f.chunks > 0) n_chunks = std::min<int64_t>(n_chunks, f.chunks);
  if (n_chunks == 0) throw Error(fmt::format("{} has {} tokens; one chunk needs {}", f.text_file, all.size(), ctx - 1));
  const int32_t bos = model.tokenizer().vocab().bos_id;
  Totals t;
  for (int64_t c0 = 0; c0 < n_chunks; ++c0) {
    std::vector<int32_t> chunk{bos};
    chunk.insert(chunk.end(), all.begin() + c0 * (ctx - 1), all.begin() + (c0 + 1) * (ctx - 1));
    const std::vector<float> logits = model.run(chunk);
    std::vector<float> base_logits;
    if (base) base_logits = base->run(chunk);
    score(chunk, logits, base ? &base_logits : nullptr, model.n_vocab(), t);
    spdlog::info("chunk {}/{}: perplexity so far {:.4f}", c0 + 1, n_chunks, std::exp(t.nll / double(t.tokens)));
  }
  nlohmann::json out{{"model", c.model.path}, {"quant", quant}, {"ctx", ctx}, {"chunks", n_chunks},
                     {"cache_type_k", c.cache.k_dtype()}, {"cache_type_v", c.cache.v_dtype()},
                     {"eviction", c.cache.eviction},
                     {"tokens", t.tokens}, {"ppl", std::exp(t.nll / double(t.tokens))}};
  std::printf("perplexity: %.4f over %lld tokens (%lld chunks of %d)\n", out["ppl"].get<double>(),
              (long long)t.tokens, (long long)n_chunks, ctx);
  if (base) {
    out["base"] = f.kl_base;
    out["ppl_base"] = std::exp(t.nll_base / double(t.tokens));
    out["kl_mean"] = t.kl / double(t.tokens);
    out["kl_max"] = t.kl_max;
    out["top1_agree"] = double(t.top1_agree) / double(t.tokens);
    std::printf("base perplexity: %.4f; KL(base || model) mean %.6f, max %.6f; top-1 agreement %.2f%%\n",
                out["ppl_base"].get<double>(), out["kl_mean"].get<double>(), t.kl_max,
                100 * out["top1_agree"].get<double>());
  }
  if (f.json) std::puts(out.dump().c_str());
  return 0;
}

}  // namespace

std::function<int()> register_perplexity(CLI::App& app) {
  auto f = std::make_shared<PerplexityFlags>();
  add_engine_flags(app, f->engine, {.ctx_size = false});
  app.add_option("-f,--file", f->text_file, "text to score")->required();
  app.add_option("--quant", f->quant, "quantize the model at load: q8_0, q4_0, int4_g128, fp8_e4m3");
  app.add_option("--kl-base", f->kl_base, "reference model: report KL(reference || model) and top-1 agreement");
  // llama-perplexity's -c is the chunk size too.
  app.add_option("-c,--ctx-size,--ctx", f->ctx, "tokens per chunk (default: min(512, the model's context))");
  app.add_option("--chunks", f->chunks, "score at most this many chunks");
  app.add_flag("--json", f->json, "print one JSON object as the last line");
  return [f]() -> int {
    try {
      return run_perplexity(*f);
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      return 1;
    }
  };
}

}  // namespace tsr::app
