#include "samplers/sampler_chain.h"
#include "samplers/token_draw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "tessera/draft.h"

namespace tsr {
namespace {

using Probs = std::map<int32_t, double>;  // token → expected probability
using S = SamplerStage;

constexpr float kInf = std::numeric_limits<float>::infinity();

// logits ln(1), ln(2), ln(3), ln(4): softmax is exactly [0.1, 0.2, 0.3, 0.4].
const std::vector<float> kTenths{std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f)};

Distribution run(const SamplingParams& p, std::span<const float> logits,
                 std::vector<int32_t> prompt = {}, std::vector<int32_t> output = {}) {
  return SamplerChain(p).apply(logits, prompt, output);
}

// Normalised weights, for expectations written as "p ∝ w".
Probs proportional(const Probs& weights) {
  double total = 0;
  for (const auto& [id, w] : weights) total += w;
  Probs p;
  for (const auto& [id, w] : weights) p[id] = w / total;
  return p;
}

void expect_dist(const Distribution& d, const Probs& expected) {
  ASSERT_EQ(d.tokens.size(), expected.size());
  auto it = expected.begin();
  for (const TokenProb& t : d.tokens) {
    EXPECT_EQ(t.id, it->first);
    EXPECT_NEAR(t.p, it->second, 1e-6) << "token " << t.id;
    ++it;
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), TSR_STATUS_INVALID_ARGUMENT);
    return e.what();
  }
  ADD_FAILURE() << "no tsr::Error thrown";
  return "";
}

// --- single stages -------------------------------------------------------------------

TEST(SamplerChain, NeutralParamsGiveSoftmax) {
  expect_dist(run({}, kTenths), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
}

TEST(SamplerChain, TemperatureScalesLogits) {
  SamplingParams p;
  p.temperature = 0.5f;  // p ∝ w²
  expect_dist(run(p, kTenths), proportional({{0, 1}, {1, 4}, {2, 9}, {3, 16}}));
  p.temperature = 2.0f;  // p ∝ √w
  expect_dist(run(p, kTenths),
              proportional({{0, 1}, {1, std::sqrt(2.0)}, {2, std::sqrt(3.0)}, {3, 2}}));
}

TEST(SamplerChain, GreedyIsArgmaxWithLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  expect_dist(run(p, kTenths), {{3, 1.0}});
  const std::vector<float> tied{1, 3, 3, 0};
  expect_dist(run(p, tied), {{1, 1.0}});
}

// A temperature so small that l / t overflows is the greedy limit, not NaN probabilities
// (and an empty distribution that sampling would turn into token -1).
TEST(SamplerChain, TinyTemperatureIsGreedy) {
  SamplingParams p;
  p.temperature = 1e-40f;
  expect_dist(run(p, kTenths), {{3, 1.0}});
  const std::vector<float> tied_and_banned{1, 3, 3, -std::numeric_limits<float>::infinity()};
  expect_dist(run(p, tied_and_banned), {{1, 1.0}});
}

TEST(SamplerChain, TopKKeepsLargest) {
  SamplingParams p;
  p.top_k = 2;
  expect_dist(run(p, kTenths), proportional({{2, 3}, {3, 4}}));
  p.top_k = 10;  // more than the vocabulary: no-op
  expect_dist(run(p, kTenths), {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
  p.top_k = 1;  // a tie at the boundary keeps the lowest id
  const std::vector<float> tied{1, 2, 2, 0};
  expect_dist(run(p, tied), {{1, 1.0}});
}

TEST(SamplerChain, TopPKeepsSmallestPrefixReachingP) {
  SamplingParams p;
  p.top_p = 0.65f;  // cumulative 0.4, 0.7
  expect_dist(run(p, kTenths), proportional({{2, 3}, {3, 4}}));
  p.top_p = 0.75f;  // 0.4, 0.7, 0.9
  expect_dist(run(p, kTenths), proportional({{1, 2}, {2, 3}, {3, 4}}));
  p.top_p = 0.0f;  // min_keep = 1
  expect_dist(run(p, kTenths), {{3, 1.0}});
}

TEST(SamplerChain, MinPKeepsTokensAboveFractionOfMax) {
  SamplingParams p;
  p.min_p = 0.6f;  // threshold 0.24
  expect_dist(run(p, kTenths), proportional({{2, 3}, {3, 4}}));
  p.min_p = 0.3f;  // threshold 0.12
  expect_dist(run(p, kTenths), proportional({{1, 2}, {2, 3}, {3, 4}}));
  p.min_p = 1.0f;
  expect_dist(run(p, kTenths), {{3, 1.0}});
}

TEST(SamplerChain, TypicalPKeepsTokensNearestTheEntropy) {
  // H = -Σ p ln p = 1.27985; |-ln p - H| = 1.0227, 0.3296, 0.0759, 0.3636 for tokens 0..3,
  // so the typical order is 2 (0.3), 1 (0.2), 3 (0.4), 0 (0.1).
  SamplingParams p;
  p.typical_p = 0.45f;  // cumulative 0.3, 0.5 > 0.45: the most likely token is dropped
  expect_dist(run(p, kTenths), {{1, 0.4}, {2, 0.6}});
  p.typical_p = 0.25f;
  expect_dist(run(p, kTenths), {{2, 1.0}});
  p.typical_p = 0.75f;  // 0.3, 0.5, 0.9
  expect_dist(run(p, kTenths), proportional({{1, 2}, {2, 3}, {3, 4}}));
}

TEST(SamplerChain, GreedyAfterTypicalTakesArgmaxOfSurvivors) {
  SamplingParams p;
  p.typical_p = 0.45f;
  p.temperature = 0;
  expect_dist(run(p, kTenths), {{2, 1.0}});
}

// --- penalties -----------------------------------------------------------------------

const std::vector<float> kMixed{2.0f, -1.0f, 1.0f, 0.5f};

Probs softmax_of(const std::map<int32_t, double>& logits) {
  Probs w;
  for (const auto& [id, l] : logits) w[id] = std::exp(l);
  return proportional(w);
}

TEST(SamplerChain, RepeatPenaltyDividesPositiveMultipliesNegative) {
  SamplingParams p;
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = -1;
  // Prompt and output both count; a repeated token is penalised once.
  expect_dist(run(p, kMixed, {0, 1}, {0}), softmax_of({{0, 1.0}, {1, -2.0}, {2, 1.0}, {3, 0.5}}));
}

TEST(SamplerChain, RepeatPenaltyWindowSpansPromptAndOutput) {
  SamplingParams p;
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;  // history 1 2 | 0 0: only token 0 is in the window
  expect_dist(run(p, kMixed, {1, 2}, {0, 0}),
              softmax_of({{0, 1.0}, {1, -1.0}, {2, 1.0}, {3, 0.5}}));
  p.repeat_last_n = 3;  // now token 2 as well
  expect_dist(run(p, kMixed, {1, 2}, {0, 0}),
              softmax_of({{0, 1.0}, {1, -1.0}, {2, 0.5}, {3, 0.5}}));
  p.repeat_last_n = 0;  // off
  expect_dist(run(p, kMixed, {1, 2}, {0, 0}),
              softmax_of({{0, 2.0}, {1, -1.0}, {2, 1.0}, {3, 0.5}}));
}

TEST(SamplerChain, FrequencyAndPresenceCountGeneratedTokensOnly) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  // Token 0 generated twice: -2·0.5 - 0.25; token 2 once: -0.5 - 0.25; token 1 only in the prompt.
  expect_dist(run(p, kMixed, {1, 1}, {0, 0, 2}),
              softmax_of({{0, 0.75}, {1, -1.0}, {2, 0.25}, {3, 0.5}}));
}

TEST(SamplerChain, RepeatPenaltyThenFrequencyAndPresence) {
  SamplingParams p;
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  // Token 0: 2/2 - 1.25; token 1 (prompt only): -1·2; token 2: 1/2 - 0.75.
  expect_dist(run(p, kMixed, {1}, {0, 0, 2}),
              softmax_of({{0, -0.25}, {1, -2.0}, {2, -0.25}, {3, 0.5}}));
}

TEST(SamplerChain, PenaltiesAfterTruncationTouchOnlySurvivors) {
  SamplingParams p;
  p.top_k = 3;
  p.repeat_penalty = 2.0f;
  p.order = {S::TOP_K, S::PENALTIES};
  // top-k keeps 1, 2, 3; ln 4 / 2 = ln 2 for token 3; token 0 is already gone.
  expect_dist(run(p, kTenths, {}, {3, 0}), proportional({{1, 2}, {2, 3}, {3, 2}}));
}

// --- logit bias ----------------------------------------------------------------------

TEST(SamplerChain, LogitBiasAddsAndMinusInfinityBans) {
  SamplingParams p;
  p.logit_bias = {{0, 0.5f}, {0, 0.5f}, {3, -kInf}};  // biases for one token add up
  const Distribution d = run(p, kTenths);
  expect_dist(d, proportional({{0, std::exp(1.0)}, {1, 2}, {2, 3}}));
  EXPECT_EQ(d.prob(3), 0.0);
}

TEST(SamplerChain, BanningEveryTokenIsAnError) {
  SamplingParams p;
  p.logit_bias = {{0, -kInf}, {1, -kInf}};
  const std::vector<float> logits{1, 2};
  EXPECT_NE(error_of([&] { run(p, logits); }).find("-inf"), std::string::npos);
  p.temperature = 0;  // greedy has no argmax either
  EXPECT_NE(error_of([&] { run(p, logits); }).find("-inf"), std::string::npos);
}

TEST(SamplerChain, LogitBiasOutsideVocabularyIsAnError) {
  SamplingParams p;
  p.logit_bias = {{4, 1.0f}};
  EXPECT_NE(error_of([&] { run(p, kTenths); }).find("token 4"), std::string::npos);
}

// --- combinations and orders ---------------------------------------------------------

TEST(SamplerChain, TruncationOrderMatters) {
  SamplingParams p;
  p.top_k = 3;
  p.top_p = 0.75f;
  // top-k first renormalises to 2/9, 3/9, 4/9: cumulative 0.44, 0.78 ≥ 0.75.
  p.order = {S::TOP_K, S::TOP_P};
  expect_dist(run(p, kTenths), proportional({{2, 3}, {3, 4}}));
  // top-p first on 0.4, 0.7, 0.9 keeps three, which top-k 3 leaves alone.
  p.order = {S::TOP_P, S::TOP_K};
  expect_dist(run(p, kTenths), proportional({{1, 2}, {2, 3}, {3, 4}}));
}

TEST(SamplerChain, TemperatureLastTruncatesOnUntemperedProbabilities) {
  SamplingParams p;
  p.temperature = 0.5f;
  p.min_p = 0.6f;
  // Default order: min-p on 0.1..0.4 keeps 2 and 3 (≥ 0.24), then p ∝ w².
  expect_dist(run(p, kTenths), proportional({{2, 9}, {3, 16}}));
  // Temperature first: tempered p = w²/30, threshold 0.6·16/30 > 9/30.
  p.order = {S::TEMPERATURE, S::MIN_P};
  expect_dist(run(p, kTenths), {{3, 1.0}});
}

TEST(SamplerChain, DefaultOrderWithEveryStage) {
  // Weights 1..8 for tokens 0..7.
  std::vector<float> logits;
  for (int i = 1; i <= 8; ++i) logits.push_back(std::log(float(i)));
  SamplingParams p;
  p.logit_bias = {{7, -kInf}};  // ban the favourite
  p.repeat_penalty = 2.0f;      // token 6 (ln 7) → ln 7 / 2 = ln √7, weight 2.6458
  p.top_k = 5;                  // keeps weights 6, 5, 4, 3, √7 → tokens 5, 4, 3, 2, 6
  p.top_p = 0.8f;               // of 20.6458: cumulative 0.29, 0.53, 0.73, 0.87 → drops token 6
  p.min_p = 0.55f;              // threshold 0.55·6 = 3.3 on weights 6, 5, 4, 3 → drops token 2
  p.temperature = 0.5f;         // p ∝ w² over tokens 3, 4, 5
  expect_dist(run(p, logits, {6}, {}), proportional({{3, 16}, {4, 25}, {5, 36}}));
}

TEST(SamplerChain, TopKOnLargeVocabulary) {
  const size_t vocab = 128 * 1024;
  std::vector<float> logits(vocab);
  for (size_t i = 0; i < vocab; ++i) logits[i] = float((i * 7919) % vocab) / 1000.0f;
  SamplingParams p;
  p.top_k = 40;
  const Distribution d = run(p, logits);
  ASSERT_EQ(d.tokens.size(), 40u);
  for (const TokenProb& t : d.tokens) EXPECT_GE(logits[size_t(t.id)], float(vocab - 40) / 1000.0f);
}

// --- sampling ------------------------------------------------------------------------

// The draws a request's positions make (position_uniform keys the race) follow p, and each
// is the token with the least exponential / probability.
TEST(TokenDraw, TheRaceAtEachPositionsUniformDrawsFromP) {
  const SamplerChain chain(SamplingParams{});
  const Distribution d = chain.apply(kTenths, {}, {});
  std::vector<int> counts(4);
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = position_uniform(2024, uint64_t(i));
    const int32_t token = sample_from(d, u);
    counts[size_t(token)]++;
    if (i < 1000) {
      for (const TokenProb& t : d.tokens) {
        ASSERT_LE(tsr_draft_race_exponential(u, token) / d.prob(token), tsr_draft_race_exponential(u, t.id) / t.p);
      }
    }
  }
  for (const TokenProb& t : d.tokens) EXPECT_NEAR(double(counts[size_t(t.id)]) / n, t.p, 0.004) << "token " << t.id;
}

// The race rules most tokens out without their logarithm (tsr_draft_race_time); the
// winner is still the least time of all, on a 152k vocabulary of peaked and of flat
// distributions.
TEST(TokenDraw, TheRaceRulesOutOnlyTokensThatCannotWin) {
  std::mt19937_64 rng(17);
  for (const double spread : {0.5, 3.0}) {
    std::normal_distribution<double> normal(0.0, spread);
    Distribution d;
    double sum = 0;
    for (int32_t id = 0; id < 152000; ++id) sum += d.tokens.emplace_back(TokenProb{id, std::exp(normal(rng))}).p;
    for (TokenProb& t : d.tokens) t.p /= sum;
    for (int i = 0; i < 50; ++i) {
      const double u = position_uniform(spread > 1 ? 3 : 4, uint64_t(i));
      int32_t least = -1;
      double best = INFINITY;
      for (const TokenProb& t : d.tokens) {
        const double time = tsr_draft_race_exponential(u, t.id) / t.p;
        if (time < best) best = time, least = t.id;
      }
      ASSERT_EQ(sample_from(d, u), least) << "spread " << spread << ", draw " << i;
    }
  }
}

// The race's exponentials: mean 1 and variance 1 over tokens and over uniforms, and
// uncorrelated between neighbouring ids.
TEST(TokenDraw, RaceExponentialsAreUnitExponentials) {
  const int n = 200000;
  double sum = 0, sum_sq = 0, lag = 0;
  for (int i = 0; i < n; ++i) {
    const double u = position_uniform(5, uint64_t(i / 64));
    const double e = tsr_draft_race_exponential(u, i % 64), next = tsr_draft_race_exponential(u, i % 64 + 1);
    ASSERT_GE(e, 0.0);
    sum += e;
    sum_sq += e * e;
    lag += (e - 1) * (next - 1);
  }
  EXPECT_NEAR(sum / n, 1.0, 0.01);
  EXPECT_NEAR(sum_sq / n - (sum / n) * (sum / n), 1.0, 0.03);
  EXPECT_NEAR(lag / n, 0.0, 0.012);
}

std::vector<float> random_logits(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> logits(n);
  for (float& l : logits) l = float(double(rng() >> 11) * 0x1p-53 * 8.0);
  return logits;
}

SamplingParams typical_request() {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.repeat_penalty = 1.1f;
  return p;
}

std::vector<int32_t> generate(const SamplerChain& chain, uint64_t seed, int n) {
  const std::vector<float> logits = random_logits(500, 1);
  const std::vector<int32_t> prompt{1, 2, 3};
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(sample_from(chain.apply(logits, prompt, out), position_uniform(seed, uint64_t(i))));
  return out;
}

TEST(SamplerChain, SameSeedSameSequence) {
  const SamplerChain chain(typical_request());
  const auto first = generate(chain, 77, 100);
  EXPECT_EQ(first, generate(chain, 77, 100));
  EXPECT_NE(first, generate(chain, 78, 100));
}

TEST(SamplerChain, RequestsSharingAChainAreIndependent) {
  const SamplerChain chain(typical_request());
  const auto expected = generate(chain, 5, 50);
  // Interleave request A (seed 5) with request B (seed 6) token by token.
  const std::vector<float> logits = random_logits(500, 1);
  const std::vector<int32_t> prompt{1, 2, 3};
  std::vector<int32_t> out_a, out_b;
  for (int i = 0; i < 50; ++i) {
    out_b.push_back(sample_from(chain.apply(logits, prompt, out_b), position_uniform(6, uint64_t(i))));
    out_a.push_back(sample_from(chain.apply(logits, prompt, out_a), position_uniform(5, uint64_t(i))));
  }
  EXPECT_EQ(out_a, expected);
}

// Regularised upper incomplete gamma Q(a, x) (Numerical Recipes §6.2): the chi-square
// survival function is Q(df / 2, x / 2).
double gamma_q(double a, double x) {
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {  // series for P(a, x)
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000 && std::abs(term) > std::abs(sum) * 1e-15; ++n)
      sum += term *= x / (a + n);
    return 1.0 - sum * std::exp(log_prefix);
  }
  // Lentz's continued fraction for Q(a, x).
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    d = std::abs(d) < tiny ? tiny : d;
    c = b + an / c;
    c = std::abs(c) < tiny ? tiny : c;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_prefix) * h;
}

TEST(SamplerChain, ChiSquareSurvivalFunctionMatchesTables) {
  EXPECT_NEAR(gamma_q(0.5, 3.841458820694124 / 2), 0.05, 1e-9);   // df 1
  EXPECT_NEAR(gamma_q(5.0, 23.209251158954356 / 2), 0.01, 1e-9);  // df 10
  EXPECT_NEAR(gamma_q(15.0, 29.336 / 2), 0.5, 1e-3);              // df 30, median
}

TEST(SamplerChain, DrawsFollowTheDistribution) {
  SamplingParams p = typical_request();
  p.top_k = 12;
  const SamplerChain chain(p);
  const std::vector<float> logits = random_logits(64, 3);
  const std::vector<int32_t> prompt{4, 5};
  const Distribution d = chain.apply(logits, prompt, {});
  ASSERT_GT(d.tokens.size(), 3u);
  std::map<int32_t, int> counts;
  const int draws = 100000;
  for (int i = 0; i < draws; ++i) counts[sample_from(d, position_uniform(99, uint64_t(i)))]++;
  double chi2 = 0;
  for (const TokenProb& t : d.tokens) {
    const double expected = t.p * draws;
    chi2 += (counts[t.id] - expected) * (counts[t.id] - expected) / expected;
  }
  EXPECT_EQ(counts.size(), d.tokens.size()) << "a token outside the distribution was drawn";
  const double df = double(d.tokens.size() - 1);
  EXPECT_GT(gamma_q(df / 2, chi2 / 2), 0.001) << "chi2 = " << chi2 << ", df = " << df;
}

// --- distribution, order parsing and validation ----------------------------------------

TEST(SamplerChain, DistributionProbLooksUpById) {
  const Distribution d = run({}, kTenths);
  EXPECT_NEAR(d.prob(2), 0.3, 1e-6);
  EXPECT_EQ(d.prob(9), 0.0);
  EXPECT_EQ(d.prob(-1), 0.0);
}

TEST(SamplerOrder, ParsesLlamaCppNamesAndAliases) {
  EXPECT_EQ(parse_sampler_order("logit_bias;penalties;top_k;typical_p;top_p;min_p;temperature"),
            SamplingParams{}.order);
  EXPECT_EQ(parse_sampler_order("typ_p;temp"), (std::vector<S>{S::TYPICAL_P, S::TEMPERATURE}));
  EXPECT_TRUE(parse_sampler_order("").empty());
  for (S s : SamplingParams{}.order)
    EXPECT_EQ(parse_sampler_order(sampler_stage_name(s)), std::vector<S>{s});
}

TEST(SamplerOrder, UnknownStageIsNamed) {
  const std::string message = error_of([] { parse_sampler_order("penalties;top_q;temperature"); });
  EXPECT_NE(message.find("unknown stage 'top_q'"), std::string::npos) << message;
  EXPECT_NE(error_of([] { parse_sampler_order("top_k;;top_p"); }).find("unknown stage ''"),
            std::string::npos);
}

TEST(SamplerOrder, DuplicateStageIsAnError) {
  SamplingParams p;
  p.order = {S::TOP_K, S::TOP_P, S::TOP_K};
  EXPECT_NE(error_of([&] { SamplerChain{p}; }).find("'top_k' appears twice"), std::string::npos);
}

TEST(SamplerOrder, ActiveStageMissingFromOrderIsAnError) {
  SamplingParams p;
  p.order = parse_sampler_order("top_k;top_p");
  EXPECT_NO_THROW(SamplerChain{p});  // temperature 1 is off: leaving it out is fine
  p.temperature = 0;
  EXPECT_NE(error_of([&] { SamplerChain{p}; }).find("'temperature'"), std::string::npos);
}

TEST(SamplerChain, RejectsOutOfRangeParameters) {
  const auto message = [](void (*edit)(SamplingParams&)) {
    SamplingParams p;
    edit(p);
    return error_of([&] { SamplerChain{p}; });
  };
  EXPECT_NE(message([](SamplingParams& p) { p.temperature = -0.1f; }).find("temperature"),
            std::string::npos);
  EXPECT_NE(message([](SamplingParams& p) { p.top_k = -1; }).find("top_k"), std::string::npos);
  EXPECT_NE(message([](SamplingParams& p) { p.top_p = 1.5f; }).find("top_p"), std::string::npos);
  EXPECT_NE(message([](SamplingParams& p) { p.min_p = -0.5f; }).find("min_p"), std::string::npos);
  EXPECT_NE(message([](SamplingParams& p) { p.typical_p = 2.0f; }).find("typical_p"),
            std::string::npos);
  EXPECT_NE(message([](SamplingParams& p) { p.repeat_penalty = 0.0f; }).find("repeat_penalty"),
            std::string::npos);
  EXPECT_NE(message([](SamplingParams& p) { p.repeat_last_n = -2; }).find("repeat_last_n"),
            std::string::npos);
  EXPECT_NE(message([](SamplingParams& p) { p.frequency_penalty = NAN; }).find("frequency_penalty"),
            std::string::npos);
  EXPECT_NE(
      message([](SamplingParams& p) { p.presence_penalty = INFINITY; }).find("presence_penalty"),
      std::string::npos);
  EXPECT_NE(message([](SamplingParams& p) {
              p.logit_bias = {{-1, 1.0f}};
            }).find("logit_bias"),
            std::string::npos);
  EXPECT_NE(message([](SamplingParams& p) {
              p.logit_bias = {{1, INFINITY}};
            }).find("logit_bias"),
            std::string::npos);
}

TEST(SamplerChain, RejectsBadInputs) {
  const SamplerChain chain{SamplingParams{}};
  EXPECT_NE(error_of([&] { chain.apply({}, {}, {}); }).find("empty"), std::string::npos);
  const std::vector<float> nan_logits{0.0f, NAN};
  EXPECT_NE(error_of([&] { chain.apply(nan_logits, {}, {}); }).find("token 1"), std::string::npos);
  SamplingParams p;
  p.repeat_penalty = 1.1f;
  const std::vector<int32_t> prompt{7};
  EXPECT_NE(error_of([&] { SamplerChain(p).apply(kTenths, prompt, {}); }).find("token 7"),
            std::string::npos);
}

}  // namespace
}  // namespace tsr
