// Embeddings against llama.cpp itself: tests/npm/llama_embed_ref.mjs runs node-llama-cpp's
// embedding context (llama.cpp's prebuilt CPU build, F32 KV, one thread) on the shared
// models and on synth files declaring each pooling type, and Tessera's embedding of the
// same token ids, L2-normalized as /v1/embeddings returns it, must equal llama.cpp's
// normalized vector within 1e-4 in every component (the serving-API issue's tolerance).
// Also: batching and prefill chunking move an embedding by float rounding only.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <unistd.h>

#include "base/error.h"
#include "core/engine/engine.h"
#include "tests/common/engine_runs.h"
#include "tests/common/npm_dir.h"
#include "tests/common/shared_data.h"
#include "tests/common/subprocess.h"

namespace tsr {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::shell_quote;

constexpr double kTolerance = 1e-4;

struct EmbedCase {
  const char* name;
  const char* shared_model;  // a file under ../shared/models, or "" for a synth file
  const char* synth_flags;   // `tessera synth` flags (with --pooling) where shared_model is ""
  Pooling pooling;           // what the file declares
};

void PrintTo(const EmbedCase& c, std::ostream* os) { *os << c.name; }

std::vector<float> normalized(const std::vector<double>& v) {
  double norm = 0;
  for (double x : v) norm += x * x;
  norm = std::sqrt(norm);
  std::vector<float> out;
  for (double x : v) out.push_back(float(x / norm));
  return out;
}

std::unique_ptr<Engine> make_engine(const std::string& model, int32_t prefill_chunk = 0) {
  Config config;
  config.model.path = model;
  config.cache.dtype = "f32";  // as llama_embed_ref.mjs asks of llama.cpp
  config.plugin_dir = TESSERA_PLUGIN_DIR;
  config.backend.threads = 2;
  config.scheduler.prefill_chunk = prefill_chunk;
  return Engine::create(config);
}

RequestParams embed_request(std::vector<int32_t> ids, Pooling pooling) {
  RequestParams p;
  p.prompt = std::move(ids);
  p.embed = pooling;
  return p;
}

class EmbeddingOracle : public ::testing::TestWithParam<EmbedCase> {
 protected:
  void SetUp() override {
    if (const std::string missing = testing::node_llama_cpp_missing(); !missing.empty()) GTEST_SKIP() << missing;
    dir_ = fs::path(::testing::TempDir()) / ("embed-oracle-" + std::to_string(getpid()) + "-" + GetParam().name);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string model() const {
    const EmbedCase& c = GetParam();
    if (*c.shared_model) return testing::shared_path(std::string("models/") + c.shared_model);
    const fs::path out = dir_ / "model.gguf";
    const std::string cmd = std::string(TESSERA_BIN_DIR) + "/tessera synth " + shell_quote(out.string()) + " " +
                            c.synth_flags + " --seed 11 2>>" + shell_quote((dir_ / "synth.log").string());
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return out.string();
  }

  std::vector<json> reference(const std::string& model) const {
    const std::string cmd = "node " + shell_quote(std::string(TESSERA_NPM_SCRIPT_DIR) + "/llama_embed_ref.mjs") + " " +
                            shell_quote(testing::npm_dir()) + " " + shell_quote(model) + " " +
                            shell_quote(TESSERA_ORACLE_PROMPTS) + " 2>>" + shell_quote((dir_ / "node.log").string());
    std::vector<json> out;
    std::istringstream lines(testing::run_command(cmd).out);
    for (std::string line; std::getline(lines, line);) out.push_back(json::parse(line));
    return out;
  }

  fs::path dir_;
};

TEST_P(EmbeddingOracle, NormalizedEmbeddingsMatchLlamaCpp) {
  const EmbedCase& c = GetParam();
  if (*c.shared_model) TSR_REQUIRE_SHARED(std::string("models/") + c.shared_model);
  const std::string path = model();
  const std::vector<json> refs = reference(path);
  ASSERT_EQ(refs.size(), testing::read_lines(TESSERA_ORACLE_PROMPTS).size())
      << "llama_embed_ref.mjs failed; see " << (dir_ / "node.log");
  auto engine = make_engine(path);
  ASSERT_EQ(engine->pooling(), c.pooling);
  double max_diff = 0;
  for (const json& ref : refs) {
    const std::vector<int32_t> ids = ref["ids"];
    const std::vector<float> expected = normalized(ref["embedding"].get<std::vector<double>>());
    const GenerateResult r = engine->generate(embed_request(ids, c.pooling));
    ASSERT_EQ(r.finish_reason, TSR_FINISH_STOP) << r.error;
    ASSERT_EQ(r.embedding.size(), expected.size());
    EXPECT_TRUE(r.tokens.empty()) << "an embedding request generates nothing";
    EXPECT_EQ(r.stats.prompt_tokens, int32_t(ids.size()));
    for (size_t i = 0; i < expected.size(); ++i) {
      max_diff = std::max(max_diff, double(std::abs(r.embedding[i] - expected[i])));
    }
  }
  std::printf("%s (%s pooling): largest component difference %.2e\n", c.name, pooling_name(c.pooling), max_diff);
  EXPECT_LE(max_diff, kTolerance);
}

// Each pooling the GGUF can declare, on the shared models (no pooling_type: the last
// token, as llama.cpp returns for generative models) and on synth files that declare one.
INSTANTIATE_TEST_SUITE_P(
    Models, EmbeddingOracle,
    ::testing::Values(
        EmbedCase{"stories260K", "stories260K.gguf", "", Pooling::LAST},
        EmbedCase{"tiny_random", "llama-2-tiny-random.gguf", "", Pooling::LAST},
        EmbedCase{"llama_mean", "", "--arch llama --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --pooling mean",
                  Pooling::MEAN},
        EmbedCase{"llama_cls", "", "--arch llama --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --pooling cls",
                  Pooling::CLS},
        EmbedCase{"qwen3_last", "", "--arch qwen3 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --pooling last",
                  Pooling::LAST},
        EmbedCase{"gemma3_mean", "",
                  "--arch gemma3 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --pooling mean",
                  Pooling::MEAN}),
    [](const ::testing::TestParamInfo<EmbedCase>& info) { return std::string(info.param.name); });

// The prompts embedded one at a time, then all at once beside greedy requests, whole and in
// prefill chunks of 7 tokens: the same vectors up to float rounding. Not bit for bit: a
// step of 16 rows or more multiplies F32 weights with oneDNN's GEMM, a smaller one with
// the streaming dot products, and the two round differently (~1e-6 here), as the logits
// of a greedy request do without changing its ids.
constexpr double kBatchTolerance = 1e-5;

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  return worst;
}

TEST(Embedding, BatchingAndChunkingKeepIt) {
  TSR_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string path = testing::shared_path("models/stories260K.gguf");
  for (const Pooling pooling : {Pooling::LAST, Pooling::MEAN, Pooling::CLS}) {
    auto alone = make_engine(path);
    std::vector<std::vector<int32_t>> prompts;
    for (const std::string& line : testing::read_lines(TESSERA_ORACLE_PROMPTS)) {
      prompts.push_back(alone->tokenize(json::parse(line)["text"].get<std::string>()));
    }
    std::vector<std::vector<float>> expected;
    for (const auto& p : prompts) expected.push_back(alone->generate(embed_request(p, pooling)).embedding);

    for (const int32_t chunk : {0, 7}) {
      auto batched = make_engine(path, chunk);
      std::vector<std::vector<float>> got(prompts.size());
      for (size_t i = 0; i < prompts.size(); ++i) {
        batched->submit(testing::greedy_request(prompts[i], 16), [](const RequestOutput&) {});
        batched->submit(embed_request(prompts[i], pooling), [&got, i](const RequestOutput& out) {
          if (out.finished) got[i] = out.embedding;
        });
      }
      while (batched->step()) {
      }
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_LE(largest_difference(got[i], expected[i]), kBatchTolerance)
            << pooling_name(pooling) << " pooling, prefill chunk " << chunk << ", prompt " << i;
      }
    }
  }
}

TEST(Embedding, RankPoolingAndConstraintsAreRefused) {
  TSR_REQUIRE_SHARED("models/stories260K.gguf");
  auto engine = make_engine(testing::shared_path("models/stories260K.gguf"));
  const std::vector<int32_t> prompt = engine->tokenize("Once upon a time");
  EXPECT_THROW(engine->submit(embed_request(prompt, Pooling::RANK), [](const RequestOutput&) {}), Error);
  RequestParams constrained = embed_request(prompt, Pooling::LAST);
  constrained.constraint = ConstraintSpec{"regex", "[a-z]+"};
  EXPECT_THROW(engine->submit(constrained, [](const RequestOutput&) {}), Error);
}

}  // namespace
}  // namespace tsr
