// The target's hidden states through the draft ABI (TSR_DRAFT_NEEDS_HIDDEN, ABI 2.6): a
// probe draft (hidden_probe_draft.cpp) records what it receives while it speculates. Every
// position the engine computed arrives once, alone and batched, and equals the residual
// stream entering the chosen layers in one forward pass over the request's whole text; greedy
// outputs stay the references'. A draft asking for layers the target does not have is
// refused at start, naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/engine/engine.h"
#include "core/model/gguf.h"
#include "core/model/llama_model.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/runner/model_runner.h"
#include "tests/common/greedy_references.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";
constexpr int32_t kTokens = 48;

using Reference = testing::GreedyReference;

uint64_t fnv1a(const std::vector<int32_t>& tokens) {
  uint64_t h = 1469598103934665603ull;
  for (const int32_t t : tokens) {
    for (int b = 0; b < 4; ++b) h = (h ^ ((uint32_t(t) >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

// What the probe wrote for one request.
struct Received {
  int64_t layers = 0, n_embd = 0, again = 0;
  std::vector<int64_t> positions;
  std::vector<std::vector<float>> states;  // per position: layers × n_embd
};

Received read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  Received r;
  if (!in) return r;
  int64_t header[3];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  r.layers = header[0], r.n_embd = header[1], r.again = header[2];
  for (int64_t pos; in.read(reinterpret_cast<char*>(&pos), sizeof pos);) {
    std::vector<float> row(size_t(r.layers * r.n_embd));
    in.read(reinterpret_cast<char*>(row.data()), std::streamsize(row.size() * sizeof(float)));
    r.positions.push_back(pos);
    r.states.push_back(std::move(row));
  }
  return r;
}

// Every request the probe saw with this prompt, one file each.
std::vector<Received> read_probe(const std::filesystem::path& dir, const std::vector<int32_t>& prompt) {
  char prefix[24];
  std::snprintf(prefix, sizeof prefix, "%016llx-", static_cast<unsigned long long>(fnv1a(prompt)));
  std::vector<Received> all;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().starts_with(prefix)) all.push_back(read_file(entry.path()));
  }
  return all;
}

class HiddenStates : public ::testing::Test {
 protected:
  void SetUp() override {
    TSR_REQUIRE_SHARED(kModel);
    refs_ = testing::load_greedy_references("models/reference/stories260K.ref.jsonl");
    scratch_ = std::make_unique<testing::ScratchDir>("hidden_probe");  // one per test process
    dir_ = scratch_->path();
    ASSERT_EQ(::setenv("TSR_HIDDEN_PROBE_DIR", dir_.c_str(), 1), 0);
    ASSERT_EQ(::setenv("TESSERA_PLUGIN_PATH", HIDDEN_PROBE_DIR, 1), 0);
  }
  void TearDown() override {
    ::unsetenv("TESSERA_PLUGIN_PATH");
    ::unsetenv("TSR_HIDDEN_PROBE_LAYERS");
  }

  static Config config() {
    Config c;
    c.model.path = testing::shared_path(kModel);
    c.plugin_dir = TESSERA_PLUGIN_DIR;
    c.backend.threads = 1;
    c.speculative.method = "hidden_probe";
    c.speculative.adaptive = false;  // every step drafts: verifications accept and reject
    c.cache.dtype = "f32";  // f16 K and V would round cached keys that a one-pass forward reads unrounded
    return c;
  }

  static RequestParams request(const std::vector<int32_t>& prompt) {
    RequestParams p;
    p.prompt = prompt;
    p.max_tokens = kTokens;
    p.sampling.temperature = 0;
    p.ignore_eos = true;
    return p;
  }

  // The residual stream entering `layers` for every position of `tokens`, in one forward pass.
  static std::vector<std::vector<float>> forward_states(const std::vector<int32_t>& tokens,
                                                        const std::vector<int32_t>& layers) {
    auto backend = Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, "cpu", {TESSERA_PLUGIN_DIR}), 0, 1);
    auto model = LlamaModel::load(GgufFile::open(testing::shared_path(kModel)), *backend);
    ModelRunnerOptions o;
    o.num_blocks = 64;
    o.kv = {TSR_DTYPE_F32, TSR_DTYPE_F32, false};  // as the engine's below: no rounding of K and V
    ModelRunner runner(*model, *backend, o);
    runner.set_capture_layers(layers);
    if (!runner.kv().allocate(1, int32_t(tokens.size()), 0)) throw Error("no KV blocks");
    std::vector<float> logits;
    runner.run_sequence(1, 0, tokens, false, logits);
    const tsr_tensor& t = runner.forward().captured();
    const auto* base = static_cast<const uint8_t*>(t.data);
    std::vector<std::vector<float>> out(tokens.size());
    for (size_t j = 0; j < tokens.size(); ++j) {
      for (size_t l = 0; l < layers.size(); ++l) {
        const auto* row = reinterpret_cast<const float*>(base + int64_t(l) * t.strides[0] + int64_t(j) * t.strides[1]);
        out[j].insert(out[j].end(), row, row + t.shape[2]);
      }
    }
    return out;
  }

  // For each of the `requests` requests of this prompt (all with this output): positions
  // 0 .. n - 2 of the text (the last token is sampled, never computed) arrived once each
  // and equal the one-pass states.
  void expect_states(const Reference& ref, const std::vector<int32_t>& output, const std::vector<int32_t>& layers,
                     size_t requests = 1) {
    const std::vector<Received> all = read_probe(dir_, ref.prompt);
    ASSERT_EQ(all.size(), requests);
    for (const Received& got : all) expect_received(got, ref, output, layers);
  }

  void expect_received(const Received& got, const Reference& ref, const std::vector<int32_t>& output,
                       const std::vector<int32_t>& layers) {
    std::vector<int32_t> text = ref.prompt;
    text.insert(text.end(), output.begin(), output.end());
    ASSERT_EQ(got.layers, int64_t(layers.size()));
    EXPECT_EQ(got.again, 0) << "a position arrived twice";
    ASSERT_EQ(got.positions.size(), text.size() - 1);
    const std::vector<int32_t> computed(text.begin(), text.end() - 1);
    const auto want = forward_states(computed, layers);
    double worst = 0;
    for (size_t j = 0; j < got.positions.size(); ++j) {
      ASSERT_EQ(got.positions[j], int64_t(j));
      for (size_t i = 0; i < want[j].size(); ++i) {
        worst = std::max(worst, std::fabs(double(got.states[j][i]) - want[j][i]) / (1.0 + std::fabs(want[j][i])));
      }
    }
    std::printf("%zu positions, largest relative difference from the one-pass states %.2g\n", got.positions.size(), worst);
    EXPECT_LT(worst, 1e-4);
  }

  std::vector<Reference> refs_;
  std::unique_ptr<testing::ScratchDir> scratch_;
  std::filesystem::path dir_;
};

TEST_F(HiddenStates, EveryComputedPositionArrivesOnceAndEqualsAOnePassForward) {
  auto engine = Engine::create(config());
  const std::vector<int32_t> layers = {0, 2, 5};  // stories260K's 5 layers: embeddings, middle, last output
  for (const Reference& ref : refs_) {
    const GenerateResult r = engine->generate(request(ref.prompt));
    EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.greedy.begin(), ref.greedy.begin() + kTokens));
    expect_states(ref, r.tokens, layers);
  }
  const EngineStats s = engine->stats();
  EXPECT_GT(s.accepted_tokens, 0);
  EXPECT_LT(s.accepted_tokens, s.draft_tokens) << "the probe's drafts should be rejected sometimes too";
}

TEST_F(HiddenStates, BatchedRequestsGetTheirOwnStates) {
  auto engine = Engine::create(config());
  std::vector<std::vector<int32_t>> outputs(refs_.size());
  for (size_t i = 0; i < refs_.size(); ++i) {
    engine->submit(request(refs_[i].prompt), [&outputs, i](const RequestOutput& o) {
      outputs[i].insert(outputs[i].end(), o.tokens.begin(), o.tokens.end());
    });
  }
  while (engine->step()) {
  }
  for (size_t i = 0; i < refs_.size(); ++i) {
    EXPECT_EQ(outputs[i], std::vector<int32_t>(refs_[i].greedy.begin(), refs_[i].greedy.begin() + kTokens)) << i;
    expect_states(refs_[i], outputs[i], {0, 2, 5});
  }
}

// The choices of one call compute their prompt once; each gets the states of it.
TEST_F(HiddenStates, ChoicesOfOneCallEachGetThePromptsStates) {
  auto engine = Engine::create(config());
  const Reference& ref = refs_[1];
  std::vector<RequestParams> params;
  std::vector<std::vector<int32_t>> outputs(3);
  std::vector<OutputCallback> callbacks;
  for (size_t i = 0; i < outputs.size(); ++i) {
    params.push_back(request(ref.prompt));
    params.back().prompt_group = 7;
    callbacks.push_back([&outputs, i](const RequestOutput& o) {
      outputs[i].insert(outputs[i].end(), o.tokens.begin(), o.tokens.end());
    });
  }
  engine->submit_all(params, callbacks);
  while (engine->step()) {
  }
  const std::vector<int32_t> greedy(ref.greedy.begin(), ref.greedy.begin() + kTokens);
  for (const auto& out : outputs) EXPECT_EQ(out, greedy);
  expect_states(ref, greedy, {0, 2, 5}, outputs.size());
}

TEST_F(HiddenStates, LayersTheTargetLacksAreRefusedAtStart) {
  for (const char* layers : {"0,6", "2,1", "-1,2", ""}) {
    ASSERT_EQ(::setenv("TSR_HIDDEN_PROBE_LAYERS", layers, 1), 0);
    try {
      Engine::create(config());
      ADD_FAILURE() << "layers '" << layers << "' were accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("draft 'hidden_probe'"), std::string::npos) << what;
      EXPECT_TRUE(what.find("layer") != std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace tsr
