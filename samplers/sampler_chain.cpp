#include "samplers/sampler_chain.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "base/error.h"

namespace tsr {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// llama.cpp's common sampler passes min_keep = 1 to every truncation: none may empty the set.
constexpr size_t kMinKeep = 1;

constexpr std::array<std::pair<std::string_view, SamplerStage>, 9> kStageNames{{
    {"logit_bias", SamplerStage::LOGIT_BIAS},
    {"penalties", SamplerStage::PENALTIES},
    {"top_k", SamplerStage::TOP_K},
    {"typical_p", SamplerStage::TYPICAL_P},
    {"top_p", SamplerStage::TOP_P},
    {"min_p", SamplerStage::MIN_P},
    {"temperature", SamplerStage::TEMPERATURE},
    {"typ_p", SamplerStage::TYPICAL_P},  // llama.cpp's canonical name
    {"temp", SamplerStage::TEMPERATURE},
}};

struct Candidate {
  int32_t id;
  float logit;
};

// The working set between stages, like llama.cpp's llama_token_data_array. `dense`: entry i
// is token i (nothing removed or reordered yet), so per-token stages index instead of
// searching. `sorted`: descending logit, lowest id first on ties.
struct Candidates {
  std::vector<Candidate> items;
  bool dense = true;
  bool sorted = false;
};

// A history token's share in the penalties.
struct Repeats {
  bool in_window = false;  // among the last repeat_last_n tokens of prompt + output
  int32_t generated = 0;   // occurrences in the output
};

bool ranks_higher(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

[[noreturn]] void fail(const std::string& message) {
  throw Error("sampling: " + message);
}

void require(bool ok, const char* field, const std::string& range, double value) {
  if (!ok) fail(std::string(field) + " must be " + range + ", got " + std::to_string(value));
}

void check_token(int32_t token, size_t vocab, const char* where) {
  if (token < 0 || size_t(token) >= vocab) {
    fail(std::string(where) + " token " + std::to_string(token) + " is outside the vocabulary (" +
         std::to_string(vocab) + " tokens)");
  }
}

float max_logit(const Candidates& c) {
  float m = -kInf;
  for (const Candidate& x : c.items) m = std::max(m, x.logit);
  if (m == -kInf)
    fail("every token has probability 0 (all logits are -inf, e.g. banned by logit_bias)");
  return m;
}

// Probabilities of c.items in their current order.
std::vector<double> softmax(const Candidates& c) {
  const double m = max_logit(c);
  std::vector<double> p(c.items.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(double(c.items[i].logit) - m);
  for (double& x : p) x /= sum;
  return p;
}

void sort_descending(Candidates& c) {
  if (c.sorted) return;
  std::sort(c.items.begin(), c.items.end(), ranks_higher);
  c.sorted = true;
  c.dense = false;
}

// Calls adjust(candidate, effect) for every candidate whose token has an entry in effects.
// The caller has checked that every key is inside the vocabulary.
template <typename Effect, typename Adjust>
void adjust_tokens(Candidates& c, const std::unordered_map<int32_t, Effect>& effects,
                   Adjust adjust) {
  if (c.dense) {
    for (const auto& [id, effect] : effects) adjust(c.items[size_t(id)], effect);
    return;
  }
  for (Candidate& x : c.items) {
    if (auto it = effects.find(x.id); it != effects.end()) adjust(x, it->second);
  }
}

std::unordered_map<int32_t, Repeats> count_repeats(const SamplingParams& p,
                                                   std::span<const int32_t> prompt,
                                                   std::span<const int32_t> output, size_t vocab) {
  std::unordered_map<int32_t, Repeats> repeats;
  const size_t total = prompt.size() + output.size();
  size_t window = 0;
  if (p.repeat_penalty != 1.0f)
    window = p.repeat_last_n < 0 ? total : std::min(total, size_t(p.repeat_last_n));
  for (size_t i = total - window; i < total; ++i) {
    const int32_t token = i < prompt.size() ? prompt[i] : output[i - prompt.size()];
    check_token(token, vocab, "history");
    repeats[token].in_window = true;
  }
  if (p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f) return repeats;
  for (int32_t token : output) {
    check_token(token, vocab, "output");
    repeats[token].generated++;
  }
  return repeats;
}

void apply_penalties(Candidates& c, const SamplingParams& p, std::span<const int32_t> prompt,
                     std::span<const int32_t> output, size_t vocab) {
  const auto repeats = count_repeats(p, prompt, output, vocab);
  adjust_tokens(c, repeats, [&](Candidate& x, const Repeats& r) {
    // Dividing a negative logit would raise it; llama.cpp multiplies those instead.
    if (r.in_window)
      x.logit = x.logit <= 0 ? x.logit * p.repeat_penalty : x.logit / p.repeat_penalty;
    x.logit -=
        float(r.generated) * p.frequency_penalty + float(r.generated > 0) * p.presence_penalty;
  });
}

void apply_top_k(Candidates& c, int32_t k) {
  if (k <= 0 || size_t(k) >= c.items.size()) return;
  // O(V log k): only the k survivors are ordered.
  std::partial_sort(c.items.begin(), c.items.begin() + k, c.items.end(), ranks_higher);
  c.items.resize(size_t(k));
  c.sorted = true;
  c.dense = false;
}

// The shortest prefix of the descending order whose probability reaches p.
void apply_top_p(Candidates& c, float p) {
  if (p >= 1.0f) return;
  sort_descending(c);
  const std::vector<double> probs = softmax(c);
  double cumulative = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    cumulative += probs[i];
    if (cumulative >= p && i + 1 >= kMinKeep) {
      c.items.resize(i + 1);
      return;
    }
  }
}

// p_i >= min_p * p_max, tested in logit space as llama.cpp does: no softmax needed.
void apply_min_p(Candidates& c, float p) {
  if (p <= 0.0f) return;
  const double threshold = double(max_logit(c)) + std::log(double(p));
  const size_t before = c.items.size();
  std::erase_if(c.items, [&](const Candidate& x) { return double(x.logit) < threshold; });
  if (c.items.size() != before) c.dense = false;
}

// Indices into probs ordered by |surprisal - entropy|, most typical first.
std::vector<size_t> by_typicality(const std::vector<double>& probs) {
  double entropy = 0;
  for (double q : probs) entropy -= q > 0 ? q * std::log(q) : 0.0;
  std::vector<double> distance(probs.size());
  for (size_t i = 0; i < probs.size(); ++i) distance[i] = std::abs(-std::log(probs[i]) - entropy);
  std::vector<size_t> order(probs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Stable over the descending order: equal distances keep the more likely token first.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return distance[a] < distance[b]; });
  return order;
}

// Locally typical sampling (Meister et al. 2022): keep the most typical tokens until their
// probability exceeds p. The result is ordered by typicality, not by logit.
void apply_typical_p(Candidates& c, float p) {
  if (p >= 1.0f) return;
  sort_descending(c);
  const std::vector<double> probs = softmax(c);
  const std::vector<size_t> order = by_typicality(probs);
  size_t keep = order.size();
  double cumulative = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    cumulative += probs[order[i]];
    if (cumulative > p && i + 1 >= kMinKeep) {
      keep = i + 1;
      break;
    }
  }
  std::vector<Candidate> kept(keep);
  for (size_t i = 0; i < keep; ++i) kept[i] = c.items[order[i]];
  c.items = std::move(kept);
  c.sorted = false;
}

void apply_temperature(Candidates& c, float t) {
  float largest = 0;
  for (const Candidate& x : c.items) {
    if (std::isfinite(x.logit)) largest = std::max(largest, std::fabs(x.logit));
  }
  if (t > 0.0f && std::isfinite(largest / t)) {
    for (Candidate& x : c.items) x.logit /= t;
    return;
  }
  // Greedy: t = 0, or a t so small that l / t overflows (and inf - inf in the softmax is
  // NaN), whose limit is the argmax as well.
  max_logit(c);  // an all -inf set has no argmax
  const Candidate best = *std::min_element(c.items.begin(), c.items.end(), ranks_higher);
  c.items.assign(1, best);
  c.sorted = true;
  c.dense = false;
}

bool stage_is_active(const SamplingParams& p, SamplerStage stage) {
  switch (stage) {
    case SamplerStage::LOGIT_BIAS: return !p.logit_bias.empty();
    case SamplerStage::PENALTIES:
      return p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
    case SamplerStage::TOP_K: return p.top_k > 0;
    case SamplerStage::TYPICAL_P: return p.typical_p < 1.0f;
    case SamplerStage::TOP_P: return p.top_p < 1.0f;
    case SamplerStage::MIN_P: return p.min_p > 0.0f;
    case SamplerStage::TEMPERATURE: return p.temperature != 1.0f;
  }
  return false;
}

void validate_ranges(const SamplingParams& p) {
  require(std::isfinite(p.temperature) && p.temperature >= 0, "temperature", ">= 0", p.temperature);
  require(p.top_k >= 0, "top_k", ">= 0", p.top_k);
  require(p.top_p >= 0 && p.top_p <= 1, "top_p", "in [0, 1]", p.top_p);
  require(p.min_p >= 0 && p.min_p <= 1, "min_p", "in [0, 1]", p.min_p);
  require(p.typical_p >= 0 && p.typical_p <= 1, "typical_p", "in [0, 1]", p.typical_p);
  require(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0, "repeat_penalty", "> 0",
          p.repeat_penalty);
  require(p.repeat_last_n >= -1, "repeat_last_n", ">= -1", p.repeat_last_n);
  require(std::isfinite(p.frequency_penalty), "frequency_penalty", "finite", p.frequency_penalty);
  require(std::isfinite(p.presence_penalty), "presence_penalty", "finite", p.presence_penalty);
}

constexpr size_t kStageCount = size_t(SamplerStage::TEMPERATURE) + 1;

void validate_order(const SamplingParams& p) {
  std::array<bool, kStageCount> seen{};
  for (SamplerStage stage : p.order) {
    if (std::exchange(seen[size_t(stage)], true)) {
      fail("stage '" + std::string(sampler_stage_name(stage)) + "' appears twice in the order");
    }
  }
  for (size_t i = 0; i < kStageCount; ++i) {
    const auto stage = SamplerStage(i);
    if (!seen[i] && stage_is_active(p, stage)) {
      fail("stage '" + std::string(sampler_stage_name(stage)) +
           "' has parameters set but is not in the order");
    }
  }
}

std::unordered_map<int32_t, float> sum_biases(const std::vector<LogitBias>& biases) {
  std::unordered_map<int32_t, float> sums;
  for (const LogitBias& b : biases) {
    if (b.token < 0) fail("logit_bias token " + std::to_string(b.token) + " is negative");
    // +inf would turn the softmax into inf - inf; -inf is the documented ban.
    require(!std::isnan(b.bias) && b.bias != kInf, "logit_bias", "a number or -inf", b.bias);
    sums[b.token] += b.bias;
  }
  return sums;
}

Candidates make_candidates(std::span<const float> logits) {
  if (logits.empty()) fail("empty logits row");
  Candidates c;
  c.items.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    // -inf is a legitimate mask (constraints ban tokens that way); NaN and +inf are not.
    if (std::isnan(logits[i]) || logits[i] == kInf)
      fail("logit of token " + std::to_string(i) + " is not finite");
    c.items[i] = {int32_t(i), logits[i]};
  }
  return c;
}

Distribution to_distribution(const Candidates& c) {
  const std::vector<double> probs = softmax(c);
  Distribution d;
  d.tokens.reserve(probs.size());
  // Tokens whose probability underflows to 0 are dropped so the support is exactly what
  // `sample` can return.
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] > 0) d.tokens.push_back({c.items[i].id, probs[i]});
  }
  if (d.tokens.empty()) throw Error("sampling: no token has a nonzero probability");
  std::sort(d.tokens.begin(), d.tokens.end(),
            [](const TokenProb& a, const TokenProb& b) { return a.id < b.id; });
  return d;
}

}  // namespace

std::string_view sampler_stage_name(SamplerStage stage) {
  for (const auto& [name, s] : kStageNames) {
    if (s == stage) return name;
  }
  return "?";
}

std::vector<SamplerStage> parse_sampler_order(std::string_view text) {
  std::vector<SamplerStage> order;
  if (text.empty()) return order;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    const std::string_view name = text.substr(start, end - start);
    const auto it = std::find_if(kStageNames.begin(), kStageNames.end(),
                                 [&](const auto& e) { return e.first == name; });
    if (it == kStageNames.end()) {
      fail("unknown stage '" + std::string(name) + "' in sampler order \"" + std::string(text) +
           "\" (known: logit_bias, penalties, top_k, typical_p, top_p, min_p, temperature)");
    }
    order.push_back(it->second);
    start = end + 1;
  }
  return order;
}

double Distribution::prob(int32_t id) const {
  const auto it = std::lower_bound(tokens.begin(), tokens.end(), id,
                                   [](const TokenProb& t, int32_t v) { return t.id < v; });
  return it != tokens.end() && it->id == id ? it->p : 0.0;
}

SamplerChain::SamplerChain(SamplingParams params)
    : params_(std::move(params)), bias_(sum_biases(params_.logit_bias)) {
  validate_ranges(params_);
  validate_order(params_);
}

Distribution SamplerChain::apply(std::span<const float> logits, std::span<const int32_t> prompt,
                                 std::span<const int32_t> output) const {
  Candidates c = make_candidates(logits);
  const SamplingParams& p = params_;
  for (SamplerStage stage : p.order) {
    switch (stage) {
      case SamplerStage::LOGIT_BIAS:
        for (const auto& [token, bias] : bias_) check_token(token, logits.size(), "logit_bias");
        adjust_tokens(c, bias_, [](Candidate& x, float bias) { x.logit += bias; });
        break;
      case SamplerStage::PENALTIES: apply_penalties(c, p, prompt, output, logits.size()); break;
      case SamplerStage::TOP_K: apply_top_k(c, p.top_k); break;
      case SamplerStage::TYPICAL_P: apply_typical_p(c, p.typical_p); break;
      case SamplerStage::TOP_P: apply_top_p(c, p.top_p); break;
      case SamplerStage::MIN_P: apply_min_p(c, p.min_p); break;
      case SamplerStage::TEMPERATURE: apply_temperature(c, p.temperature); break;
    }
  }
  return to_distribution(c);
}

}  // namespace tsr
