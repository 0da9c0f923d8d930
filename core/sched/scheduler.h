// The token-budget scheduler. One rule, no phases: every request has num_computed tokens
// catching up with its token count; each step spends `max_batch_tokens` over running
// requests first, then waiting ones. Continuous batching, chunked prefill, prefix-cache
// hits and preemption by recompute all follow from it, and so does a streaming window's
// eviction (positions past its capacity, one per step). A waiting request whose cached
// prefix is still being read from the disk tier is passed over until it has arrived, and
// so is one whose call already holds its share of the batch (SchedulerConfig::call_share):
// the choices of one call never fill the batch while another call's request waits. And a
// call holding several sequences sits out a step in which a new call (one with nothing
// running) waits to start, never two steps in a row: on a CPU a step's time grows with
// its rows, so a new request's first token does not wait for another call's whole batch
// (it waits for the step in flight, then runs beside single-sequence calls only). Such a
// step may also be interrupted (SchedulerOutput::interruptible): a new call arriving while
// it runs abandons it, so the newcomer waits for half a step at most. Neither the step after
// an interrupted or yielding one nor a streaming window's step is interruptible, so
// multi-sequence calls advance at least every third step whatever arrives.
// Not thread-safe: the engine's step thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "core/config/config.h"
#include "core/kv/kv_cache_manager.h"
#include "core/request/request.h"

namespace tsr {

struct ScheduledChunk {
  Request* request;
  int32_t num_new_tokens;  // positions num_computed .. num_computed + num_new_tokens - 1
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  std::vector<Request*> preempted;
  int32_t num_tokens = 0;
  // The step may be abandoned when a new call arrives (Scheduler::on_interrupted).
  bool interruptible = false;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);

  void add(Request* r);  // joins the waiting queue as the policy orders it
  // A request whose prompt's KV is in place (a fork of its group leader's) joins the
  // running requests, counted as a prefix hit; false (nothing changes) when max_seqs run.
  bool add_running(Request* r, Clock::time_point now);
  SchedulerOutput schedule(Clock::time_point now);
  // The last schedule()'s step was abandoned before it computed anything: its requests
  // keep their places, blocks and computed tokens, and the next schedule() starts over.
  void on_interrupted() { interrupted_ = true; }
  // Removes a request from the queues and frees its blocks (finished or aborted).
  void remove(Request* r);

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  bool empty() const { return waiting_.empty() && running_.empty(); }
  int64_t total_preemptions() const { return preemptions_; }
  // Tokens of requests admitted from the waiting queue, and those found in the prefix cache.
  int64_t prefix_queries() const { return prefix_queries_; }
  int64_t prefix_hits() const { return prefix_hits_; }

 private:
  int32_t chunk_limit(const Request& r, int32_t budget) const;
  // Rows a chunk of n positions computes (its own and a streaming window's sinks).
  int32_t step_cost(const Request& r, int32_t n) const;
  static void trim_drafts(Request& r, int32_t n);
  bool runs_before(const Request* a, const Request* b) const;
  Request* pick_victim() const;
  void preempt(Request* victim, SchedulerOutput& out, int32_t& budget);
  void schedule_running(SchedulerOutput& out, int32_t& budget, Clock::time_point now, bool yield);
  bool new_call_waiting();
  void schedule_waiting(SchedulerOutput& out, int32_t& budget, Clock::time_point now);
  bool call_full(const Request& r) const;
  void enter_running(Request* r);
  void leave_running(Request* r);

  SchedulerConfig config_;
  KvCacheManager& kv_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;
  std::unordered_map<RequestId, int32_t> running_per_call_;
  int64_t preemptions_ = 0;
  bool yielded_ = false;      // the last step's multi-sequence calls sat out
  bool interrupted_ = false;  // the last step was abandoned
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace tsr
