// Token selection from a row of logits. The full sampler chain (penalties, top-k/p,
// min-p, typical) builds on these two primitives.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace tsr {

// Index of the largest logit; the lowest index wins ties (as llama.cpp's greedy sampler).
int32_t sample_greedy(std::span<const float> logits);

// Draws from softmax(logits / temperature); temperature must be > 0.
int32_t sample_temperature(std::span<const float> logits, float temperature, std::mt19937_64& rng);

}  // namespace tsr
