// One forward step of a llama-family model over a batch of tokens from any number of
// sequences, executed as backend ops against the paged KV cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/kv/kv_cache.h"
#include "core/model/llama_model.h"
#include "core/model/step_batch.h"

namespace tsr {

struct ForwardOptions {
  // Replay decode steps from backend graphs (see decode_graphs.h). Ignored, with a
  // warning, when the backend cannot record or a quant plugin's host kernels run matmuls.
  bool graphs = false;
  int32_t graph_max_batch = 64;    // larger decode batches run eagerly
  int32_t graph_max_blocks = 0;    // block-table width recorded; longer sequences run eagerly
  int32_t context = 0;             // tokens per sequence (picks LongRoPE's factors); 0: the trained context
  // Called before every matmul with its input and weight, once the backend has finished
  // the work before it, so `x` is readable where the backend's memory is host-visible:
  // what calibration (`quantize --method gptq|awq`) reads. Steps run eagerly with it.
  std::function<void(const tsr_tensor& x, const tsr_tensor& w)> matmul_observer;
  // The same before every expert matmul of a MoE layer: `x` is [n, K] (each token's row
  // goes to each of its experts) or [n, n_used, K] (a row per token and chosen expert),
  // `w` the experts' [n_expert, M, K] weight and `ids` [n, n_used] the experts chosen.
  std::function<void(const tsr_tensor& x, const tsr_tensor& w, const tsr_tensor& ids)> matmul_id_observer;
};

class DecodeGraphs;

// Asked at each layer boundary of the first half of an eager step; true abandons the step.
// Its KV writes are for positions past each sequence's computed ones, rewritten when the
// step runs again, so nothing is lost but the work.
using StepInterrupt = std::function<bool()>;

class LlamaForward {
 public:
  LlamaForward(const LlamaModel& model, Backend& backend, KvCache& cache,
               const ForwardOptions& options = {});
  ~LlamaForward();

  // Runs the step; writes logit_rows.size() rows of n_vocab logits to `logits` and, when
  // `hidden` is not NULL, hidden_rows.size() rows of n_embd output-norm states to it (a
  // batch with hidden rows and no `hidden` is refused). False: `interrupt` (can be NULL;
  // steps replayed from a graph never ask it) abandoned the step; logits are not written.
  bool run(const StepBatch& batch, std::vector<float>& logits, std::vector<float>* hidden = nullptr,
           const StepInterrupt* interrupt = nullptr);

  // A step of an EAGLE-3 head (LlamaHParams::eagle3): row i takes the batch's token i and
  // row i of `features` (host memory, num_tokens rows of `width` floats: the head's
  // eagle3_features, target states that fc projects, or its n_embd, states it output
  // itself). `logits` gets logit_rows' rows and `states` the same rows' output states
  // before the output norm (what the head's next step takes as features).
  void run_head(const StepBatch& batch, const float* features, int32_t width, std::vector<float>& logits,
                std::vector<float>& states);

  // Keeps the residual stream entering each of `layers` (strictly increasing, 0 ..
  // n_layer: 0 the scaled embeddings, i the output of layer i - 1, n_layer the last layer's
  // output before the output norm; empty: none) for every row of every later step:
  // captured() is f32 [layers, rows of the last step, n_embd] in backend memory, valid
  // until the next step. Steps run eagerly while layers are captured.
  void set_capture_layers(std::vector<int32_t> layers);
  const tsr_tensor& captured() const { return captured_; }
  // The buffer captured() lies in (NULL before the first captured step): what a device
  // backend's states are read back through (ModelHost, states_read).
  const BackendBuffer* capture_buffer() const { return capture_.get(); }

  bool graphs_enabled() const { return graphs_ != nullptr; }
  int32_t graphs_recorded() const;
  int64_t graph_replays() const { return graph_replays_; }  // steps run from a graph

 private:
  struct Scratch;
  void ensure_scratch(Scratch& s, int32_t n_tokens, int32_t n_logits, int32_t n_hidden, size_t meta_ints);
  void upload_metadata(Scratch& s, const StepBatch& batch);
  void check(const StepBatch& batch, bool hidden) const;
  float* carve(Scratch& s, int64_t n);
  bool enqueue(Scratch& s, const StepBatch& batch, const StepInterrupt* interrupt = nullptr);
  void enqueue_head(Scratch& s, const StepBatch& batch, int32_t width);
  void output_logits(Scratch& s, const StepBatch& batch, float* free);
  void read_logits(Scratch& s, int32_t rows, std::vector<float>& logits);
  void output_hidden(Scratch& s, int64_t n_hidden);
  void capture_layer(Scratch& s, int layer, int64_t n);
  bool run_graph(const StepBatch& batch, std::vector<float>& logits);
  void record_graph(Scratch& s, const StepBatch& padded, int32_t bucket);
  void attention_block(Scratch& s, int layer, int64_t n);
  void attention_from(Scratch& s, int layer, int64_t n, const tsr_tensor& in);
  void attention(const tsr_tensor& out, const tsr_tensor& q, Scratch& s, int layer);
  void rotated_attention(Scratch& s, int layer, int64_t n);
  void output_projection(Scratch& s, const LlamaLayer& w);
  void rope(Scratch& s, const tsr_tensor& t, int layer);
  void copy(const tsr_tensor& dst, const tsr_tensor& src);
  void mla_attention(Scratch& s, int layer, int64_t n, const tsr_tensor& in);
  void ffn_block(Scratch& s, int layer);
  void dense_ffn(Scratch& s, const tsr_tensor& out, const tsr_tensor& gate_w, const tsr_tensor& up_w,
                 const tsr_tensor& down_w);
  void moe_ffn(Scratch& s, const LlamaLayer& w);
  void sigmoid_router(Scratch& s);
  void make_group_constants();
  void limit_to_groups(Scratch& s, const tsr_tensor& scores);
  void unbias_weights(Scratch& s, const LlamaLayer& w);
  void expert_matmul(Scratch& s, const tsr_tensor& out, const tsr_tensor& x, const tsr_tensor& w,
                     const tsr_tensor& bias);
  void residual_add(Scratch& s, const tsr_tensor& post_norm);
  void matmul(tsr_tensor& y, const tsr_tensor& x, const tsr_tensor& w);

  const LlamaModel& model_;
  Backend& backend_;
  KvCache& cache_;
  const tsr_tensor* rope_factors_;  // for this forward's context (LongRoPE picks by it)
  // ForwardOptions::matmul_observer and matmul_id_observer.
  std::function<void(const tsr_tensor&, const tsr_tensor&)> observer_;
  std::function<void(const tsr_tensor&, const tsr_tensor&, const tsr_tensor&)> id_observer_;
  std::vector<int32_t> capture_layers_;
  std::unique_ptr<BackendBuffer> capture_;  // [capture_layers_, capture_rows_, n_embd]
  int64_t capture_rows_ = 0;
  tsr_tensor captured_{};
  std::unique_ptr<Scratch> eager_;
  std::unique_ptr<Scratch> graph_scratch_;  // fixed addresses: the graphs' operands
  std::unique_ptr<DecodeGraphs> graphs_;
  int64_t graph_replays_ = 0;
  std::unique_ptr<BackendBuffer> group_consts_;  // group routing's constants (make_group_constants)
  tsr_tensor group_members_{}, mask_offset_{};
};

}  // namespace tsr
