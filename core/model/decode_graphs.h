// Decode steps replayed from backend graphs (ABI 1.2), as vLLM's CUDA graphs: a step in
// which every sequence brings one token is padded to a fixed batch size (a bucket) and a
// fixed block-table width, so that one recorded graph per bucket serves every such step.
//
// Buckets are 1 … 15 one by one, then multiples of 8: the GPU backends switch kernels at 16
// rows (GEMV below, GEMM above), so a step of fewer than 16 sequences runs the very kernels
// it would run eagerly, and padding never moves a step from one side to the other.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/model/llama_forward.h"
#include "core/plugin_host/backend.h"

namespace tsr {

class DecodeGraphs {
 public:
  // Graphs for decode batches of up to max_batch sequences whose block tables have at
  // most max_blocks entries.
  DecodeGraphs(int32_t max_batch, int32_t max_blocks);

  int32_t max_batch() const { return max_batch_; }
  int32_t max_blocks() const { return max_blocks_; }

  // The bucket a step runs in, or 0 when it does not qualify (not one token per
  // sequence, too many sequences, or a block table wider than max_blocks).
  int32_t bucket(const StepBatch& b) const;
  // `b` padded to `bucket` sequences: padding rows read block 0 and write no KV slot.
  StepBatch pad(const StepBatch& b, int32_t bucket) const;

  // The graph recorded for a bucket, or NULL.
  const BackendGraph* find(int32_t bucket) const;
  void store(int32_t bucket, std::unique_ptr<BackendGraph> graph);
  int32_t recorded() const;

 private:
  int32_t max_batch_, max_blocks_;
  std::vector<std::unique_ptr<BackendGraph>> graphs_;  // by bucket
};

}  // namespace tsr
