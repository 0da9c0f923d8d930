// One forward step of a llama-family model over a batch of tokens from any number of
// sequences, executed as backend ops against the paged KV cache.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/kv/kv_cache.h"
#include "core/model/llama_model.h"

namespace tsr {

// The host-side description of a step. Tokens of a sequence are contiguous.
struct StepBatch {
  std::vector<int32_t> tokens;           // [n]
  std::vector<int32_t> positions;        // [n] absolute positions
  std::vector<int32_t> slot_mapping;     // [n] KV slot each token writes
  std::vector<int32_t> query_start_loc;  // [num_seqs + 1]
  std::vector<int32_t> seq_lens;         // [num_seqs] tokens in cache after this step
  std::vector<int32_t> block_tables;     // [num_seqs * max_blocks]
  int32_t max_blocks = 0;
  std::vector<int32_t> logit_rows;       // token indices whose logits are returned

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens.size()); }
};

class LlamaForward {
 public:
  LlamaForward(const LlamaModel& model, Backend& backend, KvCache& cache);
  ~LlamaForward();

  // Runs the step; writes logit_rows.size() rows of n_vocab logits to `logits`.
  void run(const StepBatch& batch, std::vector<float>& logits);

 private:
  struct Scratch;
  void ensure_scratch(int32_t n_tokens, int32_t n_logits, size_t meta_ints);
  void upload_metadata(const StepBatch& batch);
  void attention_block(int layer, const StepBatch& batch);
  void ffn_block(int layer);
  void matmul(tsr_tensor& y, const tsr_tensor& x, const tsr_tensor& w);

  const LlamaModel& model_;
  Backend& backend_;
  KvCache& cache_;
  std::unique_ptr<Scratch> s_;
};

}  // namespace tsr
