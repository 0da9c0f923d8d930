// Every backward of the EAGLE-3 trainer against central finite differences of its forward,
// op by op and through the whole training-time test (every parameter of a small head).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "core/eagle/eagle3_trainer.h"
#include "core/eagle/train_ops.h"

namespace tsr::eagle {
namespace {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// L(x) = Σ r_i f(x)_i for fixed random r: its gradient is the backward of r.
double weighted_sum(const std::vector<float>& y, const std::vector<float>& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += double(y[i]) * r[i];
  return s;
}

// Compares `analytic` (dL/dx) with central differences of L over every entry of x.
void expect_gradient(std::vector<float>& x, const std::vector<float>& analytic, const std::function<double()>& loss,
                     const char* what, double eps = 1e-2, double tolerance = 2e-3) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + float(eps);
    const double up = loss();
    x[i] = keep - float(eps);
    const double down = loss();
    x[i] = keep;
    const double numeric = (up - down) / (2 * eps);
    worst = std::max(worst, std::fabs(numeric - analytic[i]) / (1.0 + std::fabs(numeric)));
  }
  EXPECT_LT(worst, tolerance) << what;
}

TEST(EagleTrainOps, MatmulBackward) {
  std::mt19937 rng(1);
  const int64_t n = 3, in = 5, out = 4;
  std::vector<float> x = random_vector(n * in, rng), w = random_vector(out * in, rng), r = random_vector(n * out, rng);
  std::vector<float> y(n * out), dx(n * in, 0.0f), dw(out * in, 0.0f);
  const auto loss = [&] {
    matmul(x, w, n, in, out, y);
    return weighted_sum(y, r);
  };
  matmul_backward(x, w, r, n, in, out, dx, dw);
  expect_gradient(x, dx, loss, "dx");
  expect_gradient(w, dw, loss, "dw");
}

TEST(EagleTrainOps, RmsNormBackward) {
  std::mt19937 rng(2);
  const int64_t n = 3, d = 6;
  std::vector<float> x = random_vector(n * d, rng), w = random_vector(d, rng), r = random_vector(n * d, rng);
  std::vector<float> y(n * d), inv(n), dx(n * d, 0.0f), dw(d, 0.0f);
  const auto loss = [&] {
    rms_norm(x, w, n, d, 1e-5f, y, inv);
    return weighted_sum(y, r);
  };
  loss();
  rms_norm_backward(x, w, inv, r, n, d, dx, dw);
  expect_gradient(x, dx, loss, "dx");
  expect_gradient(w, dw, loss, "dw");
}

TEST(EagleTrainOps, RopeBackwardIsTheInverseRotation) {
  std::mt19937 rng(3);
  const int64_t heads = 2, dim = 4;
  const std::vector<int32_t> positions = {0, 3, 7};
  std::vector<float> x = random_vector(3 * heads * dim, rng), r = random_vector(x.size(), rng);
  std::vector<float> dx = r;
  rope(dx, positions, heads, dim, 10000.0f, true);
  const auto loss = [&] {
    std::vector<float> y = x;
    rope(y, positions, heads, dim, 10000.0f, false);
    return weighted_sum(y, r);
  };
  expect_gradient(x, dx, loss, "dx");
}

TEST(EagleTrainOps, AttentionBackward) {
  std::mt19937 rng(4);
  const AttentionShape s{4, 2, 3};
  const std::vector<std::vector<int32_t>> keys_of = {{0}, {0, 1}, {0, 1, 2}, {0, 3}};
  const int64_t n = 4, m = 4;
  std::vector<float> q = random_vector(n * s.heads * s.dim, rng), k = random_vector(m * s.kv_heads * s.dim, rng),
                     v = random_vector(m * s.kv_heads * s.dim, rng), r = random_vector(q.size(), rng);
  std::vector<float> out(q.size()), probs, dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  const auto loss = [&] {
    attention(q, k, v, keys_of, s, out, probs);
    return weighted_sum(out, r);
  };
  loss();
  attention_backward(q, k, v, keys_of, s, probs, r, dq, dk, dv);
  expect_gradient(q, dq, loss, "dq");
  expect_gradient(k, dk, loss, "dk");
  expect_gradient(v, dv, loss, "dv");
}

TEST(EagleTrainOps, SwigluBackward) {
  std::mt19937 rng(5);
  std::vector<float> gate = random_vector(8, rng), up = random_vector(8, rng), r = random_vector(8, rng);
  std::vector<float> y(8), dgate(8, 0.0f), dup(8, 0.0f);
  const auto loss = [&] {
    swiglu(gate, up, y);
    return weighted_sum(y, r);
  };
  swiglu_backward(gate, up, r, dgate, dup);
  expect_gradient(gate, dgate, loss, "dgate");
  expect_gradient(up, dup, loss, "dup");
}

TEST(EagleTrainOps, SoftCrossEntropyBackward) {
  std::mt19937 rng(6);
  const int64_t n = 2, d = 5;
  std::vector<float> logits = random_vector(n * d, rng), target(n * d);
  for (int64_t r = 0; r < n; ++r) {
    float total = 0;
    for (int64_t i = 0; i < d; ++i) total += (target[size_t(r * d + i)] = float(rng() % 100 + 1));
    for (int64_t i = 0; i < d; ++i) target[size_t(r * d + i)] /= total;
  }
  std::vector<float> dlogits(n * d);
  soft_cross_entropy(logits, target, n, d, 0.7f, dlogits);
  std::vector<float> scratch(n * d);
  expect_gradient(logits, dlogits, [&] { return 0.7 * soft_cross_entropy(logits, target, n, d, 1.0f, scratch); },
                  "dlogits");
}

// The whole training-time test: every parameter's gradient through three steps.
TEST(EagleTrainOps, TrainerGradientsMatchFiniteDifferences) {
  for (const bool norm_before_residual : {false, true}) {
    std::mt19937 rng(7);
    Eagle3Shape s;
    s.n_embd = 8, s.n_head = 2, s.n_head_kv = 1, s.n_ff = 12, s.n_vocab = 10, s.target_n_embd = 6, s.n_ctx = 64;
    s.layers = {1, 2};
    s.norm_before_residual = norm_before_residual;
    Eagle3Weights head = eagle3_random(s, 11, 2.0f, true);
    for (auto* norm : {&head.attn_norm, &head.hidden_norm, &head.ffn_norm, &head.output_norm}) {
      *norm = random_vector(norm->size(), rng, 0.5f);
      for (float& x : *norm) x += 1.0f;
    }
    const std::vector<float> embeddings = random_vector(size_t(s.n_vocab * s.n_embd), rng);
    Eagle3Sequence text;
    text.tokens = {1, 4, 2, 9, 0, 7, 3};
    const size_t n = text.tokens.size();
    text.features = random_vector(n * size_t(s.n_features()), rng);
    text.probs = random_vector(n * size_t(s.n_vocab), rng);
    for (size_t r = 0; r < n; ++r) {  // rows of a distribution
      float total = 0;
      for (int32_t i = 0; i < s.n_vocab; ++i) total += (text.probs[r * s.n_vocab + i] = std::exp(text.probs[r * s.n_vocab + i]));
      for (int32_t i = 0; i < s.n_vocab; ++i) text.probs[r * s.n_vocab + i] /= total;
    }
    Eagle3TrainOptions options;
    options.ttt_steps = 3;
    Eagle3Trainer trainer(head, embeddings, options);
    trainer.accumulate(text);
    const std::vector<std::vector<float>> grads = trainer.gradients();
    const std::vector<std::vector<float>*> params = trainer.parameters();
    const char* names[] = {"fc", "attn_norm", "hidden_norm", "wq", "wk", "wv", "wo", "ffn_norm",
                           "w_gate", "w_up", "w_down", "output_norm", "output"};
    ASSERT_EQ(params.size(), std::size(names));
    for (size_t p = 0; p < params.size(); ++p) {
      expect_gradient(*params[p], grads[p], [&] { return trainer.loss(text); }, names[p], 1e-2, 5e-3);
    }
  }
}

// A head learns a target whose next token is a function of the current one: AdamW lowers
// the loss of every training-time-test step, and each step's top-1 agreement rises.
TEST(EagleTrainOps, TrainingLearnsADeterministicTarget) {
  std::mt19937 rng(9);
  Eagle3Shape s;
  s.n_embd = 16, s.n_head = 2, s.n_head_kv = 1, s.n_ff = 32, s.n_vocab = 12, s.target_n_embd = 8, s.n_ctx = 64;
  s.layers = {1, 2};
  Eagle3Weights head = eagle3_random(s, 3, 1.0f, true);
  const std::vector<float> embeddings = random_vector(size_t(s.n_vocab * s.n_embd), rng);
  const auto next = [&](int32_t t) { return (5 * t + 1) % s.n_vocab; };
  std::vector<Eagle3Sequence> texts(8);
  for (Eagle3Sequence& text : texts) {
    text.tokens = {int32_t(rng() % uint32_t(s.n_vocab))};
    while (text.tokens.size() < 24) text.tokens.push_back(next(text.tokens.back()));
    text.features = random_vector(text.tokens.size() * size_t(s.n_features()), rng);
    text.probs.assign(text.tokens.size() * size_t(s.n_vocab), 0.0f);
    for (size_t t = 0; t < text.tokens.size(); ++t) text.probs[t * s.n_vocab + size_t(next(text.tokens[t]))] = 1.0f;
  }
  Eagle3TrainOptions options;
  options.ttt_steps = 3;
  Eagle3Trainer trainer(head, embeddings, options);
  const auto evaluate = [&] {
    Eagle3StepStats total;
    total.agreement.assign(3, 0.0);
    for (const Eagle3Sequence& text : texts) {
      const Eagle3StepStats s = trainer.accumulate(text);
      total.loss += s.loss / double(texts.size());
      for (size_t k = 0; k < 3; ++k) total.agreement[k] += s.agreement[k] / double(texts.size());
    }
    trainer.zero_gradients();
    return total;
  };
  const Eagle3StepStats before = evaluate();
  for (int update = 0; update < 150; ++update) {
    for (const Eagle3Sequence& text : texts) trainer.accumulate(text);
    trainer.step(1e-2f, int32_t(texts.size()));
  }
  const Eagle3StepStats after = evaluate();
  EXPECT_LT(after.loss, 0.1 * before.loss) << before.loss << " -> " << after.loss;
  for (size_t k = 0; k < 3; ++k) EXPECT_GT(after.agreement[k], 0.95) << "step " << k;
}

}  // namespace
}  // namespace tsr::eagle
