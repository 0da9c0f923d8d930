// Per-token log probabilities for the logprobs / top_logprobs parameters.
//
// The values are the log-softmax of the model's raw logits (before temperature, penalties
// and truncation), as vLLM reports by default: they describe the model, not the sampler
// settings of one request.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace tsr::server {

struct TopLogprob {
  int32_t id;
  float logprob;
};

struct TokenLogprob {
  int32_t id;
  float logprob;
  std::vector<TopLogprob> top;  // the most likely tokens, most likely first
};

// RequestParams::on_logits hands over the row each generated token is sampled from just
// before the token is appended; take() pairs the next tokens with those rows in order.
// Both run on the engine's step thread.
class LogprobCollector {
 public:
  explicit LogprobCollector(int32_t top_n) : top_n_(top_n) {}

  void on_logits(std::span<const float> row) { rows_.emplace_back(row.begin(), row.end()); }
  std::vector<TokenLogprob> take(std::span<const int32_t> tokens);

 private:
  int32_t top_n_;
  std::deque<std::vector<float>> rows_;
};

}  // namespace tsr::server
