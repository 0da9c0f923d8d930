// OpenAI's n choices through one prompt group: the prompt is computed once and forked
// (core/sched/prompt_groups.h). Greedy choices equal the llama.cpp reference; seeded
// choices are reproducible and differ from one another; the followers compute no prompt
// token; a leader cancelled before its prompt is done leaves its followers to run alone.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/engine/engine.h"
#include "tests/common/engine_runs.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";

std::unique_ptr<Engine> make_engine(int32_t prefill_chunk = 0) {
  Config c;
  c.model.path = testing::shared_path(kModel);
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.threads = 1;
  c.scheduler.prefill_chunk = prefill_chunk;
  return Engine::create(c);
}

// `n` choices of one prompt in group `group`, the i-th seeded seed + i (as the server does).
std::vector<RequestParams> choices(const std::vector<int32_t>& prompt, int32_t n, uint64_t group, float temperature,
                                   int32_t max_tokens = 24) {
  std::vector<RequestParams> out;
  for (int32_t i = 0; i < n; ++i) {
    RequestParams p = testing::greedy_request(prompt, max_tokens);
    p.sampling.temperature = temperature;
    p.seed = 100 + uint64_t(i);
    p.prompt_group = group;
    out.push_back(std::move(p));
  }
  return out;
}

struct Outputs {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<RequestStats> stats;
};

Outputs run_all(Engine& engine, const std::vector<RequestParams>& batch) {
  Outputs r{std::vector<std::vector<int32_t>>(batch.size()), std::vector<RequestStats>(batch.size())};
  for (size_t i = 0; i < batch.size(); ++i) {
    engine.submit(batch[i], [&r, i](const RequestOutput& out) {
      r.tokens[i].insert(r.tokens[i].end(), out.tokens.begin(), out.tokens.end());
      if (out.finished) r.stats[i] = out.stats;
    });
  }
  while (engine.step()) {
  }
  return r;
}

std::vector<int32_t> prompt_of(Engine& engine) {
  // 3 full blocks of 16 and a partial one: the fork shares the full ones and copies the last on write.
  return engine.tokenize("Once upon a time, there was a little girl named Lily. She loved to play outside in the "
                         "park with her friends and her dog, who was very big.");
}

TEST(PromptFork, GreedyChoicesEqualTheReferenceAndComputeThePromptOnce) {
  TSR_REQUIRE_SHARED(kModel);
  for (const int32_t chunk : {0, 7}) {
    auto engine = make_engine(chunk);
    const std::vector<int32_t> prompt = prompt_of(*engine);
    ASSERT_NE(prompt.size() % 16, 0u);
    const std::vector<int32_t> alone = engine->generate(testing::greedy_request(prompt, 24)).tokens;
    auto fresh = make_engine(chunk);  // nothing cached: the group alone computes the prompt
    const Outputs r = run_all(*fresh, choices(prompt, 8, 1, 0.0f));
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      EXPECT_EQ(r.tokens[i], alone) << "choice " << i << ", prefill chunk " << chunk;
      EXPECT_EQ(r.stats[i].prompt_tokens, int32_t(prompt.size()));
      EXPECT_EQ(r.stats[i].cached_tokens, i == 0 ? 0 : int32_t(prompt.size())) << "choice " << i;
    }
    const EngineStats s = fresh->stats();
    EXPECT_EQ(s.prompt_tokens - s.cached_prompt_tokens, int64_t(prompt.size())) << "the prompt computed once";
    EXPECT_EQ(s.kv_blocks_used, 0) << "every shared block released";
  }
}

TEST(PromptFork, SeededChoicesDifferAndRepeat) {
  TSR_REQUIRE_SHARED(kModel);
  auto engine = make_engine();
  const std::vector<int32_t> prompt = prompt_of(*engine);
  const Outputs a = run_all(*engine, choices(prompt, 4, 7, 1.0f));
  auto other = make_engine();
  const Outputs b = run_all(*other, choices(prompt, 4, 8, 1.0f));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NE(a.tokens[0], a.tokens[1]);
  EXPECT_NE(a.tokens[1], a.tokens[2]);
  // Without the group each choice computes the prompt itself and samples the same tokens
  // (the draw of output position t depends on the seed and t alone).
  auto single = make_engine();
  const Outputs c = run_all(*single, choices(prompt, 4, 0, 1.0f));
  EXPECT_EQ(a.tokens, c.tokens);
}

TEST(PromptFork, FollowersOfACancelledLeaderRunAlone) {
  TSR_REQUIRE_SHARED(kModel);
  auto engine = make_engine(8);  // the leader's prompt takes several steps
  const std::vector<int32_t> prompt = prompt_of(*engine);
  const std::vector<int32_t> alone = engine->generate(testing::greedy_request(prompt, 12)).tokens;
  auto fresh = make_engine(8);
  std::vector<std::vector<int32_t>> got(3);
  std::vector<tsr_finish_reason> reasons(3);
  std::vector<RequestId> ids;
  for (size_t i = 0; i < 3; ++i) {
    ids.push_back(fresh->submit(choices(prompt, 1, 5, 0.0f, 12)[0], [&, i](const RequestOutput& out) {
      got[i].insert(got[i].end(), out.tokens.begin(), out.tokens.end());
      if (out.finished) reasons[i] = out.finish_reason;
    }));
  }
  fresh->step();  // the leader's first chunk
  fresh->cancel(ids[0]);
  while (fresh->step()) {
  }
  EXPECT_EQ(reasons[0], TSR_FINISH_ABORT);
  EXPECT_EQ(got[1], alone);
  EXPECT_EQ(got[2], alone);
  EXPECT_EQ(fresh->stats().kv_blocks_used, 0);
}

}  // namespace
}  // namespace tsr
