#include "core/eagle/eagle3_data.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "base/error.h"
#include "core/runner/model_runner.h"

namespace tsr {

namespace {

// The softmax of a row of logits at temperature 1: the target's own distribution.
void append_softmax(const float* logits, int32_t n, std::vector<float>& out) {
  const float best = *std::max_element(logits, logits + n);
  double total = 0;
  for (int32_t i = 0; i < n; ++i) total += std::exp(double(logits[i] - best));
  for (int32_t i = 0; i < n; ++i) out.push_back(float(std::exp(double(logits[i] - best)) / total));
}

int32_t sample(const float* logits, int32_t n, float temperature, std::mt19937_64& rng) {
  if (temperature <= 0) return int32_t(std::max_element(logits, logits + n) - logits);
  const float best = *std::max_element(logits, logits + n);
  std::vector<double> weights(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) weights[size_t(i)] = std::exp(double(logits[i] - best) / temperature);
  return std::discrete_distribution<int32_t>(weights.begin(), weights.end())(rng);
}

// The captured states of the step's rows appended per position: [layer 0 | layer 1 | ...].
void append_features(const tsr_tensor& t, std::vector<float>& out) {
  const auto* base = static_cast<const uint8_t*>(t.data);
  for (int64_t r = 0; r < t.shape[1]; ++r) {
    for (int64_t l = 0; l < t.shape[0]; ++l) {
      const auto* row = reinterpret_cast<const float*>(base + l * t.strides[0] + r * t.strides[1]);
      out.insert(out.end(), row, row + t.shape[2]);
    }
  }
}

}  // namespace

std::vector<int32_t> eagle3_default_layers(int32_t n_layer) {
  if (n_layer >= 6) return {2, n_layer / 2, n_layer - 3};
  return {1, (n_layer + 1) / 2, n_layer};
}

std::vector<Eagle3Sequence> eagle3_generate_texts(const LlamaModel& target, Backend& backend,
                                                  const std::vector<int32_t>& layers,
                                                  const std::vector<std::vector<int32_t>>& prompts,
                                                  const Eagle3DataOptions& o,
                                                  const std::function<void(int32_t)>& progress) {
  const LlamaHParams& hp = target.hparams();
  if (prompts.empty() || std::ranges::any_of(prompts, [](const auto& p) { return p.empty(); })) {
    throw Error("train-eagle: every text needs a prompt of at least one token");
  }
  if (o.tokens < 8 || o.tokens > hp.n_ctx_train) {
    throw Error("train-eagle: texts of " + std::to_string(o.tokens) + " tokens (8 to the context, " +
                std::to_string(hp.n_ctx_train) + ")");
  }
  if (backend.props().host_visible == 0) throw Error("train-eagle reads the target's states on the host: use the CPU backend");
  ModelRunnerOptions ro;
  ro.num_blocks = (o.tokens + ro.block_size - 1) / ro.block_size;
  ro.kv = {TSR_DTYPE_F32, TSR_DTYPE_F32, false};
  ModelRunner runner(target, backend, ro);
  runner.set_capture_layers(layers);
  std::mt19937_64 rng(o.seed);
  std::vector<Eagle3Sequence> texts;
  std::vector<float> logits;
  constexpr SeqId kSeq = 1;
  for (int32_t i = 0; i < o.texts; ++i) {
    const std::vector<int32_t>& prompt = prompts[size_t(i) % prompts.size()];
    Eagle3Sequence text;
    text.tokens.assign(prompt.begin(), prompt.begin() + std::min<ptrdiff_t>(ptrdiff_t(prompt.size()), o.tokens));
    if (!runner.kv().allocate(kSeq, o.tokens, 0)) throw Error("train-eagle: no KV blocks for a text");
    std::vector<int32_t> pending = text.tokens;
    for (int32_t start = 0;;) {
      runner.run_sequence(kSeq, start, pending, true, logits);
      append_features(runner.forward().captured(), text.features);
      for (size_t r = 0; r < pending.size(); ++r) append_softmax(&logits[r * size_t(hp.n_vocab)], hp.n_vocab, text.probs);
      start += int32_t(pending.size());
      if (int32_t(text.tokens.size()) == o.tokens) break;
      const int32_t next = sample(&logits[(pending.size() - 1) * size_t(hp.n_vocab)], hp.n_vocab, o.temperature, rng);
      text.tokens.push_back(next);
      pending = {next};
    }
    runner.kv().free(kSeq);
    texts.push_back(std::move(text));
    if (progress) progress(i + 1);
  }
  return texts;
}

}  // namespace tsr
