#include "samplers/sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tsr {

int32_t sample_greedy(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t sample_temperature(std::span<const float> logits, float temperature, std::mt19937_64& rng) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weights(logits.size());
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    weights[i] = std::exp(double(logits[i] - max_logit) / temperature);
    total += weights[i];
  }
  // Inverse-CDF draw with a 53-bit uniform: reproducible across standard libraries,
  // unlike std::discrete_distribution.
  const double u = double(rng() >> 11) * 0x1p-53 * total;
  double cumulative = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    cumulative += weights[i];
    if (u < cumulative) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(logits.size() - 1);
}

}  // namespace tsr
