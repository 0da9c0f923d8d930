#include "samplers/token_draw.h"

#include <cmath>

#include "base/error.h"
#include "tessera/draft.h"

namespace tsr {

namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // SplitMix64's increment (2^64 / φ)

// SplitMix64's output function (Steele, Lea and Flood 2014, Stafford's mix 13).
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

double position_uniform(uint64_t seed, uint64_t position) {
  const uint64_t state = mix64(seed) + (position + 1) * kGamma;
  return double(mix64(state) >> 11) * 0x1p-53;
}

int32_t sample_from(const Distribution& p, double u) {
  if (p.tokens.empty()) throw Error("sampling: the distribution is empty");
  if (p.tokens.size() == 1) return p.tokens[0].id;
  int32_t winner = -1;
  double best = INFINITY;
  for (const TokenProb& t : p.tokens) {  // ascending id: a tie stays with the lower
    if (t.p <= 0) continue;
    const double time = tsr_draft_race_time(u, t.id, t.p, best);
    if (time < best) best = time, winner = t.id;
  }
  return winner >= 0 ? winner : p.tokens[0].id;
}

bool verify_draft_token(const Distribution& p, int32_t draft, double u, int32_t* token) {
  *token = sample_from(p, u);
  return *token == draft;
}

}  // namespace tsr
