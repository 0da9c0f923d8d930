// A llama-family model (llama and Mixtral, qwen2, qwen3, qwen3moe, gemma3, phi3, gpt-oss, deepseek2: the architectures of kArchs in
// llama_model.cpp): hyperparameters from GGUF metadata and weights placed in a
// backend's memory. Immutable after load; the GGUF mapping must outlive the model
// because CPU backends read the weights in place.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/model/gguf.h"
#include "core/model/pooling.h"
#include "core/plugin_host/backend.h"
#include "core/quant/quant_scheme.h"

namespace tsr {

struct LlamaHParams {
  std::string arch;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;  // key_length when given, else n_embd / n_head
  int32_t n_ff = 0;
  int32_t n_rot = 0;
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  tsr_rope_mode rope_mode = TSR_ROPE_NORMAL;
  bool qkv_bias = false;  // attn_{q,k,v}.bias added after the projections (qwen2)
  bool qk_norm = false;   // attn_{q,k}_norm: RMS norm of each head before RoPE (qwen3)
  // Gemma 3's additions (each off for the others).
  bool gelu_ffn = false;    // GeGLU feed-forward (tanh GELU of the gate) instead of SwiGLU
  bool post_norms = false;  // RMS norms of the attention and FFN outputs before each residual add
  float embd_scale = 1.0f;  // the token embedding is multiplied by this (gemma3: sqrt(n_embd))
  float attn_scale = 0.0f;  // attention logit scale (1 / sqrt(head_dim) unless the arch says)
  // Sliding-window layers: with n_swa > 0, layer il attends to the last n_swa positions
  // only when il % swa_pattern < swa_pattern - 1 (gemma3: five local layers, then a
  // global one), and RoPEs with the local base and scale.
  int32_t n_swa = 0;
  int32_t swa_pattern = 0;
  float rope_freq_base_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;

  // Phi-3's additions: gate and up rows in one ffn_up (the Q, K and V rows may share
  // attn_qkv, in any architecture), and LongRoPE: cos and sin scaled by
  // rope.scaling.attn_factor, and the long factors beyond the original context.
  bool fused_gate_up = false;
  float rope_attn_factor = 1.0f;
  int32_t n_ctx_orig = 0;  // rope.scaling.original_context_length, else n_ctx_train

  // YaRN (rope.scaling.type yarn): rope_freq_scale is 1 / the factor, and each pair's angle
  // mixes the interpolated and the extrapolated one over the pairs between the correction
  // dims of beta_fast and beta_slow (1: on, as llama.cpp's yarn_ext_factor; 0: off).
  float rope_ext_factor = 0.0f;
  float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;

  // Mixture-of-experts feed-forward (qwen3moe; llama with expert_count, i.e. Mixtral):
  // n_expert experts of width n_ff_exp, n_expert_used of them per token, picked by the
  // softmax of the router's logits and weighted by their probabilities renormalized over
  // the chosen ones (llama.cpp's build_moe_ffn with norm_w).
  int32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  // gpt-oss's additions: experts picked by the router's raw logits and weighted by the
  // softmax of the chosen ones (llama.cpp's SOFTMAX_WEIGHT gating, no renormalization);
  // biases on the router and on each expert's gate, up and down outputs; the clamped
  // SwiGLU (swiglu_oai with alpha 1.702, limit 7); attention sinks and an output bias.
  bool moe_weight_softmax = false;
  bool moe_norm_w = true;   // weights renormalized over the chosen experts (llama.cpp's norm_w)
  float moe_w_scale = 0;    // weights scaled by this (expert_weights_scale; 0: unscaled)
  bool moe_biases = false;
  bool swiglu_oai = false;
  bool attn_sinks = false;
  bool attn_out_bias = false;
  Pooling pooling = Pooling::LAST;

  // DeepSeek-V2/V3 (deepseek2), as llama.cpp's absorbed multi-head latent attention (MLA):
  // queries through attn_q_a, its norm and attn_q_b (n_lora_q; 0: one attn_q), n_head
  // heads of head_dim_qk, the no-RoPE part first and n_rot RoPE dims last; keys and values
  // come from one latent row of n_lora_kv (attn_kv_a_mqa's first columns, RMS-normalized)
  // and one RoPE key of n_rot (its last ones), shared by all heads. The cache holds just
  // that row (n_head_kv 1, head_dim n_lora_kv + n_rot); attention reads it as K and as V
  // (the latent part of its output is what attn_v_b expands), attn_k_b folds each head's
  // no-RoPE query into the latent space and attn_v_b expands the output to head_dim_v.
  int32_t n_lora_q = 0, n_lora_kv = 0, head_dim_qk = 0, head_dim_v = 0;
  // DeepSeek's feed-forward: the first n_layer_dense_lead layers are dense (n_ff wide); the
  // others route to experts and add n_expert_shared always-on ones (ffn_*_shexp, one SwiGLU
  // of n_expert_shared x n_ff_exp); the router's probabilities are a softmax or, with
  // moe_sigmoid, each logit's sigmoid (expert_gating_func 1 or 2), and a layer's
  // exp_probs_b, where it has one, biases the choice but not the weights.
  int32_t n_layer_dense_lead = 0, n_expert_shared = 0;
  bool moe_sigmoid = false;
  // Group-limited routing (DeepSeek-V3's; any architecture's expert_group_count > 1): the
  // experts form n_expert_groups groups of consecutive ids, each scored by the sum of its
  // two best selection scores, and only the n_group_used best groups' experts are chosen from.
  int32_t n_expert_groups = 0, n_group_used = 0;

  // EAGLE-3 heads (arch eagle3, one decoder layer; llama.cpp's llama_model_eagle3): the
  // target layers whose states make a feature row (eagle3.extract_layers; tsr_draft_hidden
  // numbers them), the row's width (those layers x eagle3.target_hidden_size, else x
  // n_embd), and whether the residual around attention is the normalized features
  // (eagle3.norm_before_residual) rather than the features. n_vocab is the head's output
  // vocabulary; its inputs are the target's token ids.
  std::vector<int32_t> eagle3_layers;
  int32_t eagle3_features = 0;
  bool eagle3_norm_before_residual = false;

  bool eagle3() const { return eagle3_features > 0; }
  bool moe() const { return n_expert > 0; }
  bool mla() const { return n_lora_kv > 0; }
  bool layer_moe(int il) const { return moe() && il >= n_layer_dense_lead; }
  bool group_routing() const { return n_expert_groups > 1; }
  // YaRN's correction dims for a RoPE base, as ggml_rope_yarn_corr_dims computes them (in
  // float), clamped into what tsr_rope_params accepts without changing the ramp.
  std::array<float, 2> yarn_corr_dims(float freq_base) const;
  bool layer_is_swa(int il) const { return n_swa > 0 && il % swa_pattern < swa_pattern - 1; }
  float layer_rope_base(int il) const { return layer_is_swa(il) ? rope_freq_base_swa : rope_freq_base; }
  float layer_rope_scale(int il) const { return layer_is_swa(il) ? rope_freq_scale_swa : rope_freq_scale; }
};

// Reads and validates the hyperparameters of a supported architecture.
LlamaHParams llama_hparams_from_gguf(const GgufFile& gguf);

struct LlamaLayer {
  tsr_tensor attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
  tsr_tensor bq, bk, bv;        // with hparams().qkv_bias, else zeroed
  tsr_tensor q_norm, k_norm;    // [head_dim], with hparams().qk_norm, else zeroed
  tsr_tensor attn_post_norm, ffn_post_norm;  // [n_embd], with hparams().post_norms, else zeroed
  // With hparams().moe() (w_gate, w_up and w_down zeroed then): the router [n_expert, n_embd]
  // and the experts' matrices [n_expert, rows, cols].
  tsr_tensor ffn_gate_inp, gate_exps, up_exps, down_exps;
  tsr_tensor bo;     // [n_embd], with hparams().attn_out_bias, else zeroed
  tsr_tensor sinks;  // [n_head], with hparams().attn_sinks, else zeroed
  // With hparams().moe_biases: the router's [n_expert] and the experts' [n_expert, width].
  tsr_tensor ffn_gate_inp_b, gate_exps_b, up_exps_b, down_exps_b;
  tsr_tensor hidden_norm;  // [n_embd], an EAGLE-3 head's norm of its feature input, else zeroed
  // With hparams().mla() (wq, wk and wv zeroed then; wq is attn_q where n_lora_q is 0):
  // attn_q_a [n_lora_q, n_embd] and its norm, attn_q_b [n_head * head_dim_qk, n_lora_q],
  // attn_kv_a_mqa [n_lora_kv + n_rot, n_embd] and the latent's norm, and per head
  // attn_k_b [n_lora_kv, head_dim_qk - n_rot] and attn_v_b [head_dim_v, n_lora_kv].
  tsr_tensor wq_a, q_a_norm, wq_b, wkv_a, kv_a_norm;
  std::vector<tsr_tensor> wk_b, wv_b;
  // DeepSeek's experts: the selection bias [n_expert] (data NULL without one) and the
  // shared experts' SwiGLU (zeroed without them).
  tsr_tensor exp_probs_b, gate_shexp, up_shexp, down_shexp;
};

// Called with (bytes done, bytes total) while weights are placed on the backend.
using LoadProgress = std::function<void(uint64_t, uint64_t)>;

class LlamaModel {
 public:
  // Throws tsr::Error for a missing tensor, a wrong shape, or a tensor type the backend
  // does not support (naming the tensor). With `quant` (can be NULL), every matmul weight
  // whose rows fit the scheme's blocks is converted to it (others keep their type, as
  // llama.cpp does); the scheme must run on `backend`, natively or with its own kernels.
  // With `pack_weights`, every matmul weight is offered to the backend's weight_pack.
  // An EAGLE-3 head needs its `target` (can be NULL otherwise; outlives the head), whose
  // token embeddings it reads, and whose output matrix where it has none of its own.
  static std::unique_ptr<LlamaModel> load(std::shared_ptr<const GgufFile> gguf,
                                          Backend& backend, const LoadProgress& progress = {},
                                          std::shared_ptr<const QuantScheme> quant = nullptr,
                                          bool pack_weights = true, const LlamaModel* target = nullptr);
  ~LlamaModel();

  const LlamaHParams& hparams() const { return hparams_; }
  const tsr_tensor& tok_embd() const { return tok_embd_; }
  const tsr_tensor& output_norm() const { return output_norm_; }
  const tsr_tensor& output() const { return output_; }  // tok_embd when tied
  // RoPE frequency factors ([n_rot / 2] f32) for sequences of up to `context` tokens, as
  // llama.cpp picks them: Llama 3.1's rope_freqs.weight, else Phi-3's
  // rope_factors_long.weight beyond the original context and rope_factors_short.weight
  // within it; NULL when the file has none.
  const tsr_tensor* rope_factors(int32_t context) const;
  const LlamaLayer& layer(int i) const { return layers_[i]; }
  // An EAGLE-3 head's feature projection [n_embd, eagle3_features] (else zeroed), and the
  // target id of each of its output ids (d2t; empty when they are the target's).
  const tsr_tensor& fc() const { return fc_; }
  const std::vector<int32_t>& target_tokens() const { return target_tokens_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Weight bytes one decode step reads: all of them but the rows of an embedding table
  // that is not also the output matrix (a step gathers one row of it per token).
  uint64_t step_read_bytes() const;
  uint64_t n_params() const { return n_params_; }

 private:
  LlamaModel() = default;
  class Loader;

  LlamaHParams hparams_;
  std::shared_ptr<const GgufFile> gguf_;
  std::vector<std::unique_ptr<BackendBuffer>> buffers_;
  tsr_tensor tok_embd_{}, output_norm_{}, output_{};
  tsr_tensor fc_{};
  std::vector<int32_t> target_tokens_;
  // rope_freqs, rope_factors_long, rope_factors_short: data NULL when absent.
  tsr_tensor rope_freqs_{}, rope_long_{}, rope_short_{};
  std::vector<LlamaLayer> layers_;
  uint64_t weight_bytes_ = 0;
  uint64_t n_params_ = 0;
  std::shared_ptr<const QuantScheme> quant_;
};

}  // namespace tsr
