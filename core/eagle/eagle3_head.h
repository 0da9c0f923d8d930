// An EAGLE-3 head on the host: its shape, its f32 weights, and the `eagle3` GGUF it is
// stored as (the keys and tensors llama.cpp's llama_model_eagle3 reads, which
// LlamaModel::load reads too). What `tessera train-eagle` trains and writes, and what
// tests build heads from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/gguf.h"
#include "core/model/llama_model.h"

namespace tsr {

struct Eagle3Shape {
  int32_t n_embd = 0;         // the head's width; the target's where it borrows its embeddings
  int32_t n_head = 0, n_head_kv = 0, n_ff = 0;
  int32_t n_vocab = 0;        // the head's output vocabulary (the target's, or d2t's)
  int32_t target_n_embd = 0;  // the width of each target layer's states
  int32_t n_ctx = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  std::vector<int32_t> layers;  // the target layers of the features (eagle3.extract_layers)
  bool norm_before_residual = false;

  int32_t head_dim() const { return n_embd / n_head; }
  int32_t n_features() const { return int32_t(layers.size()) * target_n_embd; }
};

// Row-major f32 matrices, one output feature per row (GGUF's layout).
struct Eagle3Weights {
  Eagle3Shape shape;
  std::vector<float> fc;                       // [n_embd, n_features]
  std::vector<float> attn_norm, hidden_norm;   // [n_embd]: the token embedding's, the features'
  std::vector<float> wq, wk, wv;               // [heads x head_dim, 2 n_embd]
  std::vector<float> wo;                       // [n_embd, n_head x head_dim]
  std::vector<float> ffn_norm;                 // [n_embd]
  std::vector<float> w_gate, w_up;             // [n_ff, n_embd]
  std::vector<float> w_down;                   // [n_embd, n_ff]
  std::vector<float> output_norm;              // [n_embd]
  std::vector<float> output;                   // [n_vocab, n_embd]; empty: the target's output matrix
  std::vector<int32_t> d2t;                    // the target id of each output id; empty: the same ids
};

// Norms at 1, matrices uniform in +-scale / sqrt(fan-in) from `seed`; no output matrix
// (the target's) unless `own_output`.
Eagle3Weights eagle3_random(const Eagle3Shape& shape, uint64_t seed, float scale, bool own_output);

// A target's tensor as f32 (its token embeddings, its output matrix): what a head in
// training reads. Throws tsr::Error naming a missing tensor.
std::vector<float> eagle3_target_tensor(const GgufFile& target, const std::string& name);

// A head to train beside a llama-style target (hparams `hp`): the target's width, heads,
// RoPE and context, a feed-forward of `n_ff` (0: the target's), the features of `layers`,
// matrices from `seed`, and its own output matrix starting as the target's. Throws
// tsr::Error for a target whose heads or RoPE a head cannot copy.
Eagle3Weights eagle3_initial_head(const GgufFile& target, const LlamaHParams& hp, const std::vector<int32_t>& layers,
                                  int32_t n_ff, uint64_t seed);

// Writes the head as an eagle3 GGUF (F32 tensors; d2t as I64). Throws tsr::Error on a
// weight of the wrong size or an I/O failure.
void eagle3_write(const Eagle3Weights& head, const std::string& path);

}  // namespace tsr
