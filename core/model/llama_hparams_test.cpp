// Hyperparameters read from GGUF metadata: values the forward pass cannot use, and RoPE
// variants it does not compute, are refused naming the key rather than run wrongly.
#include "core/model/llama_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/model/gguf_writer.h"

namespace tsr {
namespace {

// A minimal file's metadata and embedding, changed by `edit` before it is written.
LlamaHParams read(const std::function<void(GgufWriter&)>& edit = {}, const std::string& arch = "llama",
                  uint32_t layers = 1) {
  GgufWriter w;
  w.add_string("general.architecture", arch);
  w.add_u32(arch + ".context_length", 64);
  w.add_u32(arch + ".embedding_length", 8);
  w.add_u32(arch + ".block_count", layers);
  w.add_u32(arch + ".feed_forward_length", 16);
  w.add_u32(arch + ".attention.head_count", 2);
  if (edit) edit(w);
  w.add_tensor("token_embd.weight", GgmlType::F32, {8, 10}, std::vector<uint8_t>(8 * 10 * 4));
  return llama_hparams_from_gguf(*GgufFile::from_bytes(w.to_bytes(), "model.gguf"));
}

void expect_refused(const std::function<void(GgufWriter&)>& edit, const std::string& expected,
                    const std::string& arch = "llama") {
  try {
    read(edit, arch);
    ADD_FAILURE() << "accepted; expected: " << expected;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(LlamaHParams, DefaultsAndLinearScaling) {
  const LlamaHParams hp = read();
  EXPECT_EQ(hp.n_vocab, 10);
  EXPECT_EQ(hp.head_dim, 4);
  EXPECT_FLOAT_EQ(hp.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(hp.rope_freq_base, 10000.0f);
  EXPECT_FLOAT_EQ(read([](GgufWriter& w) {
                    w.add_string("llama.rope.scaling.type", "linear");
                    w.add_f32("llama.rope.scaling.factor", 4.0f);
                  }).rope_freq_scale,
                  0.25f);
}

TEST(LlamaHParams, RefusesUnusableFloats) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const float bad : {-1e-5f, 0.0f, nan, std::numeric_limits<float>::infinity()}) {
    expect_refused([&](GgufWriter& w) { w.add_f32("llama.attention.layer_norm_rms_epsilon", bad); },
                   "llama.attention.layer_norm_rms_epsilon must be a finite number > 0");
    expect_refused([&](GgufWriter& w) { w.add_f32("llama.rope.freq_base", bad); },
                   "llama.rope.freq_base must be a finite number > 0");
    expect_refused(
        [&](GgufWriter& w) {
          w.add_string("llama.rope.scaling.type", "linear");
          w.add_f32("llama.rope.scaling.factor", bad);
        },
        "llama.rope.scaling.factor must be a finite number > 0");
  }
}

// Computing them as plain RoPE would change every position's logits without a word.
TEST(LlamaHParams, RefusesRopeVariantsItDoesNotCompute) {
  expect_refused([](GgufWriter& w) { w.add_string("llama.rope.scaling.type", "su"); },
                 "rope.scaling.type 'su' is not supported (none, linear, yarn)");
  expect_refused([](GgufWriter& w) {
    w.add_string("llama.rope.scaling.type", "yarn");
    w.add_f32("llama.rope.scaling.yarn_log_multiplier", 0.1f);
  }, "yarn_log_multiplier (DeepSeek's YaRN scale) is for deepseek2 only");
}

// YaRN as llama.cpp sets it up: ext_factor 1, 1 / factor, betas 32 and 1, and the
// correction dims of ggml_rope_yarn_corr_dims for the original context.
TEST(LlamaHParams, Yarn) {
  const LlamaHParams hp = read([](GgufWriter& w) {
    w.add_string("llama.rope.scaling.type", "yarn");
    w.add_f32("llama.rope.scaling.factor", 4.0f);
    w.add_u32("llama.rope.scaling.original_context_length", 4096);
    w.add_u32("llama.attention.key_length", 128);
  });
  EXPECT_FLOAT_EQ(hp.rope_ext_factor, 1.0f);
  EXPECT_FLOAT_EQ(hp.rope_freq_scale, 0.25f);
  EXPECT_EQ(hp.n_ctx_orig, 4096);
  // n_rot 128, base 1e4: 128 ln(4096 / (32 * 2 pi)) / (2 ln 1e4) = 20.94 -> 20, and with beta 1 45.8 -> 46.
  const std::array<float, 2> dims = hp.yarn_corr_dims(10000.0f);
  EXPECT_FLOAT_EQ(dims[0], 20.0f);
  EXPECT_FLOAT_EQ(dims[1], 46.0f);
  // A tiny original context puts both below 0: the ramp is then the same as with 0 and 0.
  LlamaHParams tiny = hp;
  tiny.n_ctx_orig = 4;
  EXPECT_EQ(tiny.yarn_corr_dims(10000.0f), (std::array<float, 2>{0.0f, 0.0f}));
  EXPECT_FLOAT_EQ(read().rope_ext_factor, 0.0f);
}

// What each architecture adds to llama's graph, and Qwen3's head size of its own.
TEST(LlamaHParams, ArchitecturesAndTheirAdditions) {
  const LlamaHParams llama = read();
  EXPECT_EQ(llama.rope_mode, TSR_ROPE_NORMAL);
  EXPECT_FALSE(llama.qkv_bias || llama.qk_norm);
  const LlamaHParams qwen2 = read({}, "qwen2");
  EXPECT_EQ(qwen2.rope_mode, TSR_ROPE_NEOX);
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.qk_norm);
  const LlamaHParams qwen3 = read([](GgufWriter& w) { w.add_u32("qwen3.attention.key_length", 16); }, "qwen3");
  EXPECT_EQ(qwen3.rope_mode, TSR_ROPE_NEOX);
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_EQ(qwen3.head_dim, 16);  // 2 heads of 16 over an embedding of 8
  EXPECT_EQ(qwen3.n_rot, 16);
  expect_refused([](GgufWriter& w) {
    w.add_u32("qwen3.attention.key_length", 16);
    w.add_u32("qwen3.attention.value_length", 8);
  }, "attention.value_length other than key_length is not supported", "qwen3");
  expect_refused({}, "model architecture 'mamba' is not supported (supported: llama, qwen2, qwen3, qwen3moe, gemma3, phi3, gpt-oss, deepseek2; eagle3 heads as drafts beside a target)",
                 "mamba");
}

// Gemma 3 as llama.cpp reads it: five local layers over the window with RoPE base 1e4
// unscaled, then a global one with the file's base and scaling; sqrt(n_embd) embedding.
TEST(LlamaHParams, Gemma3LocalAndGlobalLayers) {
  const auto gemma = [](GgufWriter& w) {
    w.add_u32("gemma3.attention.key_length", 16);
    w.add_u32("gemma3.attention.sliding_window", 512);
    w.add_f32("gemma3.rope.freq_base", 1e6f);
    w.add_string("gemma3.rope.scaling.type", "linear");
    w.add_f32("gemma3.rope.scaling.factor", 8.0f);
  };
  const LlamaHParams hp = read(gemma, "gemma3");
  EXPECT_EQ(hp.rope_mode, TSR_ROPE_NEOX);
  EXPECT_TRUE(hp.qk_norm && hp.gelu_ffn && hp.post_norms);
  EXPECT_FLOAT_EQ(hp.embd_scale, std::sqrt(8.0f));
  EXPECT_FLOAT_EQ(hp.attn_scale, 0.25f);  // 1 / sqrt(head size 16)
  EXPECT_EQ(hp.n_swa, 512);
  for (int il = 0; il < 12; ++il) {
    const bool global = il == 5 || il == 11;
    EXPECT_EQ(hp.layer_is_swa(il), !global) << il;
    EXPECT_FLOAT_EQ(hp.layer_rope_base(il), global ? 1e6f : 1e4f) << il;
    EXPECT_FLOAT_EQ(hp.layer_rope_scale(il), global ? 0.125f : 1.0f) << il;
  }
  // Gemma 3 27B (62 layers) scales attention by sqrt(n_embd / n_head), not the head size.
  const LlamaHParams big = read(gemma, "gemma3", 62);
  EXPECT_FLOAT_EQ(big.attn_scale, 0.5f);  // 1 / sqrt(8 / 2)
  EXPECT_FALSE(read().layer_is_swa(0));
  expect_refused([](GgufWriter& w) { w.add_u32("gemma3.attention.key_length", 16); },
                 "missing metadata key gemma3.attention.sliding_window", "gemma3");
}

// Phi-3 as llama.cpp reads it: fused gate-up, LongRoPE's attn_factor and original
// context, its sliding window ignored; Q as wide as the embedding.
TEST(LlamaHParams, Phi3LongRope) {
  const LlamaHParams plain = read({}, "phi3");
  EXPECT_TRUE(plain.fused_gate_up);
  EXPECT_EQ(plain.rope_mode, TSR_ROPE_NEOX);
  EXPECT_FLOAT_EQ(plain.rope_attn_factor, 1.0f);
  EXPECT_EQ(plain.n_ctx_orig, 64);  // the trained context without the key
  const LlamaHParams longrope = read([](GgufWriter& w) {
    w.add_u32("phi3.rope.scaling.original_context_length", 16);
    w.add_f32("phi3.rope.scaling.attn_factor", 1.19f);
    w.add_u32("phi3.attention.sliding_window", 2047);
  }, "phi3");
  EXPECT_EQ(longrope.n_ctx_orig, 16);
  EXPECT_FLOAT_EQ(longrope.rope_attn_factor, 1.19f);
  EXPECT_FALSE(longrope.layer_is_swa(0));
  expect_refused([](GgufWriter& w) { w.add_f32("phi3.rope.scaling.attn_factor", -1.0f); },
                 "phi3.rope.scaling.attn_factor must be a finite number > 0", "phi3");
  expect_refused([](GgufWriter& w) { w.add_u32("phi3.attention.key_length", 8); },
                 "phi3 needs head_count x head size = embedding_length", "phi3");
}

// Experts: qwen3moe must have them, their width defaults as llama.cpp's does (qwen3moe:
// the dense width over the experts used; Mixtral's llama: the dense width), and more experts
// used than there are is refused.
TEST(LlamaHParams, MixtureOfExperts) {
  const auto experts = [](uint32_t count, uint32_t used) {
    return [=](GgufWriter& w) {
      w.add_u32("qwen3moe.expert_count", count);
      w.add_u32("qwen3moe.expert_used_count", used);
    };
  };
  const LlamaHParams qwen = read(experts(8, 2), "qwen3moe");
  EXPECT_TRUE(qwen.moe());
  EXPECT_TRUE(qwen.qk_norm);
  EXPECT_EQ(qwen.rope_mode, TSR_ROPE_NEOX);
  EXPECT_EQ(qwen.n_expert, 8);
  EXPECT_EQ(qwen.n_expert_used, 2);
  EXPECT_EQ(qwen.n_ff_exp, 8);  // 16 / 2
  EXPECT_EQ(read([&](GgufWriter& w) {
              experts(8, 2)(w);
              w.add_u32("qwen3moe.expert_feed_forward_length", 12);
            }, "qwen3moe").n_ff_exp,
            12);
  const LlamaHParams mixtral = read([](GgufWriter& w) {
    w.add_u32("llama.expert_count", 4);
    w.add_u32("llama.expert_used_count", 2);
  });
  EXPECT_EQ(mixtral.n_ff_exp, 16);
  EXPECT_FALSE(read().moe());
  expect_refused({}, "qwen3moe needs qwen3moe.expert_count", "qwen3moe");
  expect_refused(experts(2, 3), "expert_used_count exceeds expert_count", "qwen3moe");
  expect_refused([](GgufWriter& w) { w.add_u32("qwen3moe.expert_count", 4); }, "missing metadata key qwen3moe.expert_used_count",
                 "qwen3moe");
}

// gpt-oss as llama.cpp reads it: even layers local over the window (every second layer,
// or the file's pattern), all layers with one RoPE base and scaling, sinks, biases,
// softmax-weighted experts and the clamped SwiGLU; experts and a window are required.
TEST(LlamaHParams, GptOss) {
  const auto gpt_oss = [](GgufWriter& w) {
    w.add_u32("gpt-oss.expert_count", 32);
    w.add_u32("gpt-oss.expert_used_count", 4);
    w.add_u32("gpt-oss.expert_feed_forward_length", 12);
    w.add_u32("gpt-oss.attention.sliding_window", 128);
    w.add_f32("gpt-oss.rope.freq_base", 150000.0f);
    w.add_string("gpt-oss.rope.scaling.type", "yarn");
    w.add_f32("gpt-oss.rope.scaling.factor", 32.0f);
    w.add_u32("gpt-oss.rope.scaling.original_context_length", 4096);
  };
  const LlamaHParams hp = read(gpt_oss, "gpt-oss", 4);
  EXPECT_EQ(hp.rope_mode, TSR_ROPE_NEOX);
  EXPECT_TRUE(hp.qkv_bias && hp.attn_out_bias && hp.attn_sinks);
  EXPECT_TRUE(hp.moe_weight_softmax && hp.moe_biases && hp.swiglu_oai);
  EXPECT_EQ(hp.n_expert, 32);
  EXPECT_EQ(hp.n_ff_exp, 12);
  EXPECT_EQ(hp.n_swa, 128);
  for (int il = 0; il < 4; ++il) {
    EXPECT_EQ(hp.layer_is_swa(il), il % 2 == 0) << il;
    EXPECT_FLOAT_EQ(hp.layer_rope_base(il), 150000.0f);
    EXPECT_FLOAT_EQ(hp.layer_rope_scale(il), 1.0f / 32);
  }
  EXPECT_EQ(read([&](GgufWriter& w) {
              gpt_oss(w);
              w.add_u32("gpt-oss.attention.sliding_window_pattern", 3);
            }, "gpt-oss", 4).layer_is_swa(2),
            false);
  EXPECT_FALSE(read().attn_sinks);
  expect_refused([](GgufWriter& w) { w.add_u32("gpt-oss.attention.sliding_window", 128); },
                 "gpt-oss needs gpt-oss.expert_count", "gpt-oss");
  expect_refused([](GgufWriter& w) {
    w.add_u32("gpt-oss.expert_count", 4);
    w.add_u32("gpt-oss.expert_used_count", 2);
  }, "missing metadata key gpt-oss.attention.sliding_window", "gpt-oss");
}

// DeepSeek-V2/V3 as llama.cpp reads an MLA file: one kv head holding the latent and the
// RoPE key, the heads' own sizes from *_mla, dense leading layers, shared experts, the
// gating function, and YaRN's scale moved from RoPE into the attention's (llama_context's
// yarn_attn_factor and llm_build_deepseek2's kq_scale).
void deepseek2_keys(GgufWriter& w) {
  w.add_u32("deepseek2.attention.head_count_kv", 1);
  w.add_u32("deepseek2.attention.kv_lora_rank", 32);
  w.add_u32("deepseek2.attention.q_lora_rank", 24);
  w.add_u32("deepseek2.rope.dimension_count", 8);
  w.add_u32("deepseek2.attention.key_length", 40);
  w.add_u32("deepseek2.attention.value_length", 32);
  w.add_u32("deepseek2.attention.key_length_mla", 24);
  w.add_u32("deepseek2.attention.value_length_mla", 12);
  w.add_u32("deepseek2.expert_count", 8);
  w.add_u32("deepseek2.expert_used_count", 2);
  w.add_u32("deepseek2.expert_feed_forward_length", 6);
  w.add_u32("deepseek2.expert_shared_count", 2);
  w.add_u32("deepseek2.leading_dense_block_count", 1);
}

TEST(LlamaHParams, Deepseek2) {
  const LlamaHParams hp = read(deepseek2_keys, "deepseek2", 3);
  EXPECT_TRUE(hp.mla());
  EXPECT_EQ(hp.rope_mode, TSR_ROPE_NORMAL);
  EXPECT_EQ(hp.n_head_kv, 1);
  EXPECT_EQ(hp.head_dim, 40);  // what the cache holds per token and layer
  EXPECT_EQ(hp.n_lora_kv, 32);
  EXPECT_EQ(hp.n_lora_q, 24);
  EXPECT_EQ(hp.head_dim_qk, 24);
  EXPECT_EQ(hp.head_dim_v, 12);
  EXPECT_EQ(hp.n_expert_shared, 2);
  EXPECT_FALSE(hp.layer_moe(0));
  EXPECT_TRUE(hp.layer_moe(1) && hp.layer_moe(2));
  EXPECT_FALSE(hp.moe_sigmoid || hp.moe_norm_w);  // softmax and no renormalization unless the file says
  EXPECT_FLOAT_EQ(hp.moe_w_scale, 0.0f);
  EXPECT_FLOAT_EQ(hp.attn_scale, 1.0f / std::sqrt(24.0f));
  const LlamaHParams v3 = read([](GgufWriter& w) {
    deepseek2_keys(w);
    w.add_u32("deepseek2.expert_gating_func", 2);
    w.add_bool("deepseek2.expert_weights_norm", true);
    w.add_f32("deepseek2.expert_weights_scale", 2.5f);
    w.add_string("deepseek2.rope.scaling.type", "yarn");
    w.add_f32("deepseek2.rope.scaling.factor", 40.0f);
    w.add_u32("deepseek2.rope.scaling.original_context_length", 4096);
    w.add_f32("deepseek2.rope.scaling.yarn_log_multiplier", 0.1f);
  }, "deepseek2", 3);
  EXPECT_TRUE(v3.moe_sigmoid && v3.moe_norm_w);
  EXPECT_FLOAT_EQ(v3.moe_w_scale, 2.5f);
  // RoPE's factor cancels the backend's 1 + 0.1 ln 40; the logits take (1 + 0.1 ln 40)^2.
  const float yarn = 1.0f + 0.1f * std::log(40.0f);
  EXPECT_NEAR(v3.rope_attn_factor, 1.0f / yarn, 1e-6);
  EXPECT_NEAR(v3.attn_scale, yarn * yarn / std::sqrt(24.0f), 1e-6);
  const LlamaHParams grouped = read([](GgufWriter& w) {
    deepseek2_keys(w);
    w.add_u32("deepseek2.expert_group_count", 4);
    w.add_u32("deepseek2.expert_group_used_count", 2);
  }, "deepseek2", 3);
  EXPECT_TRUE(grouped.group_routing());
  EXPECT_EQ(grouped.n_group_used, 2);
  for (const auto& [count, used] : {std::pair{3, 1}, {4, 4}, {4, 0}, {8, 1}}) {  // 8 experts, 2 used
    expect_refused([&](GgufWriter& w) {
      deepseek2_keys(w);
      w.add_u32("deepseek2.expert_group_count", uint32_t(count));
      w.add_u32("deepseek2.expert_group_used_count", uint32_t(used));
    }, "must divide the 8 experts into groups, use fewer than all, and hold the experts a token uses", "deepseek2");
  }
  expect_refused([](GgufWriter& w) {
    w.add_u32("deepseek2.attention.kv_lora_rank", 32);
    w.add_u32("deepseek2.expert_count", 8);
    w.add_u32("deepseek2.expert_used_count", 2);
    w.add_u32("deepseek2.expert_shared_count", 2);
  }, "deepseek2 without attention.key_length_mla", "deepseek2");
  expect_refused([](GgufWriter& w) {
    deepseek2_keys(w);
    w.add_u32("deepseek2.expert_gating_func", 4);
  }, "expert_gating_func = 4", "deepseek2");
}

}  // namespace
}  // namespace tsr
