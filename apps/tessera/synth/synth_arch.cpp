#include "apps/tessera/synth/synth_arch.h"

#include <algorithm>
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
  bool phi3;   // fused attn_qkv and gate-up ffn_up; LongRoPE
  bool gpt_oss;  // sinks, output and expert biases, alternating sliding window, experts only
  bool deepseek2 = false;  // latent attention, dense leading layers, shared experts
};

constexpr ArchDefaults kArchs[] = {
    {"llama", 10000.0f, 1e-5f, false, false, false, false, false},
    {"qwen2", 1000000.0f, 1e-6f, true, false, false, false, false},
    {"qwen3", 1000000.0f, 1e-6f, false, true, false, false, false},
    {"qwen3moe", 1000000.0f, 1e-6f, false, true, false, false, false},
    {"gemma3", 1000000.0f, 1e-6f, false, true, true, false, false},
    {"phi3", 10000.0f, 1e-5f, false, false, false, true, false},
    {"gpt-oss", 150000.0f, 1e-5f, true, false, false, false, true},
    {"deepseek2", 10000.0f, 1e-6f, false, false, false, false, false, true},
};
constexpr float kDeepseekV3Scale = 2.5f;  // DeepSeek-V3's routed_scaling_factor
constexpr int32_t kGemmaWindow = 512;   // Gemma 3 1B's; 4B-27B use 1024
constexpr int32_t kGptOssWindow = 128;  // gpt-oss 20B's and 120B's
// gpt-oss's experts' gate and up outputs spread this much wider than other projections',
// so that its SwiGLU's clamp at 7 takes effect (at 1, it would hardly ever be reached).
constexpr float kGptOssExpertGain = 4.0f;
constexpr float kSinkStd = 1.0f;

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

// An input norm: 1s, or outlier_gain at the outlier dimensions.
TensorPlan input_norm(std::string name, const SynthShape& s) {
  TensorPlan t = norm(std::move(name), s.dim);
  if (s.outlier_dims == 0) return t;
  t.values.assign(size_t(s.dim), 1.0f);
  for (int32_t i = 0; i < s.outlier_dims; ++i) t.values[size_t(int64_t(i) * s.dim / s.outlier_dims)] = s.outlier_gain;
  return t;
}

// The experts' [n_expert] stack of [out, in] matrices, each scaled as matrix() scales one
// (times `gain`).
TensorPlan experts(std::string name, int64_t in, int64_t out, int64_t n_expert, float gain = 1.0f) {
  return {std::move(name), {in, out, n_expert}, gain / std::sqrt(static_cast<float>(in))};
}

// gpt-oss's router and experts: each with a bias (the experts' as [width, n_expert]).
void add_biased_experts(std::vector<TensorPlan>& plan, const std::string& p, const SynthShape& s) {
  plan.push_back(matrix(p + "ffn_gate_inp.weight", s.dim, s.experts));
  plan.push_back({p + "ffn_gate_inp.bias", {s.experts}, kBiasStd});
  plan.push_back(experts(p + "ffn_gate_exps.weight", s.dim, s.expert_ffn, s.experts, kGptOssExpertGain));
  plan.push_back({p + "ffn_gate_exps.bias", {s.expert_ffn, s.experts}, kBiasStd});
  plan.push_back(experts(p + "ffn_up_exps.weight", s.dim, s.expert_ffn, s.experts, kGptOssExpertGain));
  plan.push_back({p + "ffn_up_exps.bias", {s.expert_ffn, s.experts}, kBiasStd});
  plan.push_back(experts(p + "ffn_down_exps.weight", s.expert_ffn, s.dim, s.experts, 1.0f / kGptOssExpertGain));
  plan.push_back({p + "ffn_down_exps.bias", {s.dim, s.experts}, kBiasStd});
}

// A layer's feed-forward: SwiGLU's three matrices (Phi-3: gate and up in one), or the
// router and the experts' stacks.
void add_ffn(std::vector<TensorPlan>& plan, const std::string& p, const SynthShape& s, const ArchDefaults& a,
             int32_t layer) {
  if (a.gpt_oss) return add_biased_experts(plan, p, s);
  if (s.experts > 0 && layer >= s.dense_layers) {
    plan.push_back(matrix(p + "ffn_gate_inp.weight", s.dim, s.experts));
    if (s.gating == "sigmoid") plan.push_back({p + "exp_probs_b.bias", {s.experts}, kBiasStd});
    plan.push_back(experts(p + "ffn_gate_exps.weight", s.dim, s.expert_ffn, s.experts));
    plan.push_back(experts(p + "ffn_down_exps.weight", s.expert_ffn, s.dim, s.experts));
    plan.push_back(experts(p + "ffn_up_exps.weight", s.dim, s.expert_ffn, s.experts));
    if (s.shared_experts > 0) {
      const int64_t shared = int64_t{s.shared_experts} * s.expert_ffn;
      plan.push_back(matrix(p + "ffn_gate_shexp.weight", s.dim, shared));
      plan.push_back(matrix(p + "ffn_up_shexp.weight", s.dim, shared));
      plan.push_back(matrix(p + "ffn_down_shexp.weight", shared, s.dim));
    }
    return;
  }
  const bool fused_gate_up = a.phi3;
  if (fused_gate_up) {
    plan.push_back(matrix(p + "ffn_up.weight", s.dim, 2 * int64_t{s.ffn}));  // gate rows, then up rows
  } else {
    plan.push_back(matrix(p + "ffn_gate.weight", s.dim, s.ffn));
    plan.push_back(matrix(p + "ffn_up.weight", s.dim, s.ffn));
  }
  plan.push_back(matrix(p + "ffn_down.weight", s.ffn, s.dim));
}

// Experts: qwen3moe, gpt-oss and deepseek2 always have them (8 by default), llama may
// (Mixtral), the others not here.
void resolve_experts(SynthShape& s) {
  const bool always = s.arch == "qwen3moe" || s.arch == "gpt-oss" || s.arch == "deepseek2";
  if (always && s.experts == 0) s.experts = 8;
  if (s.experts == 0) {
    if (s.experts_used != 0 || s.expert_ffn != 0) throw Error("synth: --experts-used and --expert-ffn need --experts");
    return;
  }
  if (!always && s.arch != "llama") throw Error("synth: --experts is for qwen3moe, gpt-oss and llama (Mixtral)");
  if (s.experts_used == 0) s.experts_used = std::min(2, s.experts);
  if (s.experts_used > s.experts) throw Error("synth: --experts-used must be at most --experts");
  if (s.expert_ffn == 0) s.expert_ffn = s.ffn;
  // llama.cpp's llama reads no expert width: its experts are feed_forward_length wide.
  if (s.arch == "llama" && s.expert_ffn != s.ffn) throw Error("synth: llama's experts are --ffn wide (no --expert-ffn)");
}

// deepseek2's latent attention, as llama.cpp's converter writes it (attn_kv_b split per
// head into attn_k_b and attn_v_b) and its dense leading layers, shared experts and gating.
void resolve_deepseek2(SynthShape& s) {
  const bool deepseek2 = s.arch == "deepseek2";
  if (!deepseek2) {
    if (s.q_lora + s.kv_lora + s.rope_dim + s.value_dim + s.shared_experts + s.dense_layers + s.expert_groups +
                s.expert_groups_used != 0 ||
        s.gating != "softmax") {
      throw Error("synth: --q-lora-rank, --kv-lora-rank, --rope-dim, --value-dim, --shared-experts, --dense-layers, "
                  "--expert-groups, --expert-groups-used and --gating are deepseek2's");
    }
    return;
  }
  // llama.cpp reads attn_q (no q_lora) only for DeepSeek-V2-Lite's 27 layers (and 26).
  if (s.q_lora <= 0 && s.layers != 27 && s.layers != 26) throw Error("synth: deepseek2 needs --q-lora-rank");
  if (s.kv_lora <= 0 || s.rope_dim <= 0 || s.rope_dim % 2 != 0) {
    throw Error("synth: deepseek2 needs --kv-lora-rank and an even --rope-dim");
  }
  if (s.head_dim <= s.rope_dim) throw Error("synth: deepseek2's --head-dim (no-RoPE part + --rope-dim) must exceed --rope-dim");
  if (s.value_dim == 0) s.value_dim = s.head_dim - s.rope_dim;
  if (s.dense_layers > s.layers) throw Error("synth: --dense-layers exceeds --layers");
  if (s.gating != "softmax" && s.gating != "sigmoid") throw Error("synth: --gating must be softmax or sigmoid");
  if ((s.expert_groups > 0) != (s.expert_groups_used > 0) ||
      (s.expert_groups > 0 && (s.expert_groups < 2 || s.experts % s.expert_groups != 0 ||
                               s.expert_groups_used >= s.expert_groups ||
                               s.expert_groups_used * (s.experts / s.expert_groups) < s.experts_used))) {
    throw Error("synth: --expert-groups (dividing --experts) and --expert-groups-used (fewer, holding --experts-used "
                "experts) go together");
  }
  s.kv_heads = s.heads;  // unused: the file has one kv head, the latent
}

// deepseek2's attention tensors of a layer.
void add_mla(std::vector<TensorPlan>& plan, const std::string& p, const SynthShape& s) {
  const int64_t q_dim = int64_t{s.heads} * s.head_dim, nope = s.head_dim - s.rope_dim;
  if (s.q_lora > 0) {
    plan.push_back(matrix(p + "attn_q_a.weight", s.dim, s.q_lora));
    plan.push_back(norm(p + "attn_q_a_norm.weight", s.q_lora));
    plan.push_back(matrix(p + "attn_q_b.weight", s.q_lora, q_dim));
  } else {
    plan.push_back(matrix(p + "attn_q.weight", s.dim, q_dim));
  }
  plan.push_back(matrix(p + "attn_kv_a_mqa.weight", s.dim, int64_t{s.kv_lora} + s.rope_dim));
  plan.push_back(norm(p + "attn_kv_a_norm.weight", s.kv_lora));
  plan.push_back(experts(p + "attn_k_b.weight", nope, s.kv_lora, s.heads));
  plan.push_back(experts(p + "attn_v_b.weight", s.kv_lora, s.value_dim, s.heads));
  plan.push_back(matrix(p + "attn_output.weight", int64_t{s.heads} * s.value_dim, s.dim));
}

// LongRoPE's factors, rising over the pairs as Phi-3's do: the short ones to 1.5, the
// long ones to the context's extension factor.
std::vector<TensorPlan> longrope_factors(const SynthShape& s) {
  const int64_t n = s.head_dim / 2;
  const float extension = float(s.ctx) / float(s.rope_orig_ctx);
  TensorPlan lng{"rope_factors_long.weight", {n}}, shrt{"rope_factors_short.weight", {n}};
  for (int64_t i = 0; i < n; ++i) {
    const float t = n > 1 ? float(i) / float(n - 1) : 0.0f;
    lng.values.push_back(1.0f + (extension - 1.0f) * t * t);
    shrt.values.push_back(1.0f + 0.5f * t);
  }
  return {lng, shrt};
}

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
  if (s.rope_scaling != "none" && s.rope_scaling != "linear" && s.rope_scaling != "longrope" && s.rope_scaling != "yarn") {
    throw Error("synth: --rope-scaling must be none, linear, yarn or longrope, not '" + s.rope_scaling + "'");
  }
  const bool yarn = s.rope_scaling == "yarn";
  if ((s.rope_scaling == "linear" || yarn) != (s.rope_scale > 0)) {
    throw Error("synth: --rope-scaling linear or yarn and --rope-scale go together");
  }
  if ((s.rope_scaling == "longrope" || yarn) != (s.rope_orig_ctx > 0)) {
    throw Error("synth: --rope-scaling longrope or yarn and --rope-orig-ctx go together");
  }
  if ((s.rope_scaling == "longrope") != a.phi3 && s.rope_scaling != "none" && s.rope_scaling != "linear") {
    throw Error("synth: phi3 takes --rope-scaling longrope, the others yarn");
  }
  if (s.rope_orig_ctx >= s.ctx) throw Error("synth: --rope-orig-ctx must be below --ctx");
  if (a.phi3 && s.head_dim * s.heads != s.dim) throw Error("synth: phi3 needs --heads x the head size = --dim");
  if (a.gemma && s.sliding_window == 0) s.sliding_window = kGemmaWindow;
  if (a.gpt_oss && s.sliding_window == 0) s.sliding_window = kGptOssWindow;
  if (!a.gemma && !a.phi3 && !a.gpt_oss && s.sliding_window != 0) {
    throw Error("synth: --sliding-window is for gemma3, phi3 and gpt-oss (" + std::string(a.name) + " has none here)");
  }
  if (s.pooling != "none" && s.pooling != "mean" && s.pooling != "cls" && s.pooling != "last") {
    throw Error("synth: --pooling must be none, mean, cls or last, not '" + s.pooling + "'");
  }
  resolve_experts(s);
  resolve_deepseek2(s);
  if (s.outlier_dims < 0 || s.outlier_dims > s.dim || (s.outlier_dims > 0) != (s.outlier_gain > 0)) {
    throw Error("synth: --outlier-dims (at most --dim) and --outlier-gain go together");
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
  if (s.rope_scaling == "longrope") {
    for (TensorPlan& t : longrope_factors(s)) plan.push_back(std::move(t));
  }
  for (int32_t i = 0; i < s.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    plan.push_back(input_norm(p + "attn_norm.weight", s));
    if (a.deepseek2) {
      add_mla(plan, p, s);
      plan.push_back(input_norm(p + "ffn_norm.weight", s));
      add_ffn(plan, p, s, a, i);
      continue;
    }
    if (a.phi3) {
      plan.push_back(matrix(p + "attn_qkv.weight", s.dim, q_dim + 2 * kv_dim));
    } else {
      plan.push_back(matrix(p + "attn_q.weight", s.dim, q_dim));
      plan.push_back(matrix(p + "attn_k.weight", s.dim, kv_dim));
      plan.push_back(matrix(p + "attn_v.weight", s.dim, kv_dim));
    }
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
    if (a.gpt_oss) {  // its feed-forward norm is named post_attention_norm
      plan.push_back({p + "attn_output.bias", {s.dim}, kBiasStd});
      plan.push_back({p + "attn_sinks.weight", {s.heads}, kSinkStd});
      plan.push_back(norm(p + "post_attention_norm.weight", s.dim));
    } else {
      if (a.gemma) plan.push_back({p + "post_attention_norm.weight", {s.dim}, 0.0f, post_norm});
      plan.push_back(input_norm(p + "ffn_norm.weight", s));
    }
    add_ffn(plan, p, s, a, i);
    if (a.gemma) plan.push_back({p + "post_ffw_norm.weight", {s.dim}, 0.0f, post_norm});
  }
  // Tied, the embedding takes the head's spread (its own scale does not matter, as every
  // layer normalizes its input), and the final norm's weights are N(0, 1): with weights of
  // 1 each token's logit would carry its own embedding's squared norm (64) from the
  // residual stream, and greedy decoding would repeat the last token; random signs
  // cancel that term and leave the logits' spread at 8.
  plan.push_back(s.tied ? TensorPlan{"output_norm.weight", {s.dim}, 1.0f} : norm("output_norm.weight", s.dim));
  if (!s.tied) {
    plan.push_back({"output.weight", {s.dim, s.vocab}, head_std});
  }
  return plan;
}

namespace {

// As llama.cpp's DeepseekV2Model converter writes them: one kv head whose key is the latent
// and the RoPE key and whose value the latent; the heads' sizes as *_mla; yarn's
// log multiplier as 0.1 mscale_all_dim (DeepSeek-V3's 1).
void add_deepseek2_hparams(GgufWriter& w, const SynthShape& s) {
  const std::string p = s.arch + ".";
  const auto u32 = [](int32_t v) { return static_cast<uint32_t>(v); };
  w.add_u32(p + "leading_dense_block_count", u32(s.dense_layers));
  if (s.q_lora > 0) w.add_u32(p + "attention.q_lora_rank", u32(s.q_lora));
  w.add_u32(p + "attention.kv_lora_rank", u32(s.kv_lora));
  w.add_u32(p + "attention.key_length", u32(s.kv_lora + s.rope_dim));
  w.add_u32(p + "attention.value_length", u32(s.kv_lora));
  w.add_u32(p + "attention.key_length_mla", u32(s.head_dim));
  w.add_u32(p + "attention.value_length_mla", u32(s.value_dim));
  w.add_u32(p + "expert_shared_count", u32(s.shared_experts));
  const bool v3 = s.gating == "sigmoid";
  w.add_f32(p + "expert_weights_scale", v3 ? kDeepseekV3Scale : 1.0f);
  if (v3) w.add_bool(p + "expert_weights_norm", true);
  w.add_u32(p + "expert_gating_func", v3 ? 2 : 1);
  if (s.rope_scaling == "yarn") w.add_f32(p + "rope.scaling.yarn_log_multiplier", 0.1f);
  if (s.expert_groups > 0) {
    w.add_u32(p + "expert_group_count", u32(s.expert_groups));
    w.add_u32(p + "expert_group_used_count", u32(s.expert_groups_used));
  }
}

}  // namespace

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
  w.add_u32(p + "attention.head_count_kv", u32(a.deepseek2 ? 1 : s.kv_heads));
  if (!a.deepseek2 && (s.head_dim * s.heads != s.dim || a.qk_norm || a.gpt_oss)) {
    w.add_u32(p + "attention.key_length", u32(s.head_dim));
    w.add_u32(p + "attention.value_length", u32(s.head_dim));
  }
  w.add_u32(p + "rope.dimension_count", u32(a.deepseek2 ? s.rope_dim : s.head_dim));
  w.add_f32(p + "rope.freq_base", s.rope_base);
  if (s.rope_scaling == "linear" || s.rope_scaling == "yarn") {  // as the converter writes them
    w.add_string(p + "rope.scaling.type", s.rope_scaling);
    w.add_f32(p + "rope.scaling.factor", s.rope_scale);
    if (s.rope_scaling == "yarn") w.add_u32(p + "rope.scaling.original_context_length", u32(s.rope_orig_ctx));
  }
  if (s.sliding_window > 0) w.add_u32(p + "attention.sliding_window", u32(s.sliding_window));
  if (a.phi3) {  // as llama.cpp's converter: the original context always, LongRoPE's mscale
    w.add_u32(p + "rope.scaling.original_context_length", u32(s.rope_orig_ctx > 0 ? s.rope_orig_ctx : s.ctx));
    if (s.rope_orig_ctx > 0) {
      const double scale = double(s.ctx) / s.rope_orig_ctx;
      w.add_f32(p + "rope.scaling.attn_factor", float(std::sqrt(1 + std::log(scale) / std::log(double(s.rope_orig_ctx)))));
    }
  }
  if (s.experts > 0) {
    w.add_u32(p + "expert_count", u32(s.experts));
    w.add_u32(p + "expert_used_count", u32(s.experts_used));
    if (s.arch != "llama") w.add_u32(p + "expert_feed_forward_length", u32(s.expert_ffn));
  }
  if (a.deepseek2) add_deepseek2_hparams(w, s);
  if (s.pooling != "none") {  // llama_pooling_type's numbers
    w.add_u32(p + "pooling_type", s.pooling == "mean" ? 1 : s.pooling == "cls" ? 2 : 3);
  }
  w.add_f32(p + "attention.layer_norm_rms_epsilon", a.rms_eps);
  w.add_u32(p + "vocab_size", u32(s.vocab));
}

}  // namespace tsr::app
