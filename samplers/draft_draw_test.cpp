// The SDK's draw for drafts (tessera/sdk/draft_sampling.hpp) against the host's sampler
// chain and draw: on equal logits a draft proposes exactly the token the target draws, for
// every sampling setting the ABI describes; on nearby logits it mostly does.
#include "tessera/sdk/draft_sampling.hpp"

#include <gtest/gtest.h>

#include <random>

#include "samplers/sampler_chain.h"
#include "samplers/token_draw.h"

namespace tsr {
namespace {

std::vector<float> random_logits(std::mt19937_64& rng, size_t n, float spread) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(rng);
  return logits;
}

tsr_draft_sampling describe(const SamplingParams& p, const double* u) {
  return {sizeof(tsr_draft_sampling), u, 1, p.temperature, p.top_k, p.top_p, p.min_p, 0};
}

TEST(DraftDraw, EqualLogitsDrawTheTargetsToken) {
  std::mt19937_64 rng(7);
  std::vector<SamplingParams> settings(5);
  settings[0].temperature = 0.8f;
  settings[1].temperature = 1.0f, settings[1].top_k = 40, settings[1].top_p = 0.95f, settings[1].min_p = 0.05f;
  settings[2].temperature = 0.3f, settings[2].top_p = 0.5f;
  settings[3].temperature = 1.7f, settings[3].min_p = 0.2f;
  settings[4].temperature = 0.8f, settings[4].top_k = 3;
  for (const SamplingParams& params : settings) {
    const SamplerChain chain(params);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<float> logits = random_logits(rng, 97, 3.0f);
      if (trial % 5 == 0) logits[size_t(trial) % logits.size()] = -INFINITY;  // a banned token
      if (trial % 7 == 0) logits[3] = logits[4];                               // a tie
      const double u = double(rng() >> 11) * 0x1p-53;
      const int32_t target = sample_from(chain.apply(logits, {}, {}), u);
      const tsr_draft_sampling s = describe(params, &u);
      EXPECT_EQ(sdk::draw_as_target(logits, s, u), target) << "trial " << trial;
      float prob = 0;
      EXPECT_EQ(sdk::draft_token(logits, &s, 0, &prob), target);
      EXPECT_GT(prob, 0.0f);
    }
  }
}

// A reduced draft vocabulary (d2t): the draw runs over target ids, so the draft's token is
// the target's wherever the target's other tokens have no probability.
TEST(DraftDraw, MappedIdsDrawInTheTargetsOrder) {
  std::mt19937_64 rng(11);
  SamplingParams params;
  params.temperature = 0.9f;
  const SamplerChain chain(params);
  const std::vector<int32_t> d2t{40, 3, 17, 8, 25, 0};
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> draft = random_logits(rng, d2t.size(), 2.0f);
    std::vector<float> target(48, -INFINITY);
    for (size_t i = 0; i < d2t.size(); ++i) target[size_t(d2t[i])] = draft[i];
    const double u = double(rng() >> 11) * 0x1p-53;
    const tsr_draft_sampling s = describe(params, &u);
    EXPECT_EQ(d2t[size_t(sdk::draw_as_target(draft, s, u, d2t))], sample_from(chain.apply(target, {}, {}), u));
  }
}

// The coupling's point: a draft whose logits are near the target's proposes the token the
// target draws far more often than the target's probability of the draft's argmax.
TEST(DraftDraw, NearbyLogitsMostlyAgree) {
  std::mt19937_64 rng(3);
  SamplingParams params;
  params.temperature = 0.8f;
  const SamplerChain chain(params);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  double coupled = 0, argmax = 0;
  const int trials = 2000;
  for (int trial = 0; trial < trials; ++trial) {
    const std::vector<float> target = random_logits(rng, 64, 2.0f);
    std::vector<float> draft = target;
    for (float& l : draft) l += noise(rng);
    const Distribution p = chain.apply(target, {}, {});
    const double u = double(rng() >> 11) * 0x1p-53;
    const tsr_draft_sampling s = describe(params, &u);
    coupled += sdk::draw_as_target(draft, s, u) == sample_from(p, u);
    argmax += p.prob(int32_t(std::max_element(draft.begin(), draft.end()) - draft.begin()));
  }
  std::printf("[ stats    ] coupled draws agree %.3f, the draft's argmax %.3f\n", coupled / trials, argmax / trials);
  EXPECT_GT(coupled / trials, 0.75);
  EXPECT_GT(coupled / trials, argmax / trials + 0.2);
}

}  // namespace
}  // namespace tsr
