// Drawing tokens from the sampler chain's distribution, the one place a token is chosen:
// the plain draw, and the exact verification of a draft token (Leviathan et al. 2023, with
// the draft as a point mass on its proposal), so that the output at every position is
// distributed exactly as the target's sampling distribution p, with or without speculation.
//
// Randomness is counter-based: the uniform that decides a request's output position t is
// a function of (seed, t) alone, never of how many draws came before. Verification
// couples the draft to that draw (the token is the exponential race's winner over p, keyed
// by that uniform; the draft is accepted iff it equals it), so a seeded request produces
// the same tokens whatever was drafted, how many tokens each step verified, and what else
// was batched. The race (tessera/draft.h, tsr_draft_sampling) rather than an inverse CDF:
// a draft running the same race over a nearby distribution picks the same token far more
// often (Gumbel coupling), which is what makes sampled drafts pay.
#pragma once

#include <cstdint>

#include "samplers/sampler_chain.h"

namespace tsr {

// The uniform in [0, 1) (53 bits) for output position `position` of a request seeded with
// `seed`: element `position` of the SplitMix64 stream that starts at a mix of the seed, so
// that nearby seeds (the n choices of one request use seed, seed + 1, ...) give unrelated
// streams.
double position_uniform(uint64_t seed, uint64_t position);

// The draw keyed by u ∈ [0, 1): the token x with the least E(x) / p(x), E(x) the race's
// exponential of x at u (tsr_draft_race_exponential), ties to the lower id; an exact draw
// from p. A single-token (greedy) p ignores u.
int32_t sample_from(const Distribution& p, double u);

// Verifies `draft` against p: *token = sample_from(p, u), and the result says whether it
// equals the draft. For a point-mass draft this is exactly Leviathan et al.'s rule: the
// draft is accepted with probability p(draft), and a rejection yields p with the draft's
// mass removed and renormalized. For a greedy p it accepts exactly the argmax.
bool verify_draft_token(const Distribution& p, int32_t draft, double u, int32_t* token);

}  // namespace tsr
