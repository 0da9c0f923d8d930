// [cache] eviction = "streaming" on stories260K (a 512-token context): requests generate
// past the context, batching and preemption in the ring do not change greedy output, and
// requests the window holds whole run as without eviction.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/engine/engine.h"
#include "tests/common/engine_runs.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

using testing::run_batch;
using testing::greedy_request;

constexpr const char* kModel = "models/stories260K.gguf";
constexpr const char* kRefs = "models/reference/stories260K.ref.jsonl";

Config streaming_config(int32_t sinks, int32_t window) {
  Config c;
  c.model.path = testing::shared_path(kModel);
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.threads = 1;
  c.cache.eviction = "streaming";
  c.cache.sink_tokens = sinks;
  c.cache.window = window;
  return c;
}

class StreamingEviction : public ::testing::Test {
 protected:
  void SetUp() override {
    TSR_REQUIRE_SHARED(kModel);
    for (const std::string& line : testing::read_lines(testing::shared_path(kRefs))) {
      const auto j = nlohmann::json::parse(line);
      prompts_.push_back(j["prompt_ids"].get<std::vector<int32_t>>());
      greedy_.push_back(j["greedy_ids"].get<std::vector<int32_t>>());
    }
  }
  std::vector<std::vector<int32_t>> prompts_, greedy_;
};

TEST_F(StreamingEviction, RequestsTheWindowHoldsMatchTheReferences) {
  auto engine = Engine::create(streaming_config(4, 0));  // 4 sinks + the other 508 positions
  std::vector<RequestParams> batch;
  for (size_t i = 0; i < prompts_.size(); ++i) batch.push_back(greedy_request(prompts_[i], int32_t(greedy_[i].size())));
  const auto outputs = run_batch(*engine, batch);
  for (size_t i = 0; i < prompts_.size(); ++i) EXPECT_EQ(outputs[i], greedy_[i]) << "prompt " << i;
}

TEST_F(StreamingEviction, GeneratesFourTimesTheContext) {
  auto engine = Engine::create(streaming_config(4, 252));
  ASSERT_EQ(engine->context_length(), 512);
  const GenerateResult alone = engine->generate(greedy_request(prompts_[0], 4 * 512));
  EXPECT_EQ(alone.tokens.size(), 4u * 512);
  EXPECT_EQ(alone.finish_reason, TSR_FINISH_LENGTH);
  EXPECT_EQ(std::vector<int32_t>(alone.tokens.begin(), alone.tokens.begin() + 200), greedy_[0])
      << "the first tokens fit in the window, as the reference's did";
  // Three at once, one of them from a longer prompt than the window holds (its prompt runs
  // a token a step once the window is full), and the first again: batching in the ring
  // changes nothing.
  std::vector<int32_t> long_prompt = prompts_[1];
  long_prompt.insert(long_prompt.end(), alone.tokens.begin(), alone.tokens.begin() + 300);
  const GenerateResult long_alone = engine->generate(greedy_request(long_prompt, 600));
  const auto outputs =
      run_batch(*engine, {greedy_request(prompts_[0], 4 * 512), greedy_request(long_prompt, 600), greedy_request(prompts_[2], 700)});
  EXPECT_EQ(outputs[0], alone.tokens);
  EXPECT_EQ(outputs[1], long_alone.tokens);
  EXPECT_EQ(outputs[2].size(), 700u);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

// A pool of 24 blocks: two 256-token windows (17 blocks each) cannot both stay, so one is
// preempted and recomputed, the ring included, and ends as it would have alone.
TEST_F(StreamingEviction, PreemptionInTheRingKeepsGreedyOutput) {
  Config c = streaming_config(4, 252);
  const GenerateResult a = Engine::create(c)->generate(greedy_request(prompts_[0], 900));
  const GenerateResult b = Engine::create(c)->generate(greedy_request(prompts_[3], 900));
  c.cache.memory_bytes = 24 * 10240;
  auto engine = Engine::create(c);
  ASSERT_EQ(engine->stats().kv_blocks_total, 24);
  const auto outputs = run_batch(*engine, {greedy_request(prompts_[0], 900), greedy_request(prompts_[3], 900)});
  EXPECT_GT(engine->stats().preemptions, 0);
  EXPECT_EQ(outputs[0], a.tokens);
  EXPECT_EQ(outputs[1], b.tokens);
}

TEST_F(StreamingEviction, WithoutItTheContextEndsARequest) {
  Config c = streaming_config(4, 252);
  c.cache.eviction = "none";
  const GenerateResult r = Engine::create(c)->generate(greedy_request(prompts_[0], 4 * 512));
  EXPECT_EQ(prompts_[0].size() + r.tokens.size(), 512u);
  EXPECT_EQ(r.finish_reason, TSR_FINISH_LENGTH);
}

TEST_F(StreamingEviction, ConflictsAreRefusedByName) {
  auto refused = [](const Config& c, const std::string& what) {
    try {
      Engine::create(c);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(streaming_config(4, 600), "sink_tokens (4) + window (600) must be within the context (512 tokens)");
  Config spec = streaming_config(4, 0);
  spec.speculative.method = "ngram";
  refused(spec, "does not combine with speculative decoding");
}

}  // namespace
}  // namespace tsr
