// Drawing tokens from the sampler chain's distribution, the one place a token is chosen:
// the plain draw, and the exact verification of a draft token (Leviathan et al. 2023, with
// the draft as a point mass on its proposal), so that the output at every position is
// distributed exactly as the target's sampling distribution p, with or without speculation.
#pragma once

#include <cstdint>
#include <random>

#include "samplers/sampler_chain.h"

namespace tsr {

// Inverse-CDF draw with one 53-bit uniform from rng (the same seed gives the same token
// with any standard library, unlike std::discrete_distribution); a single-token (greedy)
// p draws nothing.
int32_t sample_from(const Distribution& p, std::mt19937_64& rng);

// Accepts `draft` with probability p(draft). On rejection, *token receives a draw from p
// with the draft's mass removed and renormalized, and the result is false; on acceptance
// *token = draft. For a greedy p this accepts exactly the argmax.
bool verify_draft_token(const Distribution& p, int32_t draft, std::mt19937_64& rng, int32_t* token);

}  // namespace tsr
