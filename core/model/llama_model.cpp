#include "core/model/llama_model.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "base/error.h"
#include "core/quant/quant.h"
#include "quant_formats/float_convert.h"
#include "core/plugin_host/tensor.h"

namespace tsr {

namespace {

struct ArchInfo {
  const char* name;
  tsr_rope_mode rope_mode;
  bool qkv_bias, qk_norm;
  bool gemma;  // GeGLU, post-norms, sqrt(n_embd) embedding scale, sliding-window layers
  bool phi3;   // gate and up in one ffn_up, LongRoPE
  bool gpt_oss;  // sinks, biases, alternating sliding window, softmax-weighted experts, clamped SwiGLU
  bool eagle3;   // an EAGLE-3 head: one layer over [token embedding | projected target features]
  bool deepseek2 = false;  // multi-head latent attention, dense leading layers, shared experts
};

// Architectures whose GGUF tensors follow llama's names and layout, with what each adds
// to it (llama.cpp's llm_build_llama, llm_build_qwen2, llm_build_qwen3, llama_model_qwen3moe,
// llm_build_gemma3, llama_model_phi3, llama_model_openai_moe, llm_build_deepseek2). Any of them may
// have experts (expert_count); qwen3moe, gpt-oss and deepseek2 must.
constexpr ArchInfo kArchs[] = {
    {"llama", TSR_ROPE_NORMAL, false, false, false, false, false, false},
    {"qwen2", TSR_ROPE_NEOX, true, false, false, false, false, false},
    {"qwen3", TSR_ROPE_NEOX, false, true, false, false, false, false},
    {"qwen3moe", TSR_ROPE_NEOX, false, true, false, false, false, false},
    {"gemma3", TSR_ROPE_NEOX, false, true, true, false, false, false},
    {"phi3", TSR_ROPE_NEOX, false, false, false, true, false, false},
    {"gpt-oss", TSR_ROPE_NEOX, true, false, false, false, true, false},
    {"eagle3", TSR_ROPE_NORMAL, false, false, false, false, false, true},
    {"deepseek2", TSR_ROPE_NORMAL, false, false, false, false, false, false, true},
};

const ArchInfo& find_arch(const std::string& arch) {
  for (const ArchInfo& a : kArchs) {
    if (arch == a.name) return a;
  }
  std::string supported;
  for (const ArchInfo& a : kArchs) {
    if (!a.eagle3) supported += (supported.empty() ? "" : ", ") + std::string(a.name);
  }
  throw Error("model architecture '" + arch + "' is not supported (supported: " + supported +
                  "; eagle3 heads as drafts beside a target)",
              TSR_STATUS_UNSUPPORTED);
}

int32_t required_int(const GgufFile& g, const std::string& key, int64_t min_value) {
  std::optional<int64_t> v = g.get_int(key);
  if (!v) throw Error(g.path() + ": missing metadata key " + key);
  if (*v < min_value || *v > INT32_MAX) {
    throw Error(g.path() + ": " + key + " = " + std::to_string(*v) + " is out of range");
  }
  return static_cast<int32_t>(*v);
}

std::optional<tsr_dtype> dtype_of(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return TSR_DTYPE_F32;
    case GgmlType::F16: return TSR_DTYPE_F16;
    case GgmlType::BF16: return TSR_DTYPE_BF16;
    case GgmlType::Q8_0: return TSR_DTYPE_Q8_0;
    case GgmlType::Q4_0: return TSR_DTYPE_Q4_0;
    case GgmlType::Q4_1: return TSR_DTYPE_Q4_1;
    case GgmlType::Q5_0: return TSR_DTYPE_Q5_0;
    case GgmlType::Q5_1: return TSR_DTYPE_Q5_1;
    case GgmlType::Q2_K: return TSR_DTYPE_Q2_K;
    case GgmlType::Q3_K: return TSR_DTYPE_Q3_K;
    case GgmlType::Q4_K: return TSR_DTYPE_Q4_K;
    case GgmlType::Q5_K: return TSR_DTYPE_Q5_K;
    case GgmlType::Q6_K: return TSR_DTYPE_Q6_K;
    case GgmlType::IQ4_NL: return TSR_DTYPE_IQ4_NL;
    case GgmlType::IQ4_XS: return TSR_DTYPE_IQ4_XS;
    case GgmlType::MXFP4: return TSR_DTYPE_MXFP4;
    default: return std::nullopt;
  }
}

// Gemma 3 as llama.cpp runs it (llama_model::load_hparams, LLM_ARCH_GEMMA3): every sixth
// layer global with the file's RoPE base and scaling, the others local over the file's
// window with base 10000 unscaled; 27B (62 layers) scales attention by the embedding per
// head rather than the head size, as Google's reference does.
void read_gemma3(const GgufFile& g, LlamaHParams& hp) {
  hp.gelu_ffn = true;
  hp.post_norms = true;
  hp.embd_scale = std::sqrt(float(hp.n_embd));
  hp.n_swa = required_int(g, hp.arch + ".attention.sliding_window", 1);
  hp.swa_pattern = 6;
  hp.rope_freq_base_swa = 10000.0f;
  hp.rope_freq_scale_swa = 1.0f;
  if (hp.n_layer == 62) hp.attn_scale = 1.0f / std::sqrt(float(hp.n_embd / hp.n_head));
}

// Phi-3 as llama.cpp runs it (llama_model_phi3): its sliding window is ignored, as
// llama.cpp ignores it (a Phi-3 mini file says 2047), so that both give the same tokens.
void read_phi3(const GgufFile& g, LlamaHParams& hp) {
  hp.fused_gate_up = true;
  if (g.get_int(hp.arch + ".attention.sliding_window").value_or(0) > 0) {
    spdlog::warn("{}: phi3's attention.sliding_window is ignored, as llama.cpp ignores it", g.path());
  }
  if (hp.head_dim * hp.n_head != hp.n_embd) {
    throw Error(g.path() + ": phi3 needs head_count x head size = embedding_length", TSR_STATUS_UNSUPPORTED);
  }
}

// gpt-oss as llama.cpp runs it (llama_model_openai_moe): every second layer (the
// file's sliding_window_pattern, else 2) attends over the window, all with the same RoPE
// base and scaling (YaRN in the released files) unless the file gives the local layers a
// base; attention sinks and an output bias; the router's raw logits pick the experts and
// the softmax of the chosen ones weights them; biases after the router and each expert
// matmul; the clamped SwiGLU.
void read_gpt_oss(const GgufFile& g, LlamaHParams& hp) {
  const std::string a = hp.arch + ".";
  hp.n_swa = required_int(g, a + "attention.sliding_window", 1);
  hp.swa_pattern = g.get_int(a + "attention.sliding_window_pattern")
                       ? required_int(g, a + "attention.sliding_window_pattern", 1)
                       : 2;
  hp.rope_freq_base_swa = static_cast<float>(g.get_float(a + "rope.freq_base_swa").value_or(hp.rope_freq_base));
  if (!std::isfinite(hp.rope_freq_base_swa) || hp.rope_freq_base_swa <= 0) {
    throw Error(g.path() + ": " + a + "rope.freq_base_swa must be a finite number > 0");
  }
  hp.rope_freq_scale_swa = hp.rope_freq_scale;
  hp.attn_sinks = hp.attn_out_bias = true;
  hp.moe_weight_softmax = hp.moe_biases = hp.swiglu_oai = true;
  hp.moe_norm_w = false;
}

// DeepSeek-V2/V3 as llama.cpp runs them (llm_build_deepseek2, its MLA path). Its converter
// writes MLA files as one kv head of key_length = kv_lora_rank + the RoPE dims and
// value_length = kv_lora_rank (what the cache holds), and the heads' own sizes as
// key_length_mla and value_length_mla; a file converted before that (attn_kv_b, no
// key_length_mla) is refused, as llama.cpp now runs those through another graph.
void read_deepseek2_attention(const GgufFile& g, LlamaHParams& hp) {
  const std::string a = hp.arch + ".";
  hp.n_lora_kv = required_int(g, a + "attention.kv_lora_rank", 1);
  hp.n_lora_q = g.get_int(a + "attention.q_lora_rank").value_or(0) > 0 ? required_int(g, a + "attention.q_lora_rank", 1) : 0;
  if (!g.get_int(a + "attention.key_length_mla") || !g.get_int(a + "attention.value_length_mla")) {
    throw Error(g.path() + ": deepseek2 without attention.key_length_mla (converted before llama.cpp's MLA files, "
                "with attn_kv_b) is not supported: convert it again with a current convert_hf_to_gguf.py",
                TSR_STATUS_UNSUPPORTED);
  }
  hp.head_dim_qk = required_int(g, a + "attention.key_length_mla", 1);
  hp.head_dim_v = required_int(g, a + "attention.value_length_mla", 1);
  const int64_t value_length = g.get_int(a + "attention.value_length").value_or(hp.head_dim);
  if (hp.n_head_kv != 1 || hp.head_dim != hp.n_lora_kv + hp.n_rot || value_length != hp.n_lora_kv) {
    throw Error(g.path() + ": deepseek2's MLA needs head_count_kv 1, key_length = kv_lora_rank + rope.dimension_count "
                "and value_length = kv_lora_rank");
  }
  if (hp.head_dim_qk <= hp.n_rot) throw Error(g.path() + ": deepseek2's key_length_mla must exceed rope.dimension_count");
}

// Its feed-forward: dense leading layers, then experts with shared ones; the router's
// gating function (1 softmax, the default of older files; 2 sigmoid), and the weights'
// renormalization and scale.
void read_deepseek2_experts(const GgufFile& g, LlamaHParams& hp) {
  const std::string a = hp.arch + ".";
  hp.n_layer_dense_lead = g.get_int(a + "leading_dense_block_count") ? required_int(g, a + "leading_dense_block_count", 0) : 0;
  if (hp.n_layer_dense_lead > hp.n_layer) throw Error(g.path() + ": leading_dense_block_count exceeds block_count");
  hp.n_expert_shared = required_int(g, a + "expert_shared_count", 0);
  if (int64_t(hp.n_expert_shared) * hp.n_ff_exp > INT32_MAX) throw Error(g.path() + ": the shared experts are too wide");
  const double scale = g.get_float(a + "expert_weights_scale").value_or(0.0);
  if (!std::isfinite(scale) || scale < 0) throw Error(g.path() + ": " + a + "expert_weights_scale must be finite and >= 0");
  hp.moe_w_scale = static_cast<float>(scale);
  hp.moe_norm_w = g.get_bool(a + "expert_weights_norm").value_or(false);
  const int64_t gating = g.get_int(a + "expert_gating_func").value_or(0);
  if (gating < 0 || gating > 2) {
    throw Error(g.path() + ": " + a + "expert_gating_func = " + std::to_string(gating) + " (1 softmax, 2 sigmoid)",
                TSR_STATUS_UNSUPPORTED);
  }
  hp.moe_sigmoid = gating == 2;
}

// The attention scale and RoPE's cos/sin factor of deepseek2, float for float as llama.cpp
// computes them (llama_context's yarn_attn_factor, then llm_build_deepseek2's kq_scale).
// Under YaRN the RoPE factor cancels the backend's YaRN term 1 + 0.1 ln(factor), and the
// logits' scale takes DeepSeek's mscale (1 + 0.1 mscale_all_dim ln(factor)) squared; the
// file's yarn_log_multiplier is 0.1 mscale_all_dim.
float yarn_mscale(float factor, float mscale) { return factor <= 1.0f ? 1.0f : 0.1f * mscale * std::log(factor) + 1.0f; }

void deepseek2_scales(const GgufFile& g, LlamaHParams& hp) {
  const float log_mul = static_cast<float>(g.get_float(hp.arch + ".rope.scaling.yarn_log_multiplier").value_or(0.0)) / 0.1f;
  const float factor = 1.0f / hp.rope_freq_scale;
  float rope_factor = 1.0f;
  if (hp.rope_ext_factor != 0.0f) {
    // llama.cpp takes HF's mscale as 1, or as mscale_all_dim for DeepSeek-V2's configs.
    const float mscale = log_mul != 1.0f ? log_mul : 1.0f;
    rope_factor = log_mul != 0.0f ? yarn_mscale(factor, mscale) / yarn_mscale(factor, log_mul) : yarn_mscale(factor, 1.0f);
    rope_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
  }
  rope_factor *= hp.rope_attn_factor;
  hp.rope_attn_factor = rope_factor;
  const float original = rope_factor * (1.0f + 0.1f * std::log(1.0f / hp.rope_freq_scale));
  const float mscale = original * (1.0f + 0.1f * log_mul * std::log(1.0f / hp.rope_freq_scale));
  hp.attn_scale = 1.0f * mscale * mscale / std::sqrt(float(hp.head_dim_qk));
}

// YaRN as llama.cpp runs it: ext_factor 1, betas 32 and 1 unless the file says, cos and
// sin scaled by 1 + 0.1 ln(factor) (the backend's YaRN term) times rope.scaling.attn_factor.
// DeepSeek's log multiplier (deepseek2 only) moves that scale into the attention's, below.
template <class Positive>
void read_yarn(const GgufFile& g, LlamaHParams& hp, const Positive& positive) {
  const std::string a = hp.arch + ".";
  hp.rope_ext_factor = 1.0f;
  hp.yarn_beta_fast = static_cast<float>(positive(a + "rope.scaling.yarn_beta_fast", 32.0));
  hp.yarn_beta_slow = static_cast<float>(positive(a + "rope.scaling.yarn_beta_slow", 1.0));
  if (hp.arch != "deepseek2" && g.get_float(a + "rope.scaling.yarn_log_multiplier").value_or(0.0) != 0.0) {
    throw Error(g.path() + ": rope.scaling.yarn_log_multiplier (DeepSeek's YaRN scale) is for deepseek2 only",
                TSR_STATUS_UNSUPPORTED);
  }
}

// Expert groups as llama.cpp reads them for every architecture: expert_group_count > 1
// groups dividing the experts, of which 0 < expert_group_used_count < the count are used,
// holding at least the experts a token uses.
void read_expert_groups(const GgufFile& g, LlamaHParams& hp) {
  const std::string a = hp.arch + ".";
  const int64_t groups = g.get_int(a + "expert_group_count").value_or(0);
  if (groups <= 1) return;
  const int64_t used = g.get_int(a + "expert_group_used_count").value_or(0);
  if (groups > hp.n_expert || hp.n_expert % groups != 0 || used <= 0 || used >= groups ||
      used * (hp.n_expert / groups) < hp.n_expert_used) {
    throw Error(g.path() + ": " + a + "expert_group_count " + std::to_string(groups) + " and expert_group_used_count " +
                std::to_string(used) + " must divide the " + std::to_string(hp.n_expert) +
                " experts into groups, use fewer than all, and hold the experts a token uses");
  }
  hp.n_expert_groups = static_cast<int32_t>(groups);
  hp.n_group_used = static_cast<int32_t>(used);
}

// Experts as llama.cpp reads them: expert_count and expert_used_count, each expert
// expert_feed_forward_length wide (qwen3moe's default: feed_forward_length / experts used;
// Mixtral's llama: feed_forward_length).
void read_experts(const GgufFile& g, LlamaHParams& hp) {
  const std::string a = hp.arch + ".";
  hp.n_expert = g.get_int(a + "expert_count").value_or(0) > 0 ? required_int(g, a + "expert_count", 1) : 0;
  if (hp.n_expert == 0) {
    if (hp.arch == "qwen3moe" || hp.arch == "gpt-oss" || hp.arch == "deepseek2") {
      throw Error(g.path() + ": " + hp.arch + " needs " + a + "expert_count > 0");
    }
    return;
  }
  hp.n_expert_used = required_int(g, a + "expert_used_count", 1);
  if (hp.n_expert_used > hp.n_expert) {
    throw Error(g.path() + ": " + a + "expert_used_count exceeds expert_count");
  }
  const int32_t fallback = hp.arch == "qwen3moe" ? hp.n_ff / hp.n_expert_used : hp.n_ff;
  hp.n_ff_exp = g.get_int(a + "expert_feed_forward_length") ? required_int(g, a + "expert_feed_forward_length", 1)
                                                            : fallback;
  if (hp.n_ff_exp <= 0) throw Error(g.path() + ": the experts' feed-forward width is 0");
  read_expert_groups(g, hp);
}

// An EAGLE-3 head's keys: its target layers (eagle3.extract_layers, a few converters
// write eagle3.target_layers; absent: llama.cpp's default of 2, n/2 and n - 3 of the
// target, which LlamaModel::load fills in), the target's width, and where the residual
// around attention starts. Its output vocabulary is d2t's (a reduced one), else its
// output matrix's, else its embeddings', else the target's (0 here until load).
void read_eagle3(const GgufFile& g, LlamaHParams& hp) {
  const std::string a = hp.arch + ".";
  hp.eagle3_layers = g.get_i32_array(a + "extract_layers")
                         .value_or(g.get_i32_array(a + "target_layers").value_or(std::vector<int32_t>{}));
  if (hp.eagle3_layers.size() > 8) throw Error(g.path() + ": " + a + "extract_layers names more than 8 layers");
  for (const int32_t l : hp.eagle3_layers) {
    if (l < 0) throw Error(g.path() + ": " + a + "extract_layers holds a negative layer");
  }
  const int32_t target_width =
      g.get_int(a + "target_hidden_size") ? required_int(g, a + "target_hidden_size", 1) : hp.n_embd;
  const size_t layers = hp.eagle3_layers.empty() ? 3 : hp.eagle3_layers.size();
  hp.eagle3_features = static_cast<int32_t>(layers) * target_width;
  hp.eagle3_norm_before_residual = g.get_bool(a + "norm_before_residual").value_or(false);
  if (hp.n_layer != 1) throw Error(g.path() + ": an eagle3 head must have one layer (block_count 1)", TSR_STATUS_UNSUPPORTED);
  for (const char* name : {"d2t.weight", "d2t", "output.weight", "token_embd.weight"}) {
    if (const GgufTensorInfo* t = g.find_tensor(name); t != nullptr && !t->ne.empty() && t->ne.back() <= INT32_MAX) {
      hp.n_vocab = static_cast<int32_t>(std::string(name).starts_with("d2t") ? t->ne[0] : t->ne.back());
      return;
    }
  }
}

// {arch}.pooling_type as llama.cpp numbers it (llama_pooling_type); see Pooling.
Pooling read_pooling(const GgufFile& g, const std::string& key) {
  const std::optional<int64_t> v = g.get_int(key);
  switch (v.value_or(0)) {
    case 0: case 3: return Pooling::LAST;
    case 1: return Pooling::MEAN;
    case 2: return Pooling::CLS;
    case 4: return Pooling::RANK;
    default: throw Error(g.path() + ": " + key + " = " + std::to_string(*v) + " is not a pooling type (0-4)");
  }
}

}  // namespace

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::LAST: return "last";
    case Pooling::MEAN: return "mean";
    case Pooling::CLS: return "cls";
    case Pooling::RANK: return "rank";
  }
  return "?";
}

LlamaHParams llama_hparams_from_gguf(const GgufFile& g) {
  LlamaHParams hp;
  hp.arch = g.get_string("general.architecture").value_or("");
  if (hp.arch.empty()) throw Error(g.path() + ": missing general.architecture");
  const ArchInfo& arch = find_arch(hp.arch);
  hp.rope_mode = arch.rope_mode;
  hp.qkv_bias = arch.qkv_bias;
  hp.qk_norm = arch.qk_norm;
  const std::string a = hp.arch + ".";
  hp.n_ctx_train = required_int(g, a + "context_length", 1);
  hp.n_embd = required_int(g, a + "embedding_length", 1);
  hp.n_layer = required_int(g, a + "block_count", 1);
  hp.n_ff = required_int(g, a + "feed_forward_length", 1);
  hp.n_head = required_int(g, a + "attention.head_count", 1);
  hp.n_head_kv = g.get_int(a + "attention.head_count_kv") ? required_int(g, a + "attention.head_count_kv", 1)
                                                          : hp.n_head;
  if (hp.n_head % hp.n_head_kv != 0) throw Error(g.path() + ": head_count_kv does not divide head_count");
  if (g.get_int(a + "attention.key_length")) {
    // Qwen3 0.6B, say: 16 heads of 128 over an embedding of 1024.
    hp.head_dim = required_int(g, a + "attention.key_length", 2);
    if (!arch.deepseek2 && g.get_int(a + "attention.value_length").value_or(hp.head_dim) != hp.head_dim) {
      throw Error(g.path() + ": attention.value_length other than key_length is not supported",
                  TSR_STATUS_UNSUPPORTED);
    }
  } else {
    if (hp.n_embd % hp.n_head != 0) throw Error(g.path() + ": head_count does not divide embedding_length");
    hp.head_dim = hp.n_embd / hp.n_head;
  }
  hp.n_rot = g.get_int(a + "rope.dimension_count") ? required_int(g, a + "rope.dimension_count", 2)
                                                  : hp.head_dim;
  if (hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0) {
    throw Error(g.path() + ": rope.dimension_count must be even and at most the head size");
  }
  const auto positive = [&](const std::string& key, double fallback) {
    const double v = g.get_float(key).value_or(fallback);
    if (!std::isfinite(v) || v <= 0) throw Error(g.path() + ": " + key + " must be a finite number > 0");
    return v;
  };
  hp.rms_eps = static_cast<float>(positive(a + "attention.layer_norm_rms_epsilon", 1e-5));
  hp.rope_freq_base = static_cast<float>(positive(a + "rope.freq_base", 10000.0));
  // RoPE variants this engine does not compute are refused: running them as plain RoPE
  // would give other logits at every position, silently.
  const std::string scaling = g.get_string(a + "rope.scaling.type").value_or("none");
  if (scaling == "linear" || scaling == "yarn") {
    hp.rope_freq_scale = static_cast<float>(1.0 / positive(a + "rope.scaling.factor", 1.0));
  } else if (scaling != "none") {
    throw Error(g.path() + ": rope.scaling.type '" + scaling + "' is not supported (none, linear, yarn)",
                TSR_STATUS_UNSUPPORTED);
  }
  if (scaling == "yarn") read_yarn(g, hp, positive);
  hp.rope_attn_factor = static_cast<float>(positive(a + "rope.scaling.attn_factor", 1.0));
  hp.n_ctx_orig = g.get_int(a + "rope.scaling.original_context_length")
                      ? required_int(g, a + "rope.scaling.original_context_length", 1)
                      : hp.n_ctx_train;
  hp.attn_scale = 1.0f / std::sqrt(float(hp.head_dim));
  if (arch.gemma) read_gemma3(g, hp);
  if (arch.phi3) read_phi3(g, hp);
  read_experts(g, hp);
  if (arch.gpt_oss) read_gpt_oss(g, hp);
  if (arch.deepseek2) {
    read_deepseek2_attention(g, hp);
    read_deepseek2_experts(g, hp);
    deepseek2_scales(g, hp);
  }
  hp.pooling = read_pooling(g, a + "pooling_type");
  if (arch.eagle3) {
    read_eagle3(g, hp);
    return hp;
  }
  const GgufTensorInfo* embd = g.find_tensor("token_embd.weight");
  if (embd == nullptr || embd->ne.size() != 2 || embd->ne[1] > INT32_MAX) {
    throw Error(g.path() + ": missing or malformed tensor token_embd.weight");
  }
  hp.n_vocab = static_cast<int32_t>(embd->ne[1]);
  return hp;
}

// Places the weights on the backend: one buffer spanning the file's tensor data (wrapped
// in place where the backend allows), plus f32 copies of norm vectors stored otherwise.
class LlamaModel::Loader {
 public:
  Loader(LlamaModel& m, Backend& b, const LoadProgress& progress, bool pack_weights)
      : m_(m), backend_(b), progress_(progress), pack_weights_(pack_weights) {}

  void run(const LlamaModel* target) {
    upload_data_region();
    if (m_.quant_) check_scheme_runs();
    if (m_.hparams_.eagle3()) return run_eagle3(target);
    const LlamaHParams& hp = m_.hparams_;
    if (hp.qkv_bias) require_op(TSR_OP_BIAS_ADD, "bias_add", "its attention biases");
    if (hp.gelu_ffn) require_op(TSR_OP_GELU_MUL, "gelu_mul", "its GeGLU feed-forward");
    if (hp.embd_scale != 1.0f) require_op(TSR_OP_SCALE, "scale", "its embedding scale");
    if (hp.n_swa > 0) require_attention_window();
    if (hp.attn_sinks) require_attention_sinks();
    if (hp.attn_out_bias || hp.moe_biases) require_op(TSR_OP_BIAS_ADD, "bias_add", "its biases");
    if (hp.swiglu_oai) require_op(TSR_OP_SWIGLU_OAI, "swiglu_oai", "its experts' clamped SwiGLU");
    if (hp.moe()) {
      for (const auto& [op, name] : {std::pair{TSR_OP_SOFTMAX, "softmax"}, {TSR_OP_TOP_K, "top_k"},
                                    {TSR_OP_MOE_COMBINE, "moe_combine"}}) {
        require_op(op, name, "its mixture-of-experts layers");
      }
    }
    if (hp.mla()) require_op(TSR_OP_SCALE, "scale", "the copies of its latent attention");
    if (hp.arch == "deepseek2" || hp.group_routing()) {
      require_op(TSR_OP_BIAS_ADD, "bias_add", "its experts' selection");
      require_op(TSR_OP_MATMUL_ID, "matmul_id", "its experts' selection");
    }
    m_.tok_embd_ = matrix("token_embd.weight", hp.n_vocab, hp.n_embd, TSR_OP_GET_ROWS);
    m_.output_norm_ = vector_f32("output_norm.weight", hp.n_embd);
    load_rope_factors();
    m_.output_ = m_.gguf_->find_tensor("output.weight")
                     ? matrix("output.weight", hp.n_vocab, hp.n_embd, TSR_OP_MATMUL)
                     : matrix("token_embd.weight", hp.n_vocab, hp.n_embd, TSR_OP_MATMUL);
    const int64_t q_dim = int64_t(hp.n_head) * hp.head_dim;
    const int64_t kv_dim = int64_t(hp.n_head_kv) * hp.head_dim;
    for (int i = 0; i < hp.n_layer; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      LlamaLayer l{};
      l.attn_norm = vector_f32(p + "attn_norm.weight", hp.n_embd);
      if (hp.mla()) {
        load_mla(p, l);
      } else if (m_.gguf_->find_tensor(p + "attn_qkv.weight")) {
        const auto qkv = matrices(p + "attn_qkv.weight", {q_dim, kv_dim, kv_dim}, hp.n_embd, TSR_OP_MATMUL);
        l.wq = qkv[0], l.wk = qkv[1], l.wv = qkv[2];
      } else {
        l.wq = matrix(p + "attn_q.weight", q_dim, hp.n_embd, TSR_OP_MATMUL);
        l.wk = matrix(p + "attn_k.weight", kv_dim, hp.n_embd, TSR_OP_MATMUL);
        l.wv = matrix(p + "attn_v.weight", kv_dim, hp.n_embd, TSR_OP_MATMUL);
      }
      l.wo = matrix(p + "attn_output.weight", hp.n_embd, hp.mla() ? int64_t(hp.n_head) * hp.head_dim_v : q_dim,
                    TSR_OP_MATMUL);
      if (hp.attn_out_bias) l.bo = vector_f32(p + "attn_output.bias", hp.n_embd);
      if (hp.attn_sinks) l.sinks = vector_f32(p + "attn_sinks.weight", hp.n_head);
      if (hp.qkv_bias) {
        l.bq = vector_f32(p + "attn_q.bias", q_dim);
        l.bk = vector_f32(p + "attn_k.bias", kv_dim);
        l.bv = vector_f32(p + "attn_v.bias", kv_dim);
      }
      if (hp.qk_norm) {
        l.q_norm = vector_f32(p + "attn_q_norm.weight", hp.head_dim);
        l.k_norm = vector_f32(p + "attn_k_norm.weight", hp.head_dim);
      }
      if (hp.post_norms) {
        l.attn_post_norm = vector_f32(p + "post_attention_norm.weight", hp.n_embd);
        l.ffn_post_norm = vector_f32(p + "post_ffw_norm.weight", hp.n_embd);
      }
      // gpt-oss names its feed-forward norm post_attention_norm (llama.cpp's attn_post_norm).
      l.ffn_norm = vector_f32(p + (hp.arch == "gpt-oss" ? "post_attention_norm.weight" : "ffn_norm.weight"), hp.n_embd);
      if (hp.layer_moe(i)) {
        l.ffn_gate_inp = matrix(p + "ffn_gate_inp.weight", hp.n_expert, hp.n_embd, TSR_OP_MATMUL);
        l.gate_exps = experts(p + "ffn_gate_exps.weight", hp.n_ff_exp, hp.n_embd);
        l.up_exps = experts(p + "ffn_up_exps.weight", hp.n_ff_exp, hp.n_embd);
        l.down_exps = experts(p + "ffn_down_exps.weight", hp.n_embd, hp.n_ff_exp);
        if (hp.moe_biases) {
          l.ffn_gate_inp_b = vector_f32(p + "ffn_gate_inp.bias", hp.n_expert);
          l.gate_exps_b = bias_rows(p + "ffn_gate_exps.bias", hp.n_ff_exp);
          l.up_exps_b = bias_rows(p + "ffn_up_exps.bias", hp.n_ff_exp);
          l.down_exps_b = bias_rows(p + "ffn_down_exps.bias", hp.n_embd);
        }
        load_deepseek_experts(p, l);
      } else if (hp.fused_gate_up) {  // the gate's rows first, as llama.cpp's ggml_swiglu splits them
        const auto gate_up = matrices(p + "ffn_up.weight", {hp.n_ff, hp.n_ff}, hp.n_embd, TSR_OP_MATMUL);
        l.w_gate = gate_up[0], l.w_up = gate_up[1];
      } else {
        l.w_gate = matrix(p + "ffn_gate.weight", hp.n_ff, hp.n_embd, TSR_OP_MATMUL);
        l.w_up = matrix(p + "ffn_up.weight", hp.n_ff, hp.n_embd, TSR_OP_MATMUL);
      }
      if (!hp.layer_moe(i)) l.w_down = matrix(p + "ffn_down.weight", hp.n_embd, hp.n_ff, TSR_OP_MATMUL);
      m_.layers_.push_back(l);
    }
    if (packed_ > 0) spdlog::info("backend '{}' packed {} weight tensors into its own layout", backend_.name(), packed_);
    log_conversions();
  }

 private:
  // deepseek2's latent attention (LlamaLayer's MLA tensors); attn_k_b and attn_v_b are
  // [n_head] stacks, read as one matrix per head.
  void load_mla(const std::string& p, LlamaLayer& l) {
    const LlamaHParams& hp = m_.hparams_;
    const int64_t q_dim = int64_t(hp.n_head) * hp.head_dim_qk, nope = hp.head_dim_qk - hp.n_rot;
    if (hp.n_lora_q > 0) {
      l.wq_a = matrix(p + "attn_q_a.weight", hp.n_lora_q, hp.n_embd, TSR_OP_MATMUL);
      l.q_a_norm = vector_f32(p + "attn_q_a_norm.weight", hp.n_lora_q);
      l.wq_b = matrix(p + "attn_q_b.weight", q_dim, hp.n_lora_q, TSR_OP_MATMUL);
    } else {
      l.wq = matrix(p + "attn_q.weight", q_dim, hp.n_embd, TSR_OP_MATMUL);
    }
    l.wkv_a = matrix(p + "attn_kv_a_mqa.weight", int64_t(hp.n_lora_kv) + hp.n_rot, hp.n_embd, TSR_OP_MATMUL);
    l.kv_a_norm = vector_f32(p + "attn_kv_a_norm.weight", hp.n_lora_kv);
    l.wk_b = matrices(p + "attn_k_b.weight", std::vector<int64_t>(size_t(hp.n_head), hp.n_lora_kv), nope,
                      TSR_OP_MATMUL, hp.n_head);
    l.wv_b = matrices(p + "attn_v_b.weight", std::vector<int64_t>(size_t(hp.n_head), hp.head_dim_v), hp.n_lora_kv,
                      TSR_OP_MATMUL, hp.n_head);
  }

  // DeepSeek's additions to an expert layer: the selection bias where the file has one
  // (V3), and the shared experts.
  void load_deepseek_experts(const std::string& p, LlamaLayer& l) {
    const LlamaHParams& hp = m_.hparams_;
    if (hp.arch != "deepseek2") return;
    if (m_.gguf_->find_tensor(p + "exp_probs_b.bias")) l.exp_probs_b = vector_f32(p + "exp_probs_b.bias", hp.n_expert);
    if (hp.n_expert_shared == 0) return;
    const int64_t shared = int64_t(hp.n_expert_shared) * hp.n_ff_exp;
    l.gate_shexp = matrix(p + "ffn_gate_shexp.weight", shared, hp.n_embd, TSR_OP_MATMUL);
    l.up_shexp = matrix(p + "ffn_up_shexp.weight", shared, hp.n_embd, TSR_OP_MATMUL);
    l.down_shexp = matrix(p + "ffn_down_shexp.weight", hp.n_embd, shared, TSR_OP_MATMUL);
  }

  void log_conversions() const {
    if (!m_.quant_) return;
    spdlog::info("quant {}: converted {} weight tensors ({:.1f} -> {:.1f} MiB), kept {} whose rows do not fit",
                 m_.quant_->name(), converted_, double(bytes_before_) / (1 << 20), double(bytes_after_) / (1 << 20),
                 kept_);
    if (m_.quant_->has_importance()) {
      spdlog::info("quant {}: {} of the {} converted weights quantized with their importance ([quant] imatrix)",
                   m_.quant_->name(), weighted_, converted_);
    }
  }

  // An EAGLE-3 head, as llama.cpp's llama_model_eagle3 reads it: fc (the target features
  // to n_embd), one layer whose q, k and v read [norm(embedding) | norm(features)] (2 n_embd
  // wide, blk.0.hidden_norm normalizing the features), and the output norm and matrix over
  // its vocabulary, with d2t mapping that vocabulary to the target's where it is reduced.
  // The embeddings are the target's (a head's own token_embd serves only a full-vocabulary
  // head), and so is the output matrix where the head has neither.
  void run_eagle3(const LlamaModel* target) {
    LlamaHParams& hp = m_.hparams_;
    const GgufFile& g = *m_.gguf_;
    if (target == nullptr) {
      throw Error(g.path() + " is an EAGLE-3 head, which runs beside its target model: give it as "
                  "[speculative] draft_model with method = \"eagle\"", TSR_STATUS_UNSUPPORTED);
    }
    const LlamaHParams& th = target->hparams();
    resolve_eagle3_layers(th);
    const GgufTensorInfo* d2t = g.find_tensor("d2t.weight") ? g.find_tensor("d2t.weight") : g.find_tensor("d2t");
    const bool own_embd = g.find_tensor("token_embd.weight") != nullptr && d2t == nullptr;
    if (hp.n_vocab == 0) hp.n_vocab = th.n_vocab;
    if (own_embd) {
      m_.tok_embd_ = matrix("token_embd.weight", th.n_vocab, hp.n_embd, TSR_OP_GET_ROWS);
    } else {
      require_same_width(th, "token embeddings");
      m_.tok_embd_ = target->tok_embd();
    }
    m_.output_norm_ = vector_f32("output_norm.weight", hp.n_embd);
    if (g.find_tensor("output.weight")) {
      m_.output_ = matrix("output.weight", hp.n_vocab, hp.n_embd, TSR_OP_MATMUL);
    } else if (own_embd) {
      m_.output_ = matrix("token_embd.weight", hp.n_vocab, hp.n_embd, TSR_OP_MATMUL);
    } else {
      require_same_width(th, "output matrix");
      if (hp.n_vocab != th.n_vocab) throw Error(g.path() + ": a head over a reduced vocabulary needs output.weight");
      m_.output_ = target->output();
    }
    if (d2t != nullptr) m_.target_tokens_ = target_ids(*d2t, th.n_vocab);
    m_.fc_ = matrix("fc.weight", hp.n_embd, hp.eagle3_features, TSR_OP_MATMUL);
    load_rope_factors();
    const int64_t q_dim = int64_t(hp.n_head) * hp.head_dim, kv_dim = int64_t(hp.n_head_kv) * hp.head_dim;
    LlamaLayer l{};
    l.attn_norm = vector_f32("blk.0.attn_norm.weight", hp.n_embd);
    l.hidden_norm = vector_f32("blk.0.hidden_norm.weight", hp.n_embd);
    l.wq = matrix("blk.0.attn_q.weight", q_dim, 2 * int64_t(hp.n_embd), TSR_OP_MATMUL);
    l.wk = matrix("blk.0.attn_k.weight", kv_dim, 2 * int64_t(hp.n_embd), TSR_OP_MATMUL);
    l.wv = matrix("blk.0.attn_v.weight", kv_dim, 2 * int64_t(hp.n_embd), TSR_OP_MATMUL);
    l.wo = matrix("blk.0.attn_output.weight", hp.n_embd, q_dim, TSR_OP_MATMUL);
    l.ffn_norm = vector_f32("blk.0.ffn_norm.weight", hp.n_embd);
    l.w_gate = matrix("blk.0.ffn_gate.weight", hp.n_ff, hp.n_embd, TSR_OP_MATMUL);
    l.w_up = matrix("blk.0.ffn_up.weight", hp.n_ff, hp.n_embd, TSR_OP_MATMUL);
    l.w_down = matrix("blk.0.ffn_down.weight", hp.n_embd, hp.n_ff, TSR_OP_MATMUL);
    m_.layers_.push_back(l);
    log_conversions();
  }

  // The target layers of the features: the file's, else llama.cpp's default (2, n/2 and
  // n - 3); strictly increasing (the draft ABI's order) and within the target.
  void resolve_eagle3_layers(const LlamaHParams& th) {
    LlamaHParams& hp = m_.hparams_;
    const std::string path = m_.gguf_->path();
    if (hp.eagle3_layers.empty()) hp.eagle3_layers = {2, th.n_layer / 2, th.n_layer - 3};
    for (size_t i = 0; i < hp.eagle3_layers.size(); ++i) {
      const int32_t l = hp.eagle3_layers[i];
      if (l < 0 || l > th.n_layer || (i > 0 && l <= hp.eagle3_layers[i - 1])) {
        throw Error(path + ": eagle3.extract_layers must be strictly increasing layers of the target (0 to " +
                        std::to_string(th.n_layer) + ")",
                    TSR_STATUS_UNSUPPORTED);
      }
    }
    if (hp.eagle3_features != int64_t(hp.eagle3_layers.size()) * th.n_embd) {
      throw Error(path + ": the head's features are " + std::to_string(hp.eagle3_features) + " wide, the target's " +
                      std::to_string(hp.eagle3_layers.size()) + " layers x " + std::to_string(th.n_embd),
                  TSR_STATUS_UNSUPPORTED);
    }
  }

  void require_same_width(const LlamaHParams& th, const char* what) const {
    if (th.n_embd == m_.hparams_.n_embd) return;
    throw Error(m_.gguf_->path() + ": the head reads the target's " + what + ", but its embedding_length " +
                    std::to_string(m_.hparams_.n_embd) + " differs from the target's " + std::to_string(th.n_embd),
                TSR_STATUS_UNSUPPORTED);
  }

  // d2t: the target id of each of the head's output ids (I64 or I32), each a target id.
  std::vector<int32_t> target_ids(const GgufTensorInfo& t, int32_t target_vocab) const {
    const int64_t n = m_.hparams_.n_vocab;
    const size_t width = t.type == GgmlType::I64 ? 8 : t.type == GgmlType::I32 ? 4 : 0;
    if (width == 0 || t.nelements != n) throw Error(t.name + " must be " + std::to_string(n) + " I64 or I32 ids");
    std::vector<int32_t> ids(static_cast<size_t>(n));
    const uint8_t* src = m_.gguf_->tensor_data(t);
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = 0;
      if (width == 8) {
        std::memcpy(&v, src + 8 * i, 8);
      } else {
        int32_t v32 = 0;
        std::memcpy(&v32, src + 4 * i, 4);
        v = v32;
      }
      if (v < 0 || v >= target_vocab) throw Error(t.name + " maps id " + std::to_string(i) + " outside the target's vocabulary");
      ids[size_t(i)] = static_cast<int32_t>(v);
    }
    return ids;
  }

  void upload_data_region() {
    const GgufFile& g = *m_.gguf_;
    if (g.tensors().empty()) throw Error(g.path() + ": the file has no tensors");
    uint64_t begin = UINT64_MAX, end = 0;
    for (const GgufTensorInfo& t : g.tensors()) {
      begin = std::min(begin, t.offset);
      end = std::max(end, t.offset + t.nbytes);
    }
    region_begin_ = begin;
    // The pointer of the tensor at the lowest offset is the start of the region.
    const GgufTensorInfo* first = &g.tensors().front();
    for (const GgufTensorInfo& t : g.tensors()) {
      if (t.offset == begin) first = &t;
    }
    auto* host = const_cast<uint8_t*>(g.tensor_data(*first));
    auto buffer = backend_.upload(host, end - begin, progress_);
    region_ = buffer.get();
    m_.weight_bytes_ = end - begin;
    m_.buffers_.push_back(std::move(buffer));
  }

  const GgufTensorInfo& info(const std::string& name) const {
    const GgufTensorInfo* t = m_.gguf_->find_tensor(name);
    if (t == nullptr) throw Error(m_.gguf_->path() + ": missing tensor " + name);
    return *t;
  }

  tsr_dtype dtype(const GgufTensorInfo& t) const {
    std::optional<tsr_dtype> d = dtype_of(t.type);
    if (!d) {
      auto traits = ggml_type_traits(static_cast<uint32_t>(t.type));
      throw Error("tensor " + t.name + " has type " + (traits ? traits->name : "unknown") +
                      ", which Tessera cannot compute with yet",
                  TSR_STATUS_UNSUPPORTED);
    }
    return *d;
  }

  // An op of ABI 2.0 the architecture needs: a plugin built for 1.x lacks it.
  void require_op(tsr_op op, const char* op_name, const char* what) const {
    if (backend_.supports(op, TSR_DTYPE_F32)) return;
    throw Error("architecture '" + m_.hparams_.arch + "' needs the " + op_name + " op for " + what +
                    ", which backend '" + backend_.name() + "' does not implement",
                TSR_STATUS_UNSUPPORTED);
  }

  // An optional param of an op (ABI 2.0) that the model needs, set in `probe`: `need`
  // says what needs it, for the refusal.
  template <class Params>
  void require_param(tsr_op op, const Params& probe, const std::string& need) const {
    const tsr_dtype f32 = TSR_DTYPE_F32;
    if (backend_.supports(op, {&f32, 1}, &probe)) return;
    throw Error(need + ", which backend '" + backend_.name() + "' does not implement", TSR_STATUS_UNSUPPORTED);
  }

  // Attention sinks (gpt-oss).
  void require_attention_sinks() const {
    const std::vector<float> zeros(size_t(m_.hparams_.n_head), 0.0f);
    const tsr_tensor sinks = tensor_make(TSR_DTYPE_F32, const_cast<float*>(zeros.data()), {m_.hparams_.n_head});
    tsr_attention_params probe{};
    probe.struct_size = sizeof(probe);
    probe.sinks = &sinks;
    require_param(TSR_OP_ATTENTION, probe, "architecture '" + m_.hparams_.arch + "' needs attention sinks");
  }

  // Sliding-window layers need attention's window.
  void require_attention_window() const {
    tsr_attention_params probe{};
    probe.struct_size = sizeof(probe);
    probe.window = m_.hparams_.n_swa;
    require_param(TSR_OP_ATTENTION, probe, "architecture '" + m_.hparams_.arch + "' needs sliding-window attention");
  }

  // The scheme runs on the backend's own kernels, or brings kernels for it, which then
  // become the backend's: the forward pass sees backend ops only.
  void check_scheme_runs() {
    const QuantScheme& q = *m_.quant_;
    if (backend_.supports(TSR_OP_MATMUL, q.dtype())) return;
    const tsr_quant_kernels* k = q.kernels(backend_.name(), backend_.props().host_visible != 0);
    if (k == nullptr) {
      throw Error("quant scheme '" + q.name() + "' cannot run on backend '" + backend_.name() +
                      "': the backend does not support its weights and the plugin has no kernels for it",
                  TSR_STATUS_UNSUPPORTED);
    }
    backend_.register_kernels(q.dtype(), *k, m_.quant_);
  }

  // A converted weight and the buffer that holds it.
  struct Converted {
    tsr_tensor tensor;
    std::unique_ptr<BackendBuffer> buffer;
  };

  // The weight converted to the quant scheme: dequantized from its stored type, then
  // quantized by the plugin into a buffer of its own.
  Converted quantized(const GgufTensorInfo& t, int64_t rows, int64_t cols) {
    const QuantScheme& q = *m_.quant_;
    const std::vector<float> values = quant::dequantize(t.type, {m_.gguf_->tensor_data(t), t.nbytes}, rows * cols);
    const int64_t row_bytes = q.row_bytes(cols);
    std::vector<uint8_t> packed(static_cast<size_t>(rows * row_bytes));
    quantize(t.name, values.data(), rows, cols, packed.data());
    auto buffer = backend_.alloc(packed.size());
    backend_.write(*buffer, 0, packed.data(), packed.size());
    tsr_tensor tensor{};
    if (dtype_is_gguf(q.dtype())) {
      tensor = tensor_make(q.dtype(), buffer->base(), {rows, cols});
    } else {
      tensor.struct_size = sizeof(tensor);
      tensor.dtype = q.dtype();
      tensor.ndim = 2;
      tensor.shape[0] = rows;
      tensor.shape[1] = cols;
      tensor.strides[0] = row_bytes;  // a plugin format's row layout is its own: only rows are addressed
      tensor.data = buffer->base();
    }
    ++converted_;
    bytes_before_ += t.nbytes;
    bytes_after_ += packed.size();
    m_.weight_bytes_ = m_.weight_bytes_ + packed.size() - std::min<uint64_t>(t.nbytes, m_.weight_bytes_);
    return {tensor, std::move(buffer)};
  }

  // Through the scheme, with the weight's column importance where [quant] imatrix has it: one
  // vector for all rows, or one per expert of a stack ([n_expert * rows, cols]).
  void quantize(const std::string& name, const float* x, int64_t rows, int64_t cols, uint8_t* out) {
    const QuantScheme& q = *m_.quant_;
    const std::vector<float>* importance = q.importance(name);
    const int64_t groups = importance ? int64_t(importance->size()) / cols : 1;
    if (importance && (int64_t(importance->size()) % cols != 0 || groups < 1 || rows % groups != 0)) {
      throw Error(fmt::format("[quant] imatrix: {} has {} importance values, not a multiple of its {} columns that "
                              "splits its {} rows", name, importance->size(), cols, rows));
    }
    const int64_t group_rows = rows / groups, row_bytes = q.row_bytes(cols);
    for (int64_t g = 0; g < groups; ++g) {
      q.quantize(x + g * group_rows * cols, group_rows, cols, out + g * group_rows * row_bytes,
                 importance ? importance->data() + g * cols : nullptr);
    }
    weighted_ += importance != nullptr;
  }

  // Matmul weights, and the embedding table where the backend gathers rows of the scheme
  // (as llama.cpp's quantize converts it too).
  bool converts(const GgufTensorInfo& t, int64_t cols, tsr_op op) {
    if (!m_.quant_ || dtype_of(t.type) == m_.quant_->dtype()) return false;
    if (op != TSR_OP_MATMUL && !backend_.supports(op, m_.quant_->dtype())) return false;
    if (m_.quant_->fits(cols) && quant::is_supported(t.type)) return true;
    ++kept_;
    return false;
  }

  // A [rows, cols] weight (GGUF ne = {cols, rows}) read in place, or converted to the
  // quant scheme.
  tsr_tensor matrix(const std::string& name, int64_t rows, int64_t cols, tsr_op op) {
    return matrices(name, {rows}, cols, op)[0];
  }

  // The row blocks of a [sum of rows, cols] weight as matrices of their own: a fused
  // weight (Phi-3's attn_qkv and gate-up ffn_up) is its blocks one after the other, each
  // contiguous in GGUF's row layout, so each is a view (packed on its own).
  // A stack of `stacked` equal matrices (GGUF ne = {cols, rows, stacked}: deepseek2's
  // per-head attn_k_b and attn_v_b) is the same bytes, one block per matrix.
  std::vector<tsr_tensor> matrices(const std::string& name, const std::vector<int64_t>& rows, int64_t cols,
                                   tsr_op op, int64_t stacked = 0) {
    const GgufTensorInfo& t = info(name);
    int64_t total = 0;
    for (const int64_t r : rows) total += r;
    const std::vector<int64_t> ne = stacked > 0 ? std::vector<int64_t>{cols, total / stacked, stacked}
                                                : std::vector<int64_t>{cols, total};
    if (t.ne != ne) {
      std::string expected = std::to_string(cols);
      for (size_t i = 1; i < ne.size(); ++i) expected += " x " + std::to_string(ne[i]);
      throw Error("tensor " + name + " has the wrong shape (expected " + expected + ")");
    }
    tsr_tensor whole{};
    std::unique_ptr<BackendBuffer> converted;
    if (converts(t, cols, op)) {
      Converted c = quantized(t, total, cols);
      whole = c.tensor;
      converted = std::move(c.buffer);
    } else {
      const tsr_dtype d = dtype(t);
      if (!backend_.supports(op, d)) {
        throw Error("backend '" + backend_.name() + "' cannot compute with tensor " + name +
                        " of type " + dtype_name(d),
                    TSR_STATUS_UNSUPPORTED);
      }
      whole = tensor_make(d, in_place(t), {total, cols});
    }
    std::vector<tsr_tensor> out;
    bool reads_whole = false;  // some block is read where it is stored
    int64_t first = 0;
    for (const int64_t r : rows) {
      tsr_tensor view = whole;
      view.shape[0] = r;
      view.data = static_cast<uint8_t*>(whole.data) + first * whole.strides[0];
      out.push_back(packed(view, op));
      reads_whole = reads_whole || out.back().data == view.data;
      first += r;
    }
    if (converted && reads_whole) m_.buffers_.push_back(std::move(converted));  // else packed copies replace it
    // The backend reads its own copies now: the file's pages need not stay resident (what
    // still reads them, a tied embedding's gather, faults its rows back in from the file).
    if (!converted && !reads_whole) m_.gguf_->release(t);
    return out;
  }

  // The [n_expert, rows, cols] weights of a layer's experts (GGUF ne = {cols, rows,
  // n_expert}), for matmul_id: read in place, or converted to the quant scheme as one
  // [n_expert * rows, cols] matrix; then in the backend's own layout where it packs
  // experts (ABI 2.5 weight_pack).
  tsr_tensor experts(const std::string& name, int64_t rows, int64_t cols) {
    const GgufTensorInfo& t = info(name);
    const int64_t n_expert = m_.hparams_.n_expert;
    if (t.ne.size() != 3 || t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != n_expert) {
      throw Error("tensor " + name + " has the wrong shape (expected " + std::to_string(cols) + " x " +
                  std::to_string(rows) + " x " + std::to_string(n_expert) + ")");
    }
    tsr_tensor flat{};
    std::unique_ptr<BackendBuffer> converted;
    if (converts(t, cols, TSR_OP_MATMUL_ID)) {
      Converted c = quantized(t, n_expert * rows, cols);
      flat = c.tensor;
      converted = std::move(c.buffer);
    } else {
      const tsr_dtype d = dtype(t);
      if (!backend_.supports(TSR_OP_MATMUL_ID, d)) {
        throw Error("backend '" + backend_.name() + "' cannot compute with tensor " + name + " of type " +
                        dtype_name(d) + " (matmul_id)",
                    TSR_STATUS_UNSUPPORTED);
      }
      flat = tensor_make(d, in_place(t), {n_expert * rows, cols});
    }
    tsr_tensor w = flat;  // the same bytes seen as [n_expert, rows, cols]
    w.ndim = 3;
    w.shape[0] = n_expert, w.shape[1] = rows, w.shape[2] = cols;
    w.strides[0] = rows * flat.strides[0], w.strides[1] = flat.strides[0], w.strides[2] = flat.strides[1];
    const tsr_tensor out = packed_experts(w);
    if (out.data == w.data && converted) m_.buffers_.push_back(std::move(converted));  // else the packed copy replaces it
    if (out.data != w.data && !converted) m_.gguf_->release(t);  // the backend reads its copy
    return out;
  }

  // Expert weights in the backend's own layout where it has one, else as they are.
  tsr_tensor packed_experts(const tsr_tensor& w) {
    if (!pack_weights_ || !backend_.packs_experts() || !backend_.supports(TSR_OP_MATMUL_ID, w.dtype)) return w;
    return pack(w);
  }

  // The experts' biases (GGUF [width, n_expert]) as f32 rows [n_expert, width], which
  // get_rows gathers by expert id.
  tsr_tensor bias_rows(const std::string& name, int64_t width) {
    const GgufTensorInfo& t = info(name);
    const int64_t n_expert = m_.hparams_.n_expert;
    if (t.ne.size() != 2 || t.ne[0] != width || t.ne[1] != n_expert) {
      throw Error("tensor " + name + " has the wrong shape (expected " + std::to_string(width) + " x " +
                  std::to_string(n_expert) + ")");
    }
    const tsr_tensor flat = vector_f32(name, n_expert * width);
    return tensor_make(TSR_DTYPE_F32, flat.data, {n_expert, width});
  }

  // A tensor's data where the backend reads it in place. GGUF allows any power-of-two
  // alignment, but kernels read F32 (and the f16 values of other types) as such: a file
  // written with general.alignment 1 or 2 can place them where that is undefined.
  uint8_t* in_place(const GgufTensorInfo& t) const {
    uint8_t* data = region_->base() + (t.offset - region_begin_);
    const uintptr_t need = t.type == GgmlType::F32 ? 4 : 2;
    if (reinterpret_cast<uintptr_t>(data) % need != 0) {
      throw Error("tensor " + t.name + " is not " + std::to_string(need) +
                  "-byte aligned in the file (general.alignment " + std::to_string(m_.gguf_->alignment()) +
                  "); rewrite it with the default alignment of 32");
    }
    return data;
  }

  // A matmul weight in the backend's own layout where it has one (weight_pack), else as is.
  tsr_tensor packed(const tsr_tensor& w, tsr_op op) {
    // Weights the plugin kernels of a quant scheme multiply are not the backend's to pack.
    if (!pack_weights_ || op != TSR_OP_MATMUL || !backend_.supports(op, w.dtype)) return w;
    return pack(w);
  }

  // w through weight_pack: the backend's copy (kept with the model), or w where it has none.
  tsr_tensor pack(const tsr_tensor& w) {
    tsr_tensor out{};
    auto buffer = backend_.pack_weight(w, &out);
    if (!buffer) return w;
    m_.buffers_.push_back(std::move(buffer));
    ++packed_;
    return out;
  }

  // A norm weight of n values, used as f32: F32 in place, F16 or BF16 converted once here.
  tsr_tensor vector_f32(const std::string& name, int64_t n) {
    const GgufTensorInfo& t = info(name);
    if (t.type == GgmlType::F32 && t.nelements == n) return tensor_make(TSR_DTYPE_F32, in_place(t), {n});
    return upload_f32(host_f32(name, n));
  }

  // A vector's n values on the host, from F32, F16 or BF16.
  std::vector<float> host_f32(const std::string& name, int64_t n) const {
    const GgufTensorInfo& t = info(name);
    if (t.nelements != n) throw Error("tensor " + name + " has the wrong size");
    std::vector<float> values(static_cast<size_t>(n));
    const uint8_t* src = m_.gguf_->tensor_data(t);
    if (t.type == GgmlType::F32) {
      std::memcpy(values.data(), src, values.size() * sizeof(float));
    } else if (t.type == GgmlType::F16) {
      for (int64_t i = 0; i < n; ++i) values[i] = f16_to_f32(load_u16(src + 2 * i));
    } else if (t.type == GgmlType::BF16) {
      for (int64_t i = 0; i < n; ++i) values[i] = bf16_to_f32(load_u16(src + 2 * i));
    } else {
      throw Error("tensor " + name + " must be F32, F16 or BF16", TSR_STATUS_UNSUPPORTED);
    }
    return values;
  }

  tsr_tensor upload_f32(const std::vector<float>& values) {
    auto buffer = backend_.alloc(values.size() * sizeof(float));
    backend_.write(*buffer, 0, values.data(), buffer->size());
    tsr_tensor tensor = tensor_make(TSR_DTYPE_F32, buffer->base(), {int64_t(values.size())});
    m_.buffers_.push_back(std::move(buffer));
    return tensor;
  }

  // RoPE frequency factors: pair i's angle is divided by factor i. Llama 3.1's
  // rope_freqs.weight, or Phi-3's LongRoPE pair; rope runs without factors where the
  // file has none.
  void load_rope_factors() {
    m_.rope_freqs_ = rope_factor_tensor("rope_freqs.weight");
    m_.rope_long_ = rope_factor_tensor("rope_factors_long.weight");
    m_.rope_short_ = rope_factor_tensor("rope_factors_short.weight");
    if (m_.hparams_.rope_attn_factor != 1.0f) require_rope_attn_factor();
    if (m_.hparams_.rope_ext_factor != 0.0f) require_yarn();
  }

  tsr_tensor rope_factor_tensor(const std::string& name) {
    if (m_.gguf_->find_tensor(name) == nullptr) return {};
    const std::string what = m_.gguf_->path() + ": " + name;
    if (!backend_.has_rope_freq_factors()) {
      throw Error(what + " needs RoPE frequency factors, which backend '" + backend_.name() +
                      "' does not read (its plugin predates ABI 1.4)",
                  TSR_STATUS_UNSUPPORTED);
    }
    const std::vector<float> factors = host_f32(name, m_.hparams_.n_rot / 2);
    for (const float f : factors) {
      if (!std::isfinite(f) || f <= 0) throw Error(what + " must hold finite numbers > 0");
    }
    return upload_f32(factors);
  }

  // LongRoPE's attn_factor scales cos and sin.
  void require_rope_attn_factor() const {
    tsr_rope_params probe{};
    probe.struct_size = sizeof(probe);
    probe.attn_factor = m_.hparams_.rope_attn_factor;
    require_param(TSR_OP_ROPE, probe, m_.gguf_->path() + ": rope.scaling.attn_factor needs rope that scales cos and sin");
  }

  void require_yarn() const {
    tsr_rope_params probe{};
    probe.struct_size = sizeof(probe);
    probe.ext_factor = m_.hparams_.rope_ext_factor;
    require_param(TSR_OP_ROPE, probe, m_.gguf_->path() + ": rope.scaling.type yarn needs YaRN rope");
  }

  static uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }

  LlamaModel& m_;
  Backend& backend_;
  const LoadProgress& progress_;
  BackendBuffer* region_ = nullptr;
  uint64_t region_begin_ = 0;
  const bool pack_weights_;
  int converted_ = 0, kept_ = 0, packed_ = 0, weighted_ = 0;
  uint64_t bytes_before_ = 0, bytes_after_ = 0;
};

std::unique_ptr<LlamaModel> LlamaModel::load(std::shared_ptr<const GgufFile> gguf,
                                             Backend& backend, const LoadProgress& progress,
                                             std::shared_ptr<const QuantScheme> quant,
                                             bool pack_weights, const LlamaModel* target) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->hparams_ = llama_hparams_from_gguf(*gguf);
  m->gguf_ = std::move(gguf);
  m->quant_ = std::move(quant);
  Loader(*m, backend, progress, pack_weights).run(target);
  for (const GgufTensorInfo& t : m->gguf_->tensors()) m->n_params_ += static_cast<uint64_t>(t.nelements);
  const LlamaHParams& hp = m->hparams_;
  spdlog::info("model: {} {} layers, {} embd, {} heads ({} kv), ffn {}, vocab {}, ctx {}",
               hp.arch, hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.n_ff, hp.n_vocab,
               hp.n_ctx_train);
  return m;
}

std::array<float, 2> LlamaHParams::yarn_corr_dims(float freq_base) const {
  // The pair index at which a wavelength of 2 pi / beta fits the original context.
  const auto corr_dim = [&](float beta) {
    return float(n_rot) * std::log(float(n_ctx_orig) / (beta * 2.0f * float(M_PI))) / (2.0f * std::log(freq_base));
  };
  const float dims = float(n_rot);
  const float low = std::min(dims, std::max(0.0f, std::floor(corr_dim(yarn_beta_fast))));
  // ggml's ramp divides by max(0.001, high - low): a high below low ramps as high = low does.
  const float high = std::max(low, std::min(dims - 1.0f, std::ceil(corr_dim(yarn_beta_slow))));
  return {low, high};
}

const tsr_tensor* LlamaModel::rope_factors(int32_t context) const {
  if (rope_freqs_.data != nullptr) return &rope_freqs_;
  const int32_t n = context > 0 ? context : hparams_.n_ctx_train;
  const tsr_tensor& pick = n > hparams_.n_ctx_orig ? rope_long_ : rope_short_;
  return pick.data != nullptr ? &pick : nullptr;
}

uint64_t LlamaModel::step_read_bytes() const {
  if (gguf_->find_tensor("output.weight") == nullptr) return weight_bytes_;  // tied
  const auto table = static_cast<uint64_t>(tok_embd_.shape[0] * tok_embd_.strides[0]);
  return weight_bytes_ - std::min(table, weight_bytes_);
}

LlamaModel::~LlamaModel() = default;

}  // namespace tsr
