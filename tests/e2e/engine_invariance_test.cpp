// Batching, chunked prefill, preemption and prefix caching never change greedy output:
// every stories260K reference prompt yields llama.cpp's greedy ids in each setting.
#include <gtest/gtest.h>


#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/engine/engine.h"
#include "base/error.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/engine_runs.h"
#include "tests/common/greedy_references.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

using testing::run_batch;
using testing::greedy_request;

constexpr const char* kModel = "models/stories260K.gguf";
constexpr const char* kRefs = "models/reference/stories260K.ref.jsonl";

using Reference = testing::GreedyReference;

std::vector<Reference> load_references() { return testing::load_greedy_references(kRefs); }

Config base_config() {
  Config c;
  c.model.path = testing::shared_path(kModel);
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.threads = 1;
  return c;
}

// The five reference prompts plus eleven more of mixed lengths.
std::vector<RequestParams> mixed_batch(const std::vector<Reference>& refs) {
  std::vector<RequestParams> batch;
  for (const Reference& r : refs) batch.push_back(greedy_request(r.prompt, static_cast<int32_t>(r.greedy.size())));
  for (int i = 0; i < 11; ++i) {
    const Reference& r = refs[i % refs.size()];
    std::vector<int32_t> prompt = r.prompt;
    prompt.insert(prompt.end(), r.greedy.begin(), r.greedy.begin() + 7 * i + 3);
    batch.push_back(greedy_request(prompt, 20 + 9 * i));
  }
  return batch;
}

void expect_references(const std::vector<Reference>& refs,
                       const std::vector<std::vector<int32_t>>& outputs) {
  for (size_t i = 0; i < refs.size(); ++i) EXPECT_EQ(outputs[i], refs[i].greedy) << "prompt " << i;
}

class EngineInvariance : public ::testing::Test {
 protected:
  void SetUp() override {
    TSR_REQUIRE_SHARED(kModel);
    refs_ = load_references();
  }
  std::vector<Reference> refs_;
};

TEST_F(EngineInvariance, AloneMatchesReference) {
  auto engine = Engine::create(base_config());
  for (const Reference& r : refs_) {
    EXPECT_EQ(engine->generate(greedy_request(r.prompt, 200)).tokens, r.greedy);
  }
}

TEST_F(EngineInvariance, BatchOf16MixedLengths) {
  auto engine = Engine::create(base_config());
  expect_references(refs_, run_batch(*engine, mixed_batch(refs_)));
}

// Decode steps replayed from graphs (the CPU backend records op lists): padded to their
// bucket, the batch shrinking through the buckets as requests finish, and more requests
// than max_seqs, so that waiting ones join with prefill steps (eager) between replays.
TEST_F(EngineInvariance, DecodeGraphsKeepGreedyOutput) {
  Config c = base_config();
  c.backend.graphs = "on";
  c.scheduler.max_seqs = 12;
  auto engine = Engine::create(c);
  expect_references(refs_, run_batch(*engine, mixed_batch(refs_)));
  const EngineStats stats = engine->stats();
  EXPECT_GT(stats.graph_replays, stats.steps / 2) << "most decode steps replay a graph";
  EXPECT_GE(stats.graphs_recorded, 5);
  for (const Reference& r : refs_) EXPECT_EQ(engine->generate(greedy_request(r.prompt, 200)).tokens, r.greedy);
}

TEST_F(EngineInvariance, ChunkedPrefill) {
  for (int32_t chunk : {1, 7, 64}) {
    Config c = base_config();
    c.scheduler.prefill_chunk = chunk;
    c.scheduler.max_batch_tokens = 96;
    auto engine = Engine::create(c);
    SCOPED_TRACE("prefill_chunk " + std::to_string(chunk));
    expect_references(refs_, run_batch(*engine, mixed_batch(refs_)));
  }
}

TEST_F(EngineInvariance, PreemptionByRecompute) {
  Config c = base_config();
  // 32 blocks of 16 tokens (10240 bytes each at F16): one full context; 16 requests of up
  // to 205 tokens cannot all fit.
  c.cache.memory_bytes = 32 * 10240;
  auto engine = Engine::create(c);
  ASSERT_EQ(engine->stats().kv_blocks_total, 32);
  expect_references(refs_, run_batch(*engine, mixed_batch(refs_)));
  EXPECT_GT(engine->stats().preemptions, 0);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

TEST_F(EngineInvariance, AfterPrefixCacheHit) {
  auto engine = Engine::create(base_config());
  for (const Reference& r : refs_) {
    // A prompt of several full blocks: the reference prompt and 60 of its greedy tokens.
    std::vector<int32_t> prompt = r.prompt;
    prompt.insert(prompt.end(), r.greedy.begin(), r.greedy.begin() + 60);
    const std::vector<int32_t> expected(r.greedy.begin() + 60, r.greedy.end());
    const GenerateResult first = engine->generate(greedy_request(prompt, static_cast<int32_t>(expected.size())));
    EXPECT_EQ(first.tokens, expected);
    const GenerateResult second = engine->generate(greedy_request(prompt, static_cast<int32_t>(expected.size())));
    EXPECT_EQ(second.tokens, expected);
    EXPECT_GT(second.stats.cached_tokens, 0);
  }
  EXPECT_GT(engine->stats().prefix_hit_rate, 0.0);
}

// A pool of one context cannot keep a prompt's blocks while four other requests run; with
// a host tier the evicted blocks wait there, and the prompt's second run takes them back
// instead of recomputing them, with the same greedy output.
TEST_F(EngineInvariance, AfterHostTierHit) {
  Config c = base_config();
  c.cache.memory_bytes = 32 * 10240;  // 32 blocks of 16 tokens
  c.cache.host_memory_bytes = 4 << 20;
  auto engine = Engine::create(c);
  const Reference& r = refs_[0];
  std::vector<int32_t> prompt = r.prompt;
  prompt.insert(prompt.end(), r.greedy.begin(), r.greedy.begin() + 60);
  const std::vector<int32_t> expected(r.greedy.begin() + 60, r.greedy.end());
  EXPECT_EQ(engine->generate(greedy_request(prompt, static_cast<int32_t>(expected.size()))).tokens, expected);

  std::vector<RequestParams> others;
  for (size_t i = 1; i < refs_.size(); ++i) others.push_back(greedy_request(refs_[i].prompt, 200));
  const auto outputs = run_batch(*engine, others);
  for (size_t i = 1; i < refs_.size(); ++i) EXPECT_EQ(outputs[i - 1], refs_[i].greedy) << "prompt " << i;
  const EngineStats evicted = engine->stats();
  EXPECT_GT(evicted.kv_host_stored, 0);

  const GenerateResult again = engine->generate(greedy_request(prompt, static_cast<int32_t>(expected.size())));
  EXPECT_EQ(again.tokens, expected);
  EXPECT_EQ(again.stats.cached_tokens, int32_t(prompt.size() - 1) / 16 * 16);
  EXPECT_GT(engine->stats().kv_host_restored, evicted.kv_host_restored);
}

// The disk tier: a restarted engine serves the evicted prefix from the files the last one
// wrote; after every file is corrupted, the next one detects it and recomputes instead.
TEST_F(EngineInvariance, AfterRestartFromTheDiskTier) {
  const testing::ScratchDir scratch("tessera_disk_tier_e2e");
  Config c = base_config();
  c.cache.memory_bytes = 32 * 10240;
  c.cache.host_memory_bytes = 4 << 20;
  c.cache.disk_path = scratch.path().string();
  const Reference& r = refs_[0];
  std::vector<int32_t> prompt = r.prompt;
  prompt.insert(prompt.end(), r.greedy.begin(), r.greedy.begin() + 60);
  const std::vector<int32_t> expected(r.greedy.begin() + 60, r.greedy.end());
  const auto max_tokens = static_cast<int32_t>(expected.size());
  const int32_t full_blocks = int32_t(prompt.size() - 1) / 16 * 16;
  {
    auto engine = Engine::create(c);
    EXPECT_EQ(engine->generate(greedy_request(prompt, max_tokens)).tokens, expected);
    std::vector<RequestParams> others;
    for (size_t i = 1; i < refs_.size(); ++i) others.push_back(greedy_request(refs_[i].prompt, 200));
    run_batch(*engine, others);  // evicts the prompt's blocks: to the host tier and to disk
  }
  {
    auto engine = Engine::create(c);
    const GenerateResult hit = engine->generate(greedy_request(prompt, max_tokens));
    EXPECT_EQ(hit.tokens, expected);
    EXPECT_EQ(hit.stats.cached_tokens, full_blocks);
    EXPECT_GE(engine->stats().kv_disk_loaded, full_blocks / 16);
  }
  int corrupted = 0;
  for (const auto& dir : std::filesystem::directory_iterator(scratch.path())) {
    for (const auto& file : std::filesystem::directory_iterator(dir.path())) {
      std::fstream f(file.path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(64 + 10);
      f.put('\x7f');
      ++corrupted;
    }
  }
  ASSERT_GT(corrupted, 0);
  auto engine = Engine::create(c);
  const GenerateResult recomputed = engine->generate(greedy_request(prompt, max_tokens));
  EXPECT_EQ(recomputed.tokens, expected);
  EXPECT_EQ(recomputed.stats.cached_tokens, 0);
  EXPECT_GT(engine->stats().kv_disk_rejected, 0);
  EXPECT_EQ(engine->stats().kv_disk_loaded, 0);
}

TEST_F(EngineInvariance, SharedPrefixDivergesCorrectly) {
  // Two sampled requests share a cached prompt prefix, then diverge: each must equal the
  // same request run alone on a fresh engine.
  const Reference& r = refs_[0];
  std::vector<int32_t> prompt = r.prompt;
  prompt.insert(prompt.end(), r.greedy.begin(), r.greedy.begin() + 40);
  auto sampled = [&](uint64_t seed) {
    RequestParams p = greedy_request(prompt, 40);
    p.sampling.temperature = 1.0f;
    p.seed = seed;
    return p;
  };
  std::vector<std::vector<int32_t>> alone;
  for (uint64_t seed : {1u, 2u}) alone.push_back(Engine::create(base_config())->generate(sampled(seed)).tokens);
  ASSERT_NE(alone[0], alone[1]);
  auto engine = Engine::create(base_config());
  engine->generate(greedy_request(prompt, 1));  // caches the prompt's full blocks
  const auto together = run_batch(*engine, {sampled(1), sampled(2)});
  EXPECT_EQ(together[0], alone[0]);
  EXPECT_EQ(together[1], alone[1]);
  EXPECT_GT(engine->stats().cached_prompt_tokens, 0);
}

TEST_F(EngineInvariance, CancelReturnsAllBlocks) {
  auto engine = Engine::create(base_config());
  const int32_t total = engine->stats().kv_blocks_total;
  bool finished = false;
  tsr_finish_reason reason = TSR_FINISH_NONE;
  const RequestId id = engine->submit(greedy_request(refs_[0].prompt, 200), [&](const RequestOutput& out) {
    if (out.finished) {
      finished = true;
      reason = out.finish_reason;
    }
  });
  for (int i = 0; i < 30; ++i) engine->step();
  EXPECT_GT(engine->stats().kv_blocks_used, 0);
  engine->cancel(id);
  while (engine->step()) {
  }
  EXPECT_TRUE(finished);
  EXPECT_EQ(reason, TSR_FINISH_ABORT);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(engine->stats().kv_blocks_free, total);
}

TEST_F(EngineInvariance, BackgroundThreadWithConcurrentSubmitAndCancel) {
  auto engine = Engine::create(base_config());
  engine->start();
  std::atomic<int> finished{0}, aborted{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        const Reference& r = refs_[(t + i) % refs_.size()];
        if (i == 1) {
          std::atomic<bool> done{false};
          const RequestId id = engine->submit(greedy_request(r.prompt, 200), [&](const RequestOutput& out) {
            if (out.finished) {
              if (out.finish_reason == TSR_FINISH_ABORT) ++aborted;
              done = true;
            }
          });
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          engine->cancel(id);
          while (!done) std::this_thread::yield();
        } else {
          EXPECT_EQ(engine->generate(greedy_request(r.prompt, 50)).tokens,
                    std::vector<int32_t>(r.greedy.begin(), r.greedy.begin() + 50));
        }
        ++finished;
      }
    });
  }
  for (auto& c : clients) c.join();
  engine->stop();
  EXPECT_EQ(finished, 12);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(engine->stats().num_running + engine->stats().num_waiting, 0);
}

// A call of sixteen sequences runs while single requests keep arriving: steps computing it
// are abandoned for the newcomers (SchedulerOutput::interruptible, LlamaForward's layer
// boundaries) and run again, and every output stays the references'. Whether an arrival
// lands inside an interruptible step is a matter of timing (on a fast, idle machine a run
// may see none), so the run repeats, up to five times, until one has been interrupted.
TEST_F(EngineInvariance, InterruptedStepsKeepGreedyOutput) {
  int64_t interrupted = 0;
  for (int attempt = 0; attempt < 5 && interrupted == 0; ++attempt) {
    auto engine = Engine::create(base_config());
    engine->start();
    const std::vector<RequestParams> batch = mixed_batch(refs_);
    std::vector<std::vector<int32_t>> outputs(batch.size());
    std::atomic<size_t> finished{0};
    std::vector<OutputCallback> callbacks;
    for (size_t i = 0; i < batch.size(); ++i) {
      callbacks.push_back([&outputs, &finished, i](const RequestOutput& out) {
        outputs[i].insert(outputs[i].end(), out.tokens.begin(), out.tokens.end());
        if (out.finished) ++finished;
      });
    }
    engine->submit_all(batch, std::move(callbacks));
    int arrivals = 0;
    for (; finished < batch.size(); ++arrivals) {
      const Reference& r = refs_[size_t(arrivals) % refs_.size()];
      EXPECT_EQ(engine->generate(greedy_request(r.prompt, 3)).tokens,
                std::vector<int32_t>(r.greedy.begin(), r.greedy.begin() + 3));
    }
    engine->stop();
    expect_references(refs_, outputs);
    const EngineStats stats = engine->stats();
    interrupted = stats.steps_interrupted;
    std::printf("%lld of %lld steps interrupted by %d arrivals\n", static_cast<long long>(stats.steps_interrupted),
                static_cast<long long>(stats.steps), arrivals);
    EXPECT_EQ(stats.kv_blocks_used, 0);
  }
  EXPECT_GT(interrupted, 0) << "no step was interrupted in five runs";
}

// What the engine cannot serve is refused at submit, naming the field, rather than failing
// later inside a step beside other requests.
TEST_F(EngineInvariance, SubmitRefusesOutOfRangeFields) {
  auto engine = Engine::create(base_config());
  const auto refused = [&](RequestParams p, const std::string& field) {
    try {
      engine->submit(std::move(p), {});
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused(greedy_request(refs_[0].prompt, 0), "max_tokens");
  RequestParams p = greedy_request(refs_[0].prompt, 8);
  p.sampling.logit_bias = {{engine->hparams().n_vocab, 1.0f}};
  refused(p, "logit_bias");
}

TEST_F(EngineInvariance, StopStringsAndMaxTokens) {
  auto engine = Engine::create(base_config());
  RequestParams p = greedy_request(refs_[0].prompt, 200);
  p.stop = {"little girl"};
  const GenerateResult r = engine->generate(p);
  EXPECT_EQ(r.text, ", there was a ");
  EXPECT_EQ(r.finish_reason, TSR_FINISH_STOP);
  RequestParams q = greedy_request(refs_[0].prompt, 7);
  const GenerateResult s = engine->generate(q);
  EXPECT_EQ(s.tokens.size(), 7u);
  EXPECT_EQ(s.finish_reason, TSR_FINISH_LENGTH);
}

}  // namespace
}  // namespace tsr
