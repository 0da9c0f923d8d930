#include "samplers/token_draw.h"

#include "base/error.h"

namespace tsr {

namespace {

double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1p-53; }

// Draw from p restricted to ids other than `skip` (-1: none), renormalized.
int32_t sample_excluding(const Distribution& p, int32_t skip, std::mt19937_64& rng) {
  double total = 0;
  for (const TokenProb& t : p.tokens) {
    if (t.id != skip) total += t.p;
  }
  const double u = uniform01(rng) * total;
  double cumulative = 0;
  int32_t last = -1;
  for (const TokenProb& t : p.tokens) {
    if (t.id == skip) continue;
    cumulative += t.p;
    last = t.id;
    if (u < cumulative) return t.id;
  }
  return last;  // u landed on the rounding slack at the top
}

}  // namespace

int32_t sample_from(const Distribution& p, std::mt19937_64& rng) {
  if (p.tokens.empty()) throw Error("sampling: the distribution is empty");
  if (p.tokens.size() == 1) return p.tokens[0].id;
  return sample_excluding(p, -1, rng);
}

bool verify_draft_token(const Distribution& p, int32_t draft, std::mt19937_64& rng, int32_t* token) {
  const double p_draft = p.prob(draft);
  // Deterministic outcomes draw nothing, so greedy requests never touch the generator.
  const bool accept = p_draft >= 1.0 || (p_draft > 0 && uniform01(rng) < p_draft);
  if (accept) {
    *token = draft;
    return true;
  }
  *token = p_draft > 0 ? sample_excluding(p, draft, rng) : sample_from(p, rng);
  return false;
}

}  // namespace tsr
