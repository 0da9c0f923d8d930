// The sampler chain: logits → (logit bias, penalties, truncations, temperature in a
// configurable order) → a probability distribution → one token.
//
// Every stage follows llama.cpp's implementation (src/llama-sampling.cpp), so a request
// with the same parameters and order keeps the same candidate set as llama.cpp. Two
// deliberate differences, both documented at the field they concern:
//   * frequency/presence penalties count generated tokens only (OpenAI semantics);
//   * intermediate softmaxes are computed in double and ties are broken by lowest id,
//     so results do not depend on the standard library's sort.
//
// The chain is immutable and holds no random state: a request's draws are functions of
// its seed and output position (samplers/token_draw.h), so requests sharing a chain cannot
// perturb each other's draws.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tsr {

enum class SamplerStage { LOGIT_BIAS, PENALTIES, TOP_K, TYPICAL_P, TOP_P, MIN_P, TEMPERATURE };

// The stage's name in order strings: logit_bias, penalties, top_k, typical_p, top_p, min_p,
// temperature.
std::string_view sampler_stage_name(SamplerStage stage);

// Parses llama.cpp's --samplers syntax, e.g. "penalties;top_k;typical_p;top_p;min_p;temperature".
// Also accepts llama.cpp's aliases "typ_p" and "temp". An unknown or empty entry is a
// tsr::Error that names it.
std::vector<SamplerStage> parse_sampler_order(std::string_view text);

struct LogitBias {
  int32_t token;
  float bias;  // added to the logit; -infinity bans the token
};

// Defaults are neutral (every stage off, temperature 1): the CLI and configuration layers
// supply llama.cpp's user-facing defaults (temp 0.8, top_k 40, top_p 0.95, min_p 0.05).
struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy: the argmax of what earlier stages left
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  float typical_p = 1.0f;    // 1 = off

  // llama.cpp's repetition penalty: a token among the last repeat_last_n tokens of
  // prompt + output has a positive logit divided by it, a non-positive one multiplied.
  float repeat_penalty = 1.0f;  // 1 = off
  int32_t repeat_last_n = 64;   // -1 = the whole history, 0 = off

  // OpenAI semantics: logit -= count * frequency_penalty + (count > 0) * presence_penalty,
  // with count taken over the generated tokens only. llama.cpp instead counts the last
  // penalty_last_n tokens of prompt + output (its repeat window). We follow OpenAI because
  // these two fields are OpenAI API parameters and clients tune them against that
  // behaviour; penalising prompt tokens would also make the effect depend on prompt length.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;

  std::vector<LogitBias> logit_bias;  // entries for the same token add up

  // llama.cpp's default chain, with its logit-bias sampler (which it always runs first)
  // as an explicit stage. Temperature comes last: the truncations see the softmax of the
  // untempered logits and temperature only reshapes the surviving candidates. A stage
  // missing from the order does not run; leaving out one whose parameter is not off is an
  // error rather than a silently ignored setting.
  std::vector<SamplerStage> order{SamplerStage::LOGIT_BIAS, SamplerStage::PENALTIES,
                                  SamplerStage::TOP_K,      SamplerStage::TYPICAL_P,
                                  SamplerStage::TOP_P,      SamplerStage::MIN_P,
                                  SamplerStage::TEMPERATURE};
};

struct TokenProb {
  int32_t id;
  double p;
};

// The final distribution: ascending token id (so a verifier finds p(token) by binary
// search), every p > 0, summing to 1 up to rounding.
struct Distribution {
  std::vector<TokenProb> tokens;

  double prob(int32_t id) const;  // 0 for a token outside the support
};

class SamplerChain {
 public:
  // Throws tsr::Error naming the first out-of-range parameter.
  explicit SamplerChain(SamplingParams params);

  const SamplingParams& params() const { return params_; }

  // The distribution a token is drawn from (samplers/token_draw.h), given the row of logits for the next token and
  // the tokens so far. Throws tsr::Error for a NaN or +inf logit, a token id outside the
  // vocabulary, or when every token ends up with probability 0.
  Distribution apply(std::span<const float> logits, std::span<const int32_t> prompt,
                     std::span<const int32_t> output) const;

 private:
  SamplingParams params_;
  std::unordered_map<int32_t, float> bias_;  // logit_bias summed per token
};

}  // namespace tsr
