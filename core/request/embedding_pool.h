// The pooled embedding of an embedding request: which of its prompt positions each
// prefill chunk must return hidden states for, their running sum or pick, and the result,
// L2-normalized as llama-server's and vLLM's /v1/embeddings return it.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/model/pooling.h"

namespace tsr {

class EmbeddingPool {
 public:
  // `pooling` is LAST, MEAN or CLS, over n_prompt > 0 tokens.
  EmbeddingPool(Pooling pooling, int32_t n_prompt);

  // The positions [first, second) of a chunk covering [start, start + n) the pooling reads:
  // every one for MEAN, position 0 for CLS, the last prompt token for LAST (else empty).
  std::pair<int32_t, int32_t> rows(int32_t start, int32_t n) const;
  // The states of `count` rows of rows(start, n), in order, all as wide as the first.
  void add(std::span<const float> states, int32_t count);
  // Forgets what was added: a preempted request computes its prompt again.
  void reset();
  bool complete() const { return added_ == needed(); }
  // The pooled state divided by its Euclidean norm (zero stays zero). Needs complete().
  std::vector<float> normalized() const;

 private:
  int32_t needed() const { return pooling_ == Pooling::MEAN ? n_prompt_ : 1; }

  Pooling pooling_;
  int32_t n_prompt_;
  // Empty until the first add; double: a mean over a long prompt keeps its float sum exact.
  std::vector<double> sum_;
  int32_t added_ = 0;
};

}  // namespace tsr
