#include "core/constraint/grammar_cache.h"

#include <future>

#include "base/error.h"

namespace tsr {

namespace {

std::string key_of(const ConstraintSpec& spec) { return spec.kind + '\0' + spec.text; }

}  // namespace

GrammarCache::GrammarCache(std::vector<std::shared_ptr<ConstraintPlugin>> plugins, size_t capacity)
    : plugins_(std::move(plugins)), capacity_(capacity), worker_([this] { run(); }) {}

GrammarCache::~GrammarCache() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

const ConstraintPlugin& GrammarCache::plugin_for(const std::string& kind) const {
  for (const auto& p : plugins_) {
    if (p->serves(kind)) return *p;
  }
  std::string served;
  for (const auto& p : plugins_) {
    for (const std::string& k : p->kinds()) served += (served.empty() ? "" : ", ") + k;
  }
  throw Error("no constraint plugin compiles kind '" + kind + "' (loaded: " +
              (served.empty() ? "none; see [constraints] plugins" : served) + ")");
}

void GrammarCache::check_kind(const std::string& kind) const { plugin_for(kind); }

void GrammarCache::request(const ConstraintSpec& spec, Ready ready) {
  check_kind(spec.kind);  // an unknown kind fails here, on the caller's thread
  std::string key = key_of(spec);
  std::unique_lock lock(mutex_);
  auto [it, inserted] = entries_.try_emplace(key);
  Entry& e = it->second;
  if (e.done) {
    ++hits_;
    lru_.splice(lru_.begin(), lru_, e.lru);
    const Result result = e.result;
    lock.unlock();
    ready(result);
    return;
  }
  e.waiters.push_back(std::move(ready));
  if (!inserted) {
    ++hits_;  // compiling already: share it
    return;
  }
  ++misses_;
  queue_.emplace_back(std::move(key), spec);
  lock.unlock();
  cv_.notify_one();
}

std::shared_ptr<CompiledConstraint> GrammarCache::get(const ConstraintSpec& spec) {
  std::promise<Result> promise;
  std::future<Result> future = promise.get_future();
  request(spec, [&promise](const Result& r) { promise.set_value(r); });
  Result r = future.get();
  if (!r.grammar) throw Error(r.error);
  return r.grammar;
}

void GrammarCache::run() {
  for (;;) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    auto [key, spec] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Result result;
    try {
      result.grammar = plugin_for(spec.kind).compile(spec);
    } catch (const std::exception& ex) {
      result.error = ex.what();
    }
    lock.lock();
    Entry& e = entries_.at(key);
    e.done = true;
    e.result = result;
    std::vector<Ready> waiters = std::move(e.waiters);
    lru_.push_front(key);
    e.lru = lru_.begin();
    evict_locked();
    lock.unlock();
    for (Ready& w : waiters) w(result);
  }
}

void GrammarCache::evict_locked() {
  while (lru_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
}

size_t GrammarCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

size_t GrammarCache::misses() const {
  std::lock_guard lock(mutex_);
  return misses_;
}

}  // namespace tsr
