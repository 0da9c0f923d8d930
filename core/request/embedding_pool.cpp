#include "core/request/embedding_pool.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace tsr {

EmbeddingPool::EmbeddingPool(Pooling pooling, int32_t n_prompt) : pooling_(pooling), n_prompt_(n_prompt) {
  if (pooling == Pooling::RANK || n_prompt <= 0) {
    throw Error("an embedding pool needs last, mean or cls pooling over a non-empty prompt", TSR_STATUS_INTERNAL);
  }
}

std::pair<int32_t, int32_t> EmbeddingPool::rows(int32_t start, int32_t n) const {
  const int32_t end = std::min(start + n, n_prompt_);
  auto only = [&](int32_t pos) { return start <= pos && pos < end ? std::pair{pos, pos + 1} : std::pair{0, 0}; };
  switch (pooling_) {
    case Pooling::MEAN: return start < end ? std::pair{start, end} : std::pair{0, 0};
    case Pooling::CLS: return only(0);
    default: return only(n_prompt_ - 1);
  }
}

void EmbeddingPool::add(std::span<const float> states, int32_t count) {
  if (count <= 0 || states.empty() || states.size() % size_t(count) != 0 || added_ + count > needed() ||
      (!sum_.empty() && states.size() / size_t(count) != sum_.size())) {
    throw Error("embedding states do not match the pooling's rows", TSR_STATUS_INTERNAL);
  }
  const size_t width = states.size() / size_t(count);
  sum_.resize(width, 0.0);
  for (size_t r = 0; r < size_t(count); ++r) {
    for (size_t i = 0; i < width; ++i) sum_[i] += states[r * width + i];
  }
  added_ += count;
}

void EmbeddingPool::reset() {
  sum_.clear();
  added_ = 0;
}

std::vector<float> EmbeddingPool::normalized() const {
  if (!complete()) throw Error("an embedding read before its prompt was computed", TSR_STATUS_INTERNAL);
  double norm = 0;
  for (double v : sum_) norm += v * v;
  norm = std::sqrt(norm);  // the mean's 1/n cancels in the normalization
  std::vector<float> out(sum_.size());
  for (size_t i = 0; i < sum_.size(); ++i) out[i] = norm > 0 ? float(sum_[i] / norm) : 0.0f;
  return out;
}

}  // namespace tsr
