#include "apps/tessera/synth/synth_arch.h"

#include <cmath>

#include "base/error.h"

namespace tsr::app {

namespace {

// The spread of the random weights, chosen so that the model computes something rather
// than passing its embedding through: inputs to every projection are RMS-normalized, so a
// matrix of N(0, 1/fan_in) gives outputs of unit scale (each sublayer moves the residual
// stream as much as the embedding did, and attention scores have unit spread). The output
// head gives logits of spread kLogitStd, which makes next-token distributions peaked (the
// top token of a 32k-151k vocabulary typically takes 30-90% of the mass) and ties rare.
constexpr float kEmbeddingStd = 1.0f;
constexpr float kLogitStd = 8.0f;
constexpr float kBiasStd = 0.5f;

struct ArchDefaults {
  std::string_view name;
  float rope_base, rms_eps;
  bool qkv_bias, qk_norm;
  bool gemma;  // post-norms, a sqrt(dim) embedding scale, sliding-window layers
};

constexpr ArchDefaults kArchs[] = {
    {"llama", 10000.0f, 1e-5f, false, false, false},
    {"qwen2", 1000000.0f, 1e-6f, true, false, false},
    {"qwen3", 1000000.0f, 1e-6f, false, true, false},
    {"gemma3", 1000000.0f, 1e-6f, false, true, true},
};
constexpr int32_t kGemmaWindow = 512;  // Gemma 3 1B's; 4B-27B use 1024

const ArchDefaults& defaults(std::string_view arch) {
  for (const ArchDefaults& a : kArchs) {
    if (a.name == arch) return a;
  }
  std::string known;
  for (std::string_view a : synth_archs()) known += (known.empty() ? "" : ", ") + std::string(a);
  throw Error("synth: unknown --arch '" + std::string(arch) + "' (" + known + ")");
}

TensorPlan matrix(std::string name, int64_t in, int64_t out) {
  return {std::move(name), {in, out}, 1.0f / std::sqrt(static_cast<float>(in))};
}

TensorPlan norm(std::string name, int64_t n) { return {std::move(name), {n}, 0.0f}; }

}  // namespace

const std::vector<std::string_view>& synth_archs() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const ArchDefaults& a : kArchs) v.push_back(a.name);
    return v;
  }();
  return names;
}

SynthShape synth_resolve(SynthShape s) {
  const ArchDefaults& a = defaults(s.arch);
  if (s.head_dim == 0) {
    if (s.dim % s.heads != 0) throw Error("synth: --dim must be a multiple of --heads (or give --head-dim)");
    s.head_dim = s.dim / s.heads;
  }
  if (s.heads % s.kv_heads != 0) throw Error("synth: --heads must be a multiple of --kv-heads");
  if (s.head_dim % 2 != 0) throw Error("synth: the head size (--head-dim, or --dim / --heads) must be even");
  if (s.rope_base == 0) s.rope_base = a.rope_base;
  if (s.rope_scaling != "none" && s.rope_scaling != "linear") {
    throw Error("synth: --rope-scaling must be none or linear, not '" + s.rope_scaling + "'");
  }
  if ((s.rope_scaling == "linear") != (s.rope_scale > 0)) {
    throw Error("synth: --rope-scaling linear and --rope-scale go together");
  }
  if (a.gemma && s.sliding_window == 0) s.sliding_window = kGemmaWindow;
  if (!a.gemma && s.sliding_window != 0) {
    throw Error("synth: --sliding-window is for gemma3 (" + std::string(a.name) + " has no sliding-window layers here)");
  }
  return s;
}

std::vector<TensorPlan> synth_tensor_plan(const SynthShape& s) {
  const ArchDefaults& a = defaults(s.arch);
  const int64_t q_dim = int64_t{s.heads} * s.head_dim, kv_dim = int64_t{s.kv_heads} * s.head_dim;
  const float head_std = kLogitStd / std::sqrt(static_cast<float>(s.dim));
  const float embd_std = s.tied ? head_std : kEmbeddingStd;
  // Gemma scales the embedding by sqrt(dim) and normalizes each sublayer's output before
  // adding it: post-norm weights of the scaled embedding's RMS let every sublayer move the
  // residual stream as much as the embedding did (with weights of 1 it would pass the
  // embedding through, and greedy decoding would repeat the last token).
  const float post_norm = embd_std * std::sqrt(static_cast<float>(s.dim));
  std::vector<TensorPlan> plan{{"token_embd.weight", {s.dim, s.vocab}, embd_std}};
  for (int32_t i = 0; i < s.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    plan.push_back(norm(p + "attn_norm.weight", s.dim));
    plan.push_back(matrix(p + "attn_q.weight", s.dim, q_dim));
    plan.push_back(matrix(p + "attn_k.weight", s.dim, kv_dim));
    plan.push_back(matrix(p + "attn_v.weight", s.dim, kv_dim));
    if (a.qkv_bias) {
      plan.push_back({p + "attn_q.bias", {q_dim}, kBiasStd});
      plan.push_back({p + "attn_k.bias", {kv_dim}, kBiasStd});
      plan.push_back({p + "attn_v.bias", {kv_dim}, kBiasStd});
    }
    if (a.qk_norm) {
      plan.push_back(norm(p + "attn_q_norm.weight", s.head_dim));
      plan.push_back(norm(p + "attn_k_norm.weight", s.head_dim));
    }
    plan.push_back(matrix(p + "attn_output.weight", q_dim, s.dim));
    if (a.gemma) plan.push_back({p + "post_attention_norm.weight", {s.dim}, 0.0f, post_norm});
    plan.push_back(norm(p + "ffn_norm.weight", s.dim));
    plan.push_back(matrix(p + "ffn_gate.weight", s.dim, s.ffn));
    plan.push_back(matrix(p + "ffn_up.weight", s.dim, s.ffn));
    plan.push_back(matrix(p + "ffn_down.weight", s.ffn, s.dim));
    if (a.gemma) plan.push_back({p + "post_ffw_norm.weight", {s.dim}, 0.0f, post_norm});
  }
  plan.push_back(norm("output_norm.weight", s.dim));
  // Tied, the embedding takes the head's spread: its own scale does not matter, as every
  // layer normalizes its input.
  if (!s.tied) {
    plan.push_back({"output.weight", {s.dim, s.vocab}, head_std});
  }
  return plan;
}

void synth_add_hparams(GgufWriter& w, const SynthShape& s) {
  const ArchDefaults& a = defaults(s.arch);
  const std::string p = s.arch + ".";
  const auto u32 = [](int32_t v) { return static_cast<uint32_t>(v); };
  w.add_string("general.architecture", s.arch);
  w.add_u32(p + "context_length", u32(s.ctx));
  w.add_u32(p + "embedding_length", u32(s.dim));
  w.add_u32(p + "block_count", u32(s.layers));
  w.add_u32(p + "feed_forward_length", u32(s.ffn));
  w.add_u32(p + "attention.head_count", u32(s.heads));
  w.add_u32(p + "attention.head_count_kv", u32(s.kv_heads));
  if (s.head_dim * s.heads != s.dim || a.qk_norm) {
    w.add_u32(p + "attention.key_length", u32(s.head_dim));
    w.add_u32(p + "attention.value_length", u32(s.head_dim));
  }
  w.add_u32(p + "rope.dimension_count", u32(s.head_dim));
  w.add_f32(p + "rope.freq_base", s.rope_base);
  if (s.rope_scaling == "linear") {
    w.add_string(p + "rope.scaling.type", "linear");
    w.add_f32(p + "rope.scaling.factor", s.rope_scale);
  }
  if (s.sliding_window > 0) w.add_u32(p + "attention.sliding_window", u32(s.sliding_window));
  w.add_f32(p + "attention.layer_norm_rms_epsilon", a.rms_eps);
  w.add_u32(p + "vocab_size", u32(s.vocab));
}

}  // namespace tsr::app
