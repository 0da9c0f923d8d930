#include "core/eagle/eagle3_trainer.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "core/eagle/train_ops.h"

namespace tsr {

using namespace eagle;

namespace {

// One step of the training-time test: its rows' activations, kept for the backward.
struct StepActs {
  std::vector<int32_t> tokens, positions;
  std::vector<float> emb, en, en_inv, g, gn, gn_inv, in, q, attn, probs, o, h, hn, hn_inv, gate, up, act, s, sn,
      sn_inv, logits;
  std::vector<std::vector<int32_t>> keys_of;
};

int32_t argmax(const float* v, int64_t n) { return int32_t(std::max_element(v, v + n) - v); }

}  // namespace

struct Eagle3Trainer::Impl {
  Impl(Eagle3Weights& w, std::span<const float> embd, const Eagle3TrainOptions& o) : head(w), embeddings(embd), opt(o) {
    const Eagle3Shape& s = w.shape;
    if (w.output.empty()) throw Error("train-eagle: the head needs an output matrix of its own");
    if (int64_t(embd.size()) % s.n_embd != 0) throw Error("train-eagle: embeddings are not rows of n_embd");
    if (s.n_head % s.n_head_kv != 0 || s.n_embd % s.n_head != 0) throw Error("train-eagle: bad head shape");
    if (opt.ttt_steps < 1) throw Error("train-eagle: ttt_steps must be at least 1");
    params = {&w.fc, &w.attn_norm, &w.hidden_norm, &w.wq, &w.wk, &w.wv, &w.wo, &w.ffn_norm,
              &w.w_gate, &w.w_up, &w.w_down, &w.output_norm, &w.output};
    for (std::vector<float>* p : params) {
      grads.emplace_back(p->size(), 0.0f);
      m.emplace_back(p->size(), 0.0f);
      v.emplace_back(p->size(), 0.0f);
    }
  }

  enum Param { FC, ATTN_NORM, HIDDEN_NORM, WQ, WK, WV, WO, FFN_NORM, W_GATE, W_UP, W_DOWN, OUTPUT_NORM, OUTPUT };
  std::vector<float>& grad(Param p) { return grads[size_t(p)]; }

  // Runs the steps over `text` (rows t = 0 .. n - 1 - steps); with `backward`, adds the
  // gradients of the weighted mean loss.
  Eagle3StepStats run(const Eagle3Sequence& text, bool backward) {
    const Eagle3Shape& s = head.shape;
    const int64_t n_text = static_cast<int64_t>(text.tokens.size());
    const int32_t steps = opt.ttt_steps;
    if (n_text < steps + 2) throw Error("train-eagle: a text of " + std::to_string(n_text) + " tokens is too short");
    const int64_t rows = n_text - steps;
    if (int64_t(text.features.size()) != n_text * s.n_features() || int64_t(text.probs.size()) != n_text * s.n_vocab) {
      throw Error("train-eagle: a text's features or distributions have the wrong size");
    }
    const int64_t e = s.n_embd, hd = s.head_dim(), qd = int64_t(s.n_head) * hd, kvd = int64_t(s.n_head_kv) * hd;
    k_all.assign(size_t(steps * rows * kvd), 0.0f);
    v_all.assign(size_t(steps * rows * kvd), 0.0f);
    acts.assign(size_t(steps), {});
    Eagle3StepStats stats;
    stats.rows = rows;
    for (int32_t k = 0; k < steps; ++k) {
      StepActs& a = acts[size_t(k)];
      forward_step(text, k, rows, a);
      const float weight = std::pow(opt.step_decay, float(k)) / float(rows);
      std::vector<float> dlogits(a.logits.size());
      const std::span<const float> target(text.probs.data() + (k + 1) * s.n_vocab, size_t(rows * s.n_vocab));
      stats.loss += weight * soft_cross_entropy(a.logits, target, rows, s.n_vocab, weight, dlogits);
      int64_t agree = 0;
      for (int64_t t = 0; t < rows; ++t) {
        agree += argmax(&a.logits[size_t(t * s.n_vocab)], s.n_vocab) == argmax(&target[size_t(t * s.n_vocab)], s.n_vocab);
      }
      stats.agreement.push_back(double(agree) / double(rows));
      if (backward) dlogits_of.push_back(std::move(dlogits));
    }
    if (backward) backward_all(text, rows, qd, kvd, e);
    dlogits_of.clear();
    return stats;
  }

  void forward_step(const Eagle3Sequence& text, int32_t k, int64_t rows, StepActs& a) {
    const Eagle3Shape& s = head.shape;
    const Eagle3Weights& w = head;
    const int64_t e = s.n_embd, hd = s.head_dim(), qd = int64_t(s.n_head) * hd, kvd = int64_t(s.n_head_kv) * hd;
    const size_t n = size_t(rows);
    a.tokens.resize(n), a.positions.resize(n);
    a.emb.resize(n * e), a.en.resize(n * e), a.en_inv.resize(n), a.gn.resize(n * e), a.gn_inv.resize(n);
    for (int64_t t = 0; t < rows; ++t) {
      a.tokens[size_t(t)] = text.tokens[size_t(t + k + 1)];
      a.positions[size_t(t)] = int32_t(t + k);
      std::copy_n(embeddings.begin() + std::ptrdiff_t(a.tokens[size_t(t)]) * e, e, a.emb.begin() + t * e);
    }
    rms_norm(a.emb, w.attn_norm, rows, e, s.rms_eps, a.en, a.en_inv);
    if (k == 0) {
      a.g.resize(n * e);
      matmul(std::span(text.features).first(n * size_t(s.n_features())), w.fc, rows, s.n_features(), e, a.g);
    } else {
      a.g = acts[size_t(k - 1)].s;
    }
    rms_norm(a.g, w.hidden_norm, rows, e, s.rms_eps, a.gn, a.gn_inv);
    a.in.resize(n * 2 * e);
    for (int64_t t = 0; t < rows; ++t) {
      std::copy_n(a.en.begin() + t * e, e, a.in.begin() + t * 2 * e);
      std::copy_n(a.gn.begin() + t * e, e, a.in.begin() + t * 2 * e + e);
    }
    a.q.resize(n * qd);
    matmul(a.in, w.wq, rows, 2 * e, qd, a.q);
    const std::span<float> kk(k_all.data() + k * rows * kvd, n * kvd), vv(v_all.data() + k * rows * kvd, n * kvd);
    matmul(a.in, w.wk, rows, 2 * e, kvd, kk);
    matmul(a.in, w.wv, rows, 2 * e, kvd, vv);
    rope(a.q, a.positions, s.n_head, hd, s.rope_base, false);
    rope(kk, a.positions, s.n_head_kv, hd, s.rope_base, false);
    // Step 0's keys up to the row's position, then the row's own keys of steps 1 .. k.
    a.keys_of.assign(n, {});
    for (int64_t t = 0; t < rows; ++t) {
      std::vector<int32_t>& keys = a.keys_of[size_t(t)];
      for (int64_t u = 0; u <= t; ++u) keys.push_back(int32_t(u));
      for (int32_t j = 1; j <= k; ++j) keys.push_back(int32_t(j * rows + t));
    }
    a.attn.resize(n * qd);
    attention(a.q, k_all, v_all, a.keys_of, shape(), a.attn, a.probs);
    a.o.resize(n * e);
    matmul(a.attn, w.wo, rows, qd, e, a.o);
    a.h = a.o;
    const std::vector<float>& residual = s.norm_before_residual ? a.gn : a.g;
    for (size_t i = 0; i < a.h.size(); ++i) a.h[i] += residual[i];
    a.hn.resize(n * e), a.hn_inv.resize(n);
    rms_norm(a.h, w.ffn_norm, rows, e, s.rms_eps, a.hn, a.hn_inv);
    a.gate.resize(n * s.n_ff), a.up.resize(n * s.n_ff), a.act.resize(n * s.n_ff);
    matmul(a.hn, w.w_gate, rows, e, s.n_ff, a.gate);
    matmul(a.hn, w.w_up, rows, e, s.n_ff, a.up);
    swiglu(a.gate, a.up, a.act);
    a.s.resize(n * e);
    matmul(a.act, w.w_down, rows, s.n_ff, e, a.s);
    for (size_t i = 0; i < a.s.size(); ++i) a.s[i] += a.h[i];
    a.sn.resize(n * e), a.sn_inv.resize(n);
    rms_norm(a.s, w.output_norm, rows, e, s.rms_eps, a.sn, a.sn_inv);
    a.logits.resize(n * s.n_vocab);
    matmul(a.sn, w.output, rows, e, s.n_vocab, a.logits);
  }

  // The steps in reverse: a step's keys and values have every query's gradient once the
  // steps after it are done, and its output state the gradient of the next step's input.
  void backward_all(const Eagle3Sequence& text, int64_t rows, int64_t qd, int64_t kvd, int64_t e) {
    const Eagle3Shape& s = head.shape;
    const Eagle3Weights& w = head;
    const size_t n = size_t(rows);
    std::vector<float> dk_all(k_all.size(), 0.0f), dv_all(v_all.size(), 0.0f);
    std::vector<float> ds_next;  // the gradient of this step's output state from the next step
    for (int32_t k = opt.ttt_steps - 1; k >= 0; --k) {
      StepActs& a = acts[size_t(k)];
      std::vector<float> dsn(n * e, 0.0f), ds = ds_next.empty() ? std::vector<float>(n * e, 0.0f) : ds_next;
      matmul_backward(a.sn, w.output, dlogits_of[size_t(k)], rows, e, s.n_vocab, dsn, grad(OUTPUT));
      rms_norm_backward(a.s, w.output_norm, a.sn_inv, dsn, rows, e, ds, grad(OUTPUT_NORM));
      std::vector<float> dh = ds, dact(n * s.n_ff, 0.0f), dgate(n * s.n_ff, 0.0f), dup(n * s.n_ff, 0.0f), dhn(n * e, 0.0f);
      matmul_backward(a.act, w.w_down, ds, rows, s.n_ff, e, dact, grad(W_DOWN));
      swiglu_backward(a.gate, a.up, dact, dgate, dup);
      matmul_backward(a.hn, w.w_gate, dgate, rows, e, s.n_ff, dhn, grad(W_GATE));
      matmul_backward(a.hn, w.w_up, dup, rows, e, s.n_ff, dhn, grad(W_UP));
      rms_norm_backward(a.h, w.ffn_norm, a.hn_inv, dhn, rows, e, dh, grad(FFN_NORM));
      std::vector<float> dattn(n * qd, 0.0f), dq(n * qd, 0.0f);
      matmul_backward(a.attn, w.wo, dh, rows, qd, e, dattn, grad(WO));
      attention_backward(a.q, k_all, v_all, a.keys_of, shape(), a.probs, dattn, dq, dk_all, dv_all);
      std::vector<float> dk(dk_all.begin() + k * rows * kvd, dk_all.begin() + (k + 1) * rows * kvd);
      const std::span<const float> dv(dv_all.data() + k * rows * kvd, n * kvd);
      rope(dq, a.positions, s.n_head, s.head_dim(), s.rope_base, true);
      rope(dk, a.positions, s.n_head_kv, s.head_dim(), s.rope_base, true);
      std::vector<float> din(n * 2 * e, 0.0f);
      matmul_backward(a.in, w.wq, dq, rows, 2 * e, qd, din, grad(WQ));
      matmul_backward(a.in, w.wk, dk, rows, 2 * e, kvd, din, grad(WK));
      matmul_backward(a.in, w.wv, dv, rows, 2 * e, kvd, din, grad(WV));
      std::vector<float> den(n * e), dgn(n * e), demb(n * e, 0.0f), dg(n * e, 0.0f);
      for (int64_t t = 0; t < rows; ++t) {
        std::copy_n(din.begin() + t * 2 * e, e, den.begin() + t * e);
        std::copy_n(din.begin() + t * 2 * e + e, e, dgn.begin() + t * e);
      }
      // The residual around attention: from the features or their norm.
      std::vector<float>& to_residual = s.norm_before_residual ? dgn : dg;
      for (size_t i = 0; i < dh.size(); ++i) to_residual[i] += dh[i];
      rms_norm_backward(a.emb, w.attn_norm, a.en_inv, den, rows, e, demb, grad(ATTN_NORM));
      rms_norm_backward(a.g, w.hidden_norm, a.gn_inv, dgn, rows, e, dg, grad(HIDDEN_NORM));
      if (k == 0) {
        const std::span<const float> features = std::span(text.features).first(n * size_t(s.n_features()));
        matmul_backward(features, w.fc, dg, rows, s.n_features(), e, {}, grad(FC));
      } else {
        ds_next = std::move(dg);
      }
    }
  }

  AttentionShape shape() const {
    const Eagle3Shape& s = head.shape;
    return {s.n_head, s.n_head_kv, s.head_dim()};
  }

  double adamw(float lr, int32_t batch) {
    double norm = 0;
    for (auto& g : grads) {
      for (float& x : g) norm += double(x / float(batch)) * (x / float(batch));
    }
    norm = std::sqrt(norm);
    const float scale = (norm > opt.clip ? float(opt.clip / norm) : 1.0f) / float(batch);
    ++t;
    const float c1 = 1.0f - std::pow(opt.beta1, float(t)), c2 = 1.0f - std::pow(opt.beta2, float(t));
    for (size_t p = 0; p < params.size(); ++p) {
      std::vector<float>& w = *params[p];
      // Matrices decay; norm weights (vectors) do not.
      const bool decays = p != ATTN_NORM && p != HIDDEN_NORM && p != FFN_NORM && p != OUTPUT_NORM;
      for (size_t i = 0; i < w.size(); ++i) {
        const float g = grads[p][i] * scale;
        m[p][i] = opt.beta1 * m[p][i] + (1 - opt.beta1) * g;
        v[p][i] = opt.beta2 * v[p][i] + (1 - opt.beta2) * g * g;
        const float update = (m[p][i] / c1) / (std::sqrt(v[p][i] / c2) + opt.eps);
        w[i] -= lr * (update + (decays ? opt.weight_decay * w[i] : 0.0f));
      }
      std::fill(grads[p].begin(), grads[p].end(), 0.0f);
    }
    return norm;
  }

  Eagle3Weights& head;
  std::span<const float> embeddings;
  Eagle3TrainOptions opt;
  std::vector<std::vector<float>*> params;
  std::vector<std::vector<float>> grads, m, v;
  int64_t t = 0;
  std::vector<StepActs> acts;
  std::vector<float> k_all, v_all;
  std::vector<std::vector<float>> dlogits_of;
};

Eagle3Trainer::Eagle3Trainer(Eagle3Weights& head, std::span<const float> embeddings, const Eagle3TrainOptions& options)
    : impl_(std::make_unique<Impl>(head, embeddings, options)) {}
Eagle3Trainer::~Eagle3Trainer() = default;

Eagle3StepStats Eagle3Trainer::accumulate(const Eagle3Sequence& text) { return impl_->run(text, true); }
double Eagle3Trainer::loss(const Eagle3Sequence& text) { return impl_->run(text, false).loss; }
double Eagle3Trainer::step(float lr, int32_t batch) { return impl_->adamw(lr, std::max(batch, 1)); }
void Eagle3Trainer::zero_gradients() {
  for (auto& g : impl_->grads) std::fill(g.begin(), g.end(), 0.0f);
}
std::vector<std::vector<float>*> Eagle3Trainer::parameters() { return impl_->params; }
const std::vector<std::vector<float>>& Eagle3Trainer::gradients() const { return impl_->grads; }

}  // namespace tsr
