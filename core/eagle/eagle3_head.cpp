#include "core/eagle/eagle3_head.h"

#include <cmath>
#include <random>
#include <span>

#include "base/error.h"
#include "core/model/gguf_writer.h"
#include "core/quant/quant.h"

namespace tsr {

namespace {

void fill(std::vector<float>& m, size_t rows, size_t cols, float scale, std::mt19937_64& rng) {
  const float bound = scale / std::sqrt(float(cols));
  std::uniform_real_distribution<float> u(-bound, bound);
  m.resize(rows * cols);
  for (float& v : m) v = u(rng);
}

std::span<const uint8_t> bytes(const std::vector<float>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
}

}  // namespace

Eagle3Weights eagle3_random(const Eagle3Shape& s, uint64_t seed, float scale, bool own_output) {
  std::mt19937_64 rng(seed);
  Eagle3Weights w;
  w.shape = s;
  const size_t e = size_t(s.n_embd), q = size_t(s.n_head) * s.head_dim(), kv = size_t(s.n_head_kv) * s.head_dim();
  fill(w.fc, e, size_t(s.n_features()), scale, rng);
  fill(w.wq, q, 2 * e, scale, rng);
  fill(w.wk, kv, 2 * e, scale, rng);
  fill(w.wv, kv, 2 * e, scale, rng);
  fill(w.wo, e, q, scale, rng);
  fill(w.w_gate, size_t(s.n_ff), e, scale, rng);
  fill(w.w_up, size_t(s.n_ff), e, scale, rng);
  fill(w.w_down, e, size_t(s.n_ff), scale, rng);
  if (own_output) fill(w.output, size_t(s.n_vocab), e, scale, rng);
  for (auto* norm : {&w.attn_norm, &w.hidden_norm, &w.ffn_norm, &w.output_norm}) norm->assign(e, 1.0f);
  return w;
}

std::vector<float> eagle3_target_tensor(const GgufFile& target, const std::string& name) {
  const GgufTensorInfo* t = target.find_tensor(name);
  if (t == nullptr) throw Error(target.path() + ": no tensor " + name);
  return quant::dequantize(t->type, {target.tensor_data(*t), t->nbytes}, t->nelements);
}

Eagle3Weights eagle3_initial_head(const GgufFile& target, const LlamaHParams& hp, const std::vector<int32_t>& layers,
                                  int32_t n_ff, uint64_t seed) {
  if (hp.head_dim * hp.n_head != hp.n_embd || hp.n_rot != hp.head_dim || hp.rope_mode != TSR_ROPE_NORMAL) {
    throw Error("train-eagle: heads are trained for llama-style targets (head size x heads = width, full NORMAL RoPE)",
                TSR_STATUS_UNSUPPORTED);
  }
  Eagle3Shape s;
  s.n_embd = hp.n_embd, s.n_head = hp.n_head, s.n_head_kv = hp.n_head_kv;
  s.n_ff = n_ff > 0 ? n_ff : hp.n_ff;
  s.n_vocab = hp.n_vocab, s.target_n_embd = hp.n_embd, s.n_ctx = hp.n_ctx_train;
  s.rms_eps = hp.rms_eps, s.rope_base = hp.rope_freq_base;
  s.layers = layers;
  Eagle3Weights w = eagle3_random(s, seed, 1.0f, false);
  w.output = eagle3_target_tensor(target, target.find_tensor("output.weight") ? "output.weight" : "token_embd.weight");
  return w;
}

void eagle3_write(const Eagle3Weights& w, const std::string& path) {
  const Eagle3Shape& s = w.shape;
  const int64_t e = s.n_embd, q = int64_t(s.n_head) * s.head_dim(), kv = int64_t(s.n_head_kv) * s.head_dim();
  GgufWriter g;
  g.add_string("general.architecture", "eagle3");
  g.add_string("general.name", "eagle3 head");
  g.add_u32("eagle3.context_length", uint32_t(s.n_ctx));
  g.add_u32("eagle3.embedding_length", uint32_t(s.n_embd));
  g.add_u32("eagle3.block_count", 1);
  g.add_u32("eagle3.feed_forward_length", uint32_t(s.n_ff));
  g.add_u32("eagle3.attention.head_count", uint32_t(s.n_head));
  g.add_u32("eagle3.attention.head_count_kv", uint32_t(s.n_head_kv));
  g.add_f32("eagle3.attention.layer_norm_rms_epsilon", s.rms_eps);
  g.add_f32("eagle3.rope.freq_base", s.rope_base);
  g.add_i32_array("eagle3.extract_layers", s.layers);
  g.add_u32("eagle3.target_hidden_size", uint32_t(s.target_n_embd));
  g.add_bool("eagle3.norm_before_residual", s.norm_before_residual);
  const auto tensor = [&](const std::string& name, const std::vector<float>& v, std::vector<int64_t> ne) {
    int64_t n = 1;
    for (const int64_t d : ne) n *= d;
    if (int64_t(v.size()) != n) throw Error("eagle3_write: " + name + " has " + std::to_string(v.size()) + " values, not " + std::to_string(n));
    g.add_tensor(name, GgmlType::F32, std::move(ne), bytes(v));
  };
  tensor("fc.weight", w.fc, {s.n_features(), e});
  tensor("blk.0.attn_norm.weight", w.attn_norm, {e});
  tensor("blk.0.hidden_norm.weight", w.hidden_norm, {e});
  tensor("blk.0.attn_q.weight", w.wq, {2 * e, q});
  tensor("blk.0.attn_k.weight", w.wk, {2 * e, kv});
  tensor("blk.0.attn_v.weight", w.wv, {2 * e, kv});
  tensor("blk.0.attn_output.weight", w.wo, {q, e});
  tensor("blk.0.ffn_norm.weight", w.ffn_norm, {e});
  tensor("blk.0.ffn_gate.weight", w.w_gate, {e, s.n_ff});
  tensor("blk.0.ffn_up.weight", w.w_up, {e, s.n_ff});
  tensor("blk.0.ffn_down.weight", w.w_down, {s.n_ff, e});
  tensor("output_norm.weight", w.output_norm, {e});
  if (!w.output.empty()) tensor("output.weight", w.output, {e, s.n_vocab});
  if (!w.d2t.empty()) {
    if (int64_t(w.d2t.size()) != s.n_vocab) throw Error("eagle3_write: d2t must map every output id");
    std::vector<int64_t> ids(w.d2t.begin(), w.d2t.end());
    g.add_tensor("d2t.weight", GgmlType::I64, {s.n_vocab},
                 {reinterpret_cast<const uint8_t*>(ids.data()), ids.size() * sizeof(int64_t)});
  }
  g.write(path);
}

}  // namespace tsr
