// Exact verification of draft tokens (Leviathan et al. 2023, with the draft as a point
// mass on its proposal): the output at every position is distributed exactly as the
// target's sampling distribution p, with or without speculation.
#pragma once

#include <cstdint>
#include <random>

#include "samplers/sampler_chain.h"

namespace tsr {

// Inverse-CDF draw with one 53-bit uniform; a single-token (greedy) p draws nothing.
int32_t sample_from(const Distribution& p, std::mt19937_64& rng);

// Accepts `draft` with probability p(draft). On rejection, *token receives a draw from p
// with the draft's mass removed and renormalized, and the result is false; on acceptance
// *token = draft. For a greedy p this accepts exactly the argmax.
bool verify_draft_token(const Distribution& p, int32_t draft, std::mt19937_64& rng, int32_t* token);

}  // namespace tsr
