// What `tessera synth` writes for each architecture: the hyperparameter keys and the
// tensors (names, shapes and the spread of their random values) of llama.cpp's GGUF
// layout for that architecture.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/gguf_writer.h"

namespace tsr::app {

struct SynthShape {
  std::string arch = "llama";
  int32_t dim = 0, layers = 0, heads = 0, kv_heads = 0;
  int32_t head_dim = 0;  // 0: dim / heads
  int32_t ffn = 0, vocab = 0, ctx = 2048;
  float rope_base = 0;   // 0: the architecture's usual base
  // none, linear (with rope_scale, the context factor), yarn (rope_scale over
  // rope_orig_ctx) or longrope (phi3: factors and attn_factor for ctx over rope_orig_ctx)
  std::string rope_scaling = "none";
  float rope_scale = 0;
  int32_t rope_orig_ctx = 0;
  int32_t sliding_window = 0;  // 0: the architecture's usual window (gemma3: 512), or none
  bool tied = false;     // no output.weight: the embedding is the output head too
  // Mixture of experts (qwen3moe; llama: Mixtral's layout): experts of expert_ffn (0: ffn)
  // each, experts_used (0: 2) per token. qwen3moe defaults to 8 experts.
  int32_t experts = 0, experts_used = 0, expert_ffn = 0;
  // deepseek2 (DeepSeek-V2/V3's multi-head latent attention): queries through a rank of
  // q_lora, keys and values from a latent of kv_lora plus a RoPE key of rope_dim (the
  // heads' head_dim holds the no-RoPE part and these rope_dim), heads' values value_dim
  // wide; the first dense_layers layers dense (ffn wide), the others routed experts plus
  // shared_experts always-on ones; gating softmax (V2), or sigmoid with a selection bias,
  // renormalized weights and a routed scale of 2.5 (V3).
  int32_t q_lora = 0, kv_lora = 0, rope_dim = 0, value_dim = 0, shared_experts = 0, dense_layers = 0;
  // Group-limited routing (V3: 8 groups, 4 used): expert_groups groups, expert_groups_used chosen.
  int32_t expert_groups = 0, expert_groups_used = 0;
  std::string gating = "softmax";
  // {arch}.pooling_type for embeddings: none (no key: the last token), mean, cls or last.
  std::string pooling = "none";
  // Outlier features, as LLM.int8() found them in large models: the attention and FFN
  // input norms weigh outlier_dims hidden dimensions (spread evenly) by outlier_gain, so
  // the projections' inputs are that much larger there.
  int32_t outlier_dims = 0;
  float outlier_gain = 0;
};

struct TensorPlan {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the row length (input features); experts' ne[2] the expert
  float stddev = 0;         // values drawn from N(0, stddev²); 0: all `fill` (a norm weight)
  float fill = 1.0f;
  std::vector<float> values;  // explicit contents instead (RoPE factors)
};

// The architectures synth writes.
const std::vector<std::string_view>& synth_archs();

// The shape with the architecture's defaults filled in; throws tsr::Error for an unknown
// architecture or a shape that does not divide (naming the flags).
SynthShape synth_resolve(SynthShape shape);

// The tensors, in the order llama.cpp's converter writes them.
std::vector<TensorPlan> synth_tensor_plan(const SynthShape& s);

// `<arch>.*` hyperparameters and general.architecture.
void synth_add_hparams(GgufWriter& w, const SynthShape& s);

}  // namespace tsr::app
