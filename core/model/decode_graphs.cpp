#include "core/model/decode_graphs.h"

#include <algorithm>

namespace tsr {

namespace {

constexpr int32_t kSingleBuckets = 15;  // below the GPU backends' GEMM threshold of 16 rows
constexpr int32_t kBucketStep = 8;

}  // namespace

DecodeGraphs::DecodeGraphs(int32_t max_batch, int32_t max_blocks)
    : max_batch_(std::max(max_batch, 1)),
      max_blocks_(std::max(max_blocks, 1)),
      graphs_(static_cast<size_t>(max_batch_) + 1) {}

int32_t DecodeGraphs::bucket(const StepBatch& b) const {
  const int32_t n = b.num_tokens();
  if (n == 0 || n > max_batch_ || b.num_seqs() != n || b.max_blocks > max_blocks_ ||
      b.logit_rows.size() != size_t(n)) {
    return 0;
  }
  for (int32_t i = 0; i < n; ++i) {
    if (b.query_start_loc[i + 1] != i + 1 || b.logit_rows[i] != i) return 0;
  }
  if (n <= kSingleBuckets) return n;
  return std::min((n + kBucketStep - 1) / kBucketStep * kBucketStep, max_batch_);
}

StepBatch DecodeGraphs::pad(const StepBatch& b, int32_t bucket) const {
  const int32_t n = b.num_tokens();
  StepBatch p;
  p.tokens = b.tokens;
  p.tokens.resize(bucket, 0);
  p.positions = b.positions;
  p.positions.resize(bucket, 0);
  p.cache_positions = b.cache_positions;
  p.cache_positions.resize(bucket, 0);
  p.slot_mapping = b.slot_mapping;
  p.slot_mapping.resize(bucket, -1);  // padding writes no KV
  p.seq_lens = b.seq_lens;
  p.seq_lens.resize(bucket, 1);       // and attends to one key of block 0
  p.query_start_loc.resize(size_t(bucket) + 1);
  p.logit_rows.resize(bucket);
  for (int32_t i = 0; i <= bucket; ++i) p.query_start_loc[i] = i;
  for (int32_t i = 0; i < bucket; ++i) p.logit_rows[i] = i;
  p.max_blocks = max_blocks_;
  p.block_tables.assign(size_t(bucket) * max_blocks_, 0);
  for (int32_t s = 0; s < n; ++s) {
    std::copy_n(b.block_tables.begin() + size_t(s) * b.max_blocks, b.max_blocks,
                p.block_tables.begin() + size_t(s) * max_blocks_);
  }
  return p;
}

const BackendGraph* DecodeGraphs::find(int32_t bucket) const { return graphs_[bucket].get(); }

void DecodeGraphs::store(int32_t bucket, std::unique_ptr<BackendGraph> graph) {
  graphs_[bucket] = std::move(graph);
}

int32_t DecodeGraphs::recorded() const {
  return static_cast<int32_t>(std::count_if(graphs_.begin(), graphs_.end(),
                                            [](const auto& g) { return g != nullptr; }));
}

}  // namespace tsr
