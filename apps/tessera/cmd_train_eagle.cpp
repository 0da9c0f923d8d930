// `tessera train-eagle -m TARGET -o HEAD`: trains an EAGLE-3 head for a small target on
// the CPU and writes it as an eagle3 GGUF (what `[speculative] method = "eagle"` and
// llama.cpp's eagle3 loader read). The target writes its own training texts (sampled from
// BOS, or from --prompts); the head learns its distribution of each next token from the
// states of --layers, over --ttt-steps steps of the training-time test. Progress shows the
// loss and each step's top-1 agreement with the target; --checkpoint-every writes the head
// as training goes.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "apps/tessera/app_config.h"
#include "apps/tessera/commands.h"
#include "apps/tessera/progress_bar.h"
#include "apps/tessera/text_file.h"
#include "base/error.h"
#include "core/eagle/eagle3_data.h"
#include "core/eagle/eagle3_head.h"
#include "core/eagle/eagle3_trainer.h"
#include "core/model/llama_model.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/tokenizer/tokenizer.h"

namespace tsr::app {

namespace {

struct TrainEagleFlags {
  EngineFlags engine;
  std::string output, layers, prompts_file;
  // The defaults trained stories260K's head of the README (2.69 tokens per verifying pass).
  int32_t texts = 512, text_tokens = 256, epochs = 10, batch = 4, ttt_steps = 4, n_ff = 0, checkpoint_every = 0;
  float lr = 5e-3f, temperature = 0.7f;
  uint64_t seed = 1;
};

std::vector<int32_t> parse_layers(const std::string& text) {
  std::vector<int32_t> layers;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    try {
      layers.push_back(std::stoi(item));
    } catch (const std::exception&) {
      throw Error("--layers: '" + item + "' is not a layer number");
    }
  }
  return layers;
}

// Linear warm-up over the first 5% of updates, then a cosine down to a tenth.
float learning_rate(float peak, int64_t update, int64_t total) {
  const int64_t warmup = std::max<int64_t>(1, total / 20);
  if (update < warmup) return peak * float(update + 1) / float(warmup);
  const double progress = double(update - warmup) / double(std::max<int64_t>(1, total - warmup));
  return peak * float(0.1 + 0.45 * (1 + std::cos(M_PI * progress)));
}

int run_train_eagle(const TrainEagleFlags& f) {
  Config c = load_app_config(f.engine);
  if (c.model.path.empty()) throw Error("no target: pass -m MODEL");
  if (f.output.empty()) throw Error("no output: pass -o HEAD.gguf");
  if (f.texts < 1 || f.epochs < 1 || f.batch < 1 || f.ttt_steps < 1 || f.lr <= 0) {
    throw Error("--texts, --epochs, --batch and --ttt-steps must be at least 1, --lr positive");
  }
  const auto dirs = plugin_search_dirs(c.plugin_dir);
  auto backend = Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, "cpu", dirs), 0, c.backend.threads);
  std::shared_ptr<const GgufFile> gguf = GgufFile::open(c.model.path);
  auto target = LlamaModel::load(gguf, *backend);
  const LlamaHParams& hp = target->hparams();
  const std::vector<int32_t> layers = f.layers.empty() ? eagle3_default_layers(hp.n_layer) : parse_layers(f.layers);
  auto tokenizer = Tokenizer::create(vocab_from_gguf(*gguf));
  std::vector<std::vector<int32_t>> prompts = {{tokenizer->vocab().bos_id}};
  if (!f.prompts_file.empty()) {
    prompts.clear();
    std::stringstream lines(read_text_file(f.prompts_file, "--prompts"));
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) prompts.push_back(tokenizer->encode(line, true, false));
    }
  }
  spdlog::info("train-eagle: {} texts of {} tokens from the target, features of layers {}", f.texts, f.text_tokens,
               fmt::join(layers, ", "));
  ProgressBar texts_bar(uint64_t(f.texts), "texts");
  const Eagle3DataOptions data{f.texts, f.text_tokens, f.temperature, f.seed};
  const std::vector<Eagle3Sequence> texts =
      eagle3_generate_texts(*target, *backend, layers, prompts, data, [&](int32_t done) { texts_bar.update(uint64_t(done)); });

  Eagle3Weights head = eagle3_initial_head(*gguf, hp, layers, f.n_ff, f.seed);
  const std::vector<float> embeddings = eagle3_target_tensor(*gguf, "token_embd.weight");
  Eagle3TrainOptions options;
  options.ttt_steps = f.ttt_steps;
  Eagle3Trainer trainer(head, embeddings, options);
  const int64_t updates = int64_t(f.epochs) * ((f.texts + f.batch - 1) / f.batch);
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(f.seed);
  ProgressBar bar(uint64_t(updates), "train");
  double loss = 0;
  std::vector<double> agreement(size_t(f.ttt_steps), 0.0);
  int64_t update = 0;
  for (int32_t epoch = 0; epoch < f.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t first = 0; first < order.size(); first += size_t(f.batch)) {
      const size_t last = std::min(order.size(), first + size_t(f.batch));
      for (size_t i = first; i < last; ++i) {
        const Eagle3StepStats s = trainer.accumulate(texts[order[i]]);
        loss = 0.98 * loss + 0.02 * s.loss;  // moving averages over texts
        for (size_t k = 0; k < agreement.size(); ++k) agreement[k] = 0.98 * agreement[k] + 0.02 * s.agreement[k];
      }
      trainer.step(learning_rate(f.lr, update, updates), int32_t(last - first));
      ++update;
      const double seen = 1.0 - std::pow(0.98, double(update * f.batch));  // debiases the averages
      std::vector<double> shown;
      for (const double a : agreement) shown.push_back(a / seen);
      bar.update(uint64_t(update), fmt::format("loss {:.3f}, top-1 by step {:.2f}", loss / seen, fmt::join(shown, " ")));
      if (f.checkpoint_every > 0 && update % f.checkpoint_every == 0) eagle3_write(head, f.output);
    }
    spdlog::info("epoch {}: loss {:.4f}; top-1 agreement with the target by step: {:.3f}", epoch + 1,
                 loss / (1.0 - std::pow(0.98, double(update * f.batch))),
                 fmt::join(agreement, ", "));
  }
  eagle3_write(head, f.output);
  spdlog::info("train-eagle: wrote {}", f.output);
  return 0;
}

}  // namespace

std::function<int()> register_train_eagle(CLI::App& app) {
  auto f = std::make_shared<TrainEagleFlags>();
  add_engine_flags(app, f->engine);
  app.add_option("-o,--output", f->output, "the head to write (an eagle3 GGUF)")->required();
  app.add_option("--layers", f->layers, "target layers of the features, e.g. 1,3,5 (default: 2, n/2, n-3)");
  app.add_option("--texts", f->texts, "texts the target writes to train on")->capture_default_str();
  app.add_option("--text-tokens", f->text_tokens, "tokens per text")->capture_default_str();
  app.add_option("--prompts", f->prompts_file, "a file of prompts, one per line, opening the texts (default: BOS)");
  app.add_option("--text-temp", f->temperature, "sampling temperature of the texts")->capture_default_str();
  app.add_option("--epochs", f->epochs, "passes over the texts")->capture_default_str();
  app.add_option("--batch", f->batch, "texts per update")->capture_default_str();
  app.add_option("--lr", f->lr, "peak learning rate (AdamW; warm-up, cosine decay)")->capture_default_str();
  app.add_option("--ttt-steps", f->ttt_steps, "steps of the training-time test")->capture_default_str();
  app.add_option("--n-ff", f->n_ff, "the head's feed-forward width (default: the target's)");
  app.add_option("--checkpoint-every", f->checkpoint_every, "write the head every N updates");
  app.add_option("--seed", f->seed, "seed of the texts, the initialization and the order")->capture_default_str();
  return [f] { return run_train_eagle(*f); };
}

}  // namespace tsr::app
