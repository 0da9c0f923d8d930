#include "core/sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/tokenizer/tokenizer.h"
#include "tests/common/letter_tokenizer.h"

namespace tsr {
namespace {

constexpr int32_t kVocab = 8, kBlockSize = 4, kCtx = 64;

// Requests with their engine-side bookkeeping: what a step does after the forward pass.
class SchedulerTest : public ::testing::TestWithParam<const char*> {
 protected:
  Request& add(int32_t prompt_len, int32_t max_tokens, int32_t priority) {
    RequestParams p;
    p.prompt.assign(static_cast<size_t>(prompt_len), 1);
    p.max_tokens = max_tokens;
    p.priority = priority;
    p.sampling.temperature = 0;
    p.ignore_eos = true;
    requests_.push_back(std::make_unique<Request>(next_id_++, std::move(p), *tokenizer_, now_));
    now_ += std::chrono::milliseconds(1);
    scheduler_.add(requests_.back().get());
    return *requests_.back();
  }

  // Schedules one step and completes it: every request caught up samples token 3.
  SchedulerOutput step() {
    SchedulerOutput out = scheduler_.schedule(now_);
    std::vector<float> logits(kVocab, 0.0f);
    logits[3] = 1.0f;
    for (const ScheduledChunk& c : out.chunks) {
      Request& r = *c.request;
      r.on_computed(c.num_new_tokens);
      if (r.num_computed() < r.num_tokens()) continue;
      r.append_verified(logits, kVocab, kCtx, now_);
      if (r.finished()) scheduler_.remove(&r);
    }
    return out;
  }

  std::unique_ptr<Tokenizer> tokenizer_ = testing::letter_tokenizer(kVocab);
  KvCacheManager kv_{3, kBlockSize, false};
  SchedulerConfig config_{64, 8, GetParam(), 0};
  Scheduler scheduler_{config_, kv_};
  std::vector<std::unique_ptr<Request>> requests_;
  RequestId next_id_ = 1;
  Clock::time_point now_ = Clock::now();
};

// A preempted request waits in the policy's order. Three blocks: `first` and `low` take one
// each, `middle` arrives wanting two, `first` takes the last one and `low` gives way; when
// `first` finishes, the head of the queue gets two of the three free blocks and the other
// waits. Under priority that is `middle` (5 before 9); under fcfs `low`, which arrived first.
TEST_P(SchedulerTest, PreemptedRequestWaitsInPolicyOrder) {
  Request& first = add(4, 2, 0);
  Request& low = add(4, 10, 9);
  EXPECT_EQ(step().chunks.size(), 2u);
  Request& middle = add(8, 4, 5);
  const SchedulerOutput preempting = step();
  ASSERT_EQ(preempting.preempted, std::vector<Request*>{&low});
  EXPECT_TRUE(first.finished());
  const SchedulerOutput next = step();
  ASSERT_EQ(next.chunks.size(), 1u);
  EXPECT_EQ(next.chunks[0].request, std::string(GetParam()) == "priority" ? &middle : &low);
  EXPECT_EQ(scheduler_.num_waiting(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Policies, SchedulerTest, ::testing::Values("priority", "fcfs"));

// A scheduler of 8 sequences (a call's share: 4) and requests of 4 prompt tokens, each of
// a call given by number.
struct Calls {
  std::unique_ptr<Tokenizer> tokenizer = testing::letter_tokenizer(kVocab);
  KvCacheManager kv{64, kBlockSize, false};
  Scheduler scheduler{SchedulerConfig{64, 8, "fcfs", 0}, kv};
  std::vector<std::unique_ptr<Request>> requests;
  Clock::time_point now = Clock::now();

  Request* add(RequestId call) {
    RequestParams p;
    p.prompt.assign(4, 1);
    p.max_tokens = 8;
    requests.push_back(std::make_unique<Request>(RequestId(requests.size() + 1), std::move(p), *tokenizer, now));
    requests.back()->set_call(call);
    scheduler.add(requests.back().get());
    return requests.back().get();
  }
};

// One call's requests hold at most its share of the batch (half of max_seqs: 4 of 8); a
// request of another call, queued behind the call's waiting ones, takes a free slot at
// once, and the call's next request runs only when one of its own leaves.
TEST(SchedulerCallShare, ACallHoldsAtMostItsShareOfTheBatch) {
  Calls calls;
  Scheduler& scheduler = calls.scheduler;
  const Clock::time_point now = calls.now;
  const auto add = [&](RequestId call) { return calls.add(call); };
  for (int i = 0; i < 10; ++i) add(1);
  EXPECT_EQ(scheduler.schedule(now).chunks.size(), 4u);
  EXPECT_EQ(scheduler.num_running(), 4u);
  Request* other = add(11);
  const SchedulerOutput out = scheduler.schedule(now);
  EXPECT_TRUE(std::ranges::any_of(out.chunks, [&](const ScheduledChunk& c) { return c.request == other; }));
  EXPECT_EQ(scheduler.num_running(), 5u);
  scheduler.schedule(now);  // call 1's four run again (they sat out the step that started call 11)
  scheduler.remove(calls.requests[0].get());  // one of the call's ends: the next of it may run
  scheduler.schedule(now);
  EXPECT_EQ(scheduler.num_running(), 5u);
  EXPECT_EQ(scheduler.num_waiting(), 5u);
}

// A call holding several sequences sits out the step in which a new call starts, so that
// step computes only the newcomer (and single-sequence calls); never two steps in a row,
// so a stream of new calls cannot starve it.
TEST(SchedulerCallShare, ACallOfSeveralSequencesSitsOutANewCallsFirstStep) {
  Calls calls;
  Scheduler& scheduler = calls.scheduler;
  const Clock::time_point now = calls.now;
  const auto add = [&](RequestId call) { return calls.add(call); };
  const auto requests_of = [](const SchedulerOutput& out) {
    std::vector<Request*> v;
    for (const ScheduledChunk& c : out.chunks) v.push_back(c.request);
    return v;
  };
  for (int i = 0; i < 3; ++i) add(1);
  Request* single = add(2);
  EXPECT_EQ(scheduler.schedule(now).chunks.size(), 4u);
  Request* first = add(11);
  EXPECT_EQ(requests_of(scheduler.schedule(now)), (std::vector<Request*>{single, first}));
  Request* second = add(12);  // arrives at once: call 1 ran in neither step otherwise
  EXPECT_EQ(scheduler.schedule(now).chunks.size(), 6u);
  EXPECT_EQ(scheduler.num_running(), 6u);
  EXPECT_NE(second, nullptr);
  EXPECT_EQ(scheduler.schedule(now).chunks.size(), 6u);  // nothing new: everyone runs
}

// A step computing a call of several sequences may be abandoned for a newcomer, but not the
// step after an abandoned or yielding one, so such a call advances whatever arrives. An
// abandoned step is scheduled again whole; steps of single-sequence calls are never
// interruptible (they are short).
TEST(SchedulerCallShare, AStepOfSeveralSequencesIsInterruptibleButNotTwiceInARow) {
  Calls calls;
  Scheduler& scheduler = calls.scheduler;
  const Clock::time_point now = calls.now;
  calls.add(2);
  EXPECT_FALSE(scheduler.schedule(now).interruptible);
  EXPECT_FALSE(scheduler.schedule(now).interruptible);  // one sequence: nothing to interrupt
  for (int i = 0; i < 3; ++i) calls.add(1);
  EXPECT_FALSE(scheduler.schedule(now).interruptible);  // call 1 was not running yet
  const SchedulerOutput abandoned = scheduler.schedule(now);
  EXPECT_TRUE(abandoned.interruptible);
  scheduler.on_interrupted();
  const SchedulerOutput again = scheduler.schedule(now);
  EXPECT_FALSE(again.interruptible);
  ASSERT_EQ(again.chunks.size(), abandoned.chunks.size());
  for (size_t i = 0; i < again.chunks.size(); ++i) {
    EXPECT_EQ(again.chunks[i].request, abandoned.chunks[i].request);
    EXPECT_EQ(again.chunks[i].num_new_tokens, abandoned.chunks[i].num_new_tokens);
  }
  EXPECT_TRUE(scheduler.schedule(now).interruptible);
  calls.add(11);
  const SchedulerOutput yielding = scheduler.schedule(now);
  EXPECT_EQ(yielding.chunks.size(), 2u);  // the newcomer and the single-sequence call
  EXPECT_FALSE(yielding.interruptible);
  EXPECT_FALSE(scheduler.schedule(now).interruptible);  // the step after a yielding one
  EXPECT_TRUE(scheduler.schedule(now).interruptible);
}

}  // namespace
}  // namespace tsr
