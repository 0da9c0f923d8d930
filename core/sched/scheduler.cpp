#include "core/sched/scheduler.h"

#include <algorithm>
#include <utility>

#include "base/error.h"

namespace tsr {

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv) : config_(config), kv_(kv) {
  if (config_.max_batch_tokens <= 0 || config_.max_seqs <= 0) {
    throw Error("scheduler: max_batch_tokens and max_seqs must be > 0");
  }
}

// fcfs: arrival order. priority: lower value first, then arrival order.
bool Scheduler::runs_before(const Request* a, const Request* b) const {
  if (config_.policy == "priority" && a->params().priority != b->params().priority) {
    return a->params().priority < b->params().priority;
  }
  return a->arrival() < b->arrival() || (a->arrival() == b->arrival() && a->id() < b->id());
}

void Scheduler::add(Request* r) {
  auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                          [&](const Request* w) { return runs_before(r, w); });
  waiting_.insert(pos, r);
}

bool Scheduler::call_full(const Request& r) const {
  const auto it = running_per_call_.find(r.call());
  return it != running_per_call_.end() && it->second >= config_.call_share();
}

void Scheduler::enter_running(Request* r) {
  running_.push_back(r);
  ++running_per_call_[r->call()];
}

void Scheduler::leave_running(Request* r) {
  if (std::erase(running_, r) == 0) return;
  const auto it = running_per_call_.find(r->call());
  if (--it->second == 0) running_per_call_.erase(it);
}

bool Scheduler::add_running(Request* r, Clock::time_point now) {
  if (running_.size() >= static_cast<size_t>(config_.max_seqs) || call_full(*r)) return false;
  enter_running(r);
  prefix_queries_ += r->num_prompt_tokens();
  prefix_hits_ += r->num_computed();
  r->on_scheduled(now, r->num_computed());
  return true;
}

void Scheduler::remove(Request* r) {
  leave_running(r);
  std::erase(waiting_, r);
  kv_.free(r->id());
}

// Draft tokens count against the budget like any other token; a request caught up with
// its prompt is not chunked (prefill_chunk limits prefill only). A streaming window's ring
// step computes one position, and its recomputed sinks count against the budget too.
int32_t Scheduler::chunk_limit(const Request& r, int32_t budget) const {
  const StreamingWindow& w = kv_.window();
  int32_t n = std::min(r.num_tokens_with_drafts() - r.num_computed(), budget - w.extra_rows(r.num_computed()));
  if (config_.prefill_chunk > 0 && r.num_computed() + 1 < r.num_tokens()) {
    n = std::min(n, config_.prefill_chunk);
  }
  return w.step_limit(r.num_computed(), n);
}

int32_t Scheduler::step_cost(const Request& r, int32_t n) const { return n + kv_.window().extra_rows(r.num_computed()); }

// Drafts beyond what the step computes are dropped: they would have no logits.
void Scheduler::trim_drafts(Request& r, int32_t n) {
  const int32_t keep = std::max(0, r.num_computed() + n - r.num_tokens());
  r.truncate_drafts(static_cast<size_t>(keep));
}

// The running request that runs last under the policy is the one to give way.
Request* Scheduler::pick_victim() const {
  return *std::max_element(running_.begin(), running_.end(),
                           [&](const Request* a, const Request* b) { return runs_before(a, b); });
}

void Scheduler::preempt(Request* victim, SchedulerOutput& out, int32_t& budget) {
  auto scheduled = std::find_if(out.chunks.begin(), out.chunks.end(),
                                [&](const ScheduledChunk& c) { return c.request == victim; });
  if (scheduled != out.chunks.end()) {
    budget += step_cost(*victim, scheduled->num_new_tokens);
    out.num_tokens -= step_cost(*victim, scheduled->num_new_tokens);
    out.chunks.erase(scheduled);
  }
  leave_running(victim);
  kv_.free(victim->id());  // its full blocks stay in the prefix cache
  victim->on_preempted();
  victim->truncate_drafts(0);
  add(victim);  // in the policy's order, never ahead of a request that runs before it
  out.preempted.push_back(victim);
  ++preemptions_;
}

void Scheduler::schedule_running(SchedulerOutput& out, int32_t& budget, Clock::time_point now, bool yield) {
  std::vector<Request*> order = running_;
  std::sort(order.begin(), order.end(), [&](auto* a, auto* b) { return runs_before(a, b); });
  for (Request* r : order) {
    if (budget == 0) break;
    if (std::find(running_.begin(), running_.end(), r) == running_.end()) continue;  // preempted
    if (yield && running_per_call_.at(r->call()) > 1) continue;
    const int32_t n = chunk_limit(*r, budget);
    if (n <= 0) continue;
    bool fits = kv_.allocate(r->id(), r->num_computed() + n, r->num_computed());
    while (!fits) {
      Request* victim = pick_victim();
      preempt(victim, out, budget);
      if (victim == r) break;
      fits = kv_.allocate(r->id(), r->num_computed() + n, r->num_computed());
    }
    if (!fits) continue;
    trim_drafts(*r, n);
    r->on_scheduled(now, 0);
    out.chunks.push_back({r, n});
    out.num_tokens += step_cost(*r, n);
    budget -= step_cost(*r, n);
  }
}

void Scheduler::schedule_waiting(SchedulerOutput& out, int32_t& budget, Clock::time_point now) {
  for (auto it = waiting_.begin();
       it != waiting_.end() && budget > 0 && running_.size() < static_cast<size_t>(config_.max_seqs);) {
    Request* r = *it;
    // A request whose prefix is on its way from the disk tier, or whose call holds its share
    // of the batch, lets those behind it go first.
    if (call_full(*r) || (r->reads_cached_prefix() && kv_.prefix_loading(r->tokens(), r->cache_key()))) {
      ++it;
      continue;
    }
    const int32_t cached = r->reads_cached_prefix() ? kv_.claim_cached_prefix(r->id(), r->tokens(), r->cache_key()) : 0;
    r->set_num_computed(cached);
    const int32_t n = chunk_limit(*r, budget);
    if (!kv_.allocate(r->id(), r->num_computed() + n, r->num_computed())) {
      kv_.free(r->id());  // give the claimed prefix back; retry next step
      r->set_num_computed(0);
      break;
    }
    it = waiting_.erase(it);
    trim_drafts(*r, n);
    enter_running(r);
    prefix_queries_ += r->num_tokens();
    prefix_hits_ += cached;
    r->on_scheduled(now, cached);
    out.chunks.push_back({r, n});
    out.num_tokens += step_cost(*r, n);
    budget -= step_cost(*r, n);
  }
}

// A request that could start now whose call has nothing running.
bool Scheduler::new_call_waiting() {
  if (running_.size() >= static_cast<size_t>(config_.max_seqs)) return false;
  return std::ranges::any_of(waiting_, [&](const Request* r) {
    return !running_per_call_.contains(r->call()) &&
           !(r->reads_cached_prefix() && kv_.prefix_loading(r->tokens(), r->cache_key()));
  });
}

SchedulerOutput Scheduler::schedule(Clock::time_point now) {
  SchedulerOutput out;
  int32_t budget = config_.max_batch_tokens;
  const bool several = std::ranges::any_of(running_per_call_, [](const auto& c) { return c.second > 1; });
  const bool after_break = yielded_ || std::exchange(interrupted_, false);
  yielded_ = !yielded_ && several && new_call_waiting();
  out.interruptible = several && !yielded_ && !after_break && !kv_.window().enabled();
  schedule_running(out, budget, now, yielded_);
  // Admitting new work in a step that had to preempt would only thrash.
  if (out.preempted.empty()) schedule_waiting(out, budget, now);
  return out;
}

}  // namespace tsr
