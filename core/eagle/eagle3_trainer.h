// EAGLE-3 training on the CPU (the paper's training-time test): over a text the target
// wrote, step 0 runs the head on the target's features at every position; step k feeds
// each position the head's own output state from step k - 1, as drafting k tokens ahead
// does, attending to step 0's keys up to its position and to its own earlier steps' keys
// there (what the head's KV holds while it drafts a chain). Each step's logits are trained
// towards the target's distribution of the token they predict (soft cross-entropy,
// weighted decay^k), gradients flow through every step, and AdamW updates the head with
// the global gradient norm clipped.
//
// Thread safety: none; one trainer per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/eagle/eagle3_head.h"

namespace tsr {

// A text the target wrote, with what the target computed on it.
struct Eagle3Sequence {
  std::vector<int32_t> tokens;  // x_0 .. x_{n-1}
  std::vector<float> features;  // [n, n_features]: the states of the head's layers at each position
  std::vector<float> probs;     // [n, n_vocab]: the target's distribution of x_{t+1} at each position t
};

struct Eagle3TrainOptions {
  int32_t ttt_steps = 3;       // steps of the training-time test (drafting depth trained)
  float step_decay = 0.8f;     // loss weight of step k: decay^k
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0.01f;  // AdamW's, on the matrices
  float clip = 1.0f;           // the global gradient norm's bound
};

struct Eagle3StepStats {
  double loss = 0;                // weighted mean soft cross-entropy over rows
  std::vector<double> agreement;  // per step: rows whose argmax is the target's argmax
  int64_t rows = 0;               // rows per step
};

class Eagle3Trainer {
 public:
  // `head` (updated in place) and `embeddings` (the target's token embeddings, [n_vocab,
  // n_embd] f32, frozen) outlive the trainer. The head must have its own output matrix.
  Eagle3Trainer(Eagle3Weights& head, std::span<const float> embeddings, const Eagle3TrainOptions& options);
  ~Eagle3Trainer();
  Eagle3Trainer(const Eagle3Trainer&) = delete;
  Eagle3Trainer& operator=(const Eagle3Trainer&) = delete;

  // Forward and backward over one text; gradients add up until step(). Texts shorter than
  // ttt_steps + 2 tokens are refused.
  Eagle3StepStats accumulate(const Eagle3Sequence& text);
  // The loss alone (no gradients): what finite differences check accumulate() against.
  double loss(const Eagle3Sequence& text);
  // One AdamW update from the gradients accumulated (divided by `batch` texts), then zero
  // them. Returns the gradient norm before clipping.
  double step(float lr, int32_t batch);
  // Drops the gradients accumulated (after texts run for their statistics alone).
  void zero_gradients();

  // The gradient of every parameter, in the order of Eagle3Weights' members (fc, norms,
  // q, k, v, o, ffn, output norm, output), for tests.
  std::vector<std::vector<float>*> parameters();
  const std::vector<std::vector<float>>& gradients() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tsr
