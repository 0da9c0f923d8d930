#include "core/constraint/grammar_cache.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <sstream>

#include "base/error.h"

namespace tsr {

namespace {

using Clock = std::chrono::steady_clock;

std::string key_of(const ConstraintSpec& spec) { return spec.kind + '\0' + spec.text; }

ConstraintSpec spec_of(const std::string& key) {
  const size_t nul = key.find('\0');
  return {key.substr(0, nul), key.substr(nul + 1)};
}

// An entry's memory besides its grammar: the key (held once, by the map), and about 256
// bytes of map node, Entry and list links.
size_t entry_bytes(const std::string& key, const std::string& error, size_t grammar_bytes) {
  return key.capacity() + error.capacity() + grammar_bytes + 256;
}

}  // namespace

GrammarCache::GrammarCache(std::vector<std::shared_ptr<ConstraintPlugin>> plugins, Limits limits)
    : plugins_(std::move(plugins)), limits_(limits) {
  for (size_t i = 0; i < std::max<size_t>(limits_.workers, 1); ++i) workers_.emplace_back([this] { run(); });
}

GrammarCache::~GrammarCache() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& w : workers_) w.join();
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
  std::unique_lock lock(mutex_);
  auto [it, inserted] = entries_.try_emplace(key_of(spec));
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
  queue_.push_back(&*it);  // map nodes stay put; an entry leaves only once done
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
    Node* node = queue_.front();
    queue_.pop_front();
    lock.unlock();
    Result result = compile(node->first);
    if (stopping_) return;  // the waiters' owner is going away: they never run
    remeasure();
    finish(node, std::move(result));
  }
}

// Under the time budget, which starts when a worker takes the constraint up.
GrammarCache::Result GrammarCache::compile(const std::string& key) const {
  const ConstraintSpec spec = spec_of(key);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits_.compile_timeout_s));
  bool out_of_time = false;
  const std::function<bool()> should_stop = [&] {
    out_of_time = out_of_time || Clock::now() >= deadline;
    return out_of_time || stopping_.load(std::memory_order_relaxed);
  };
  Result result;
  try {
    result.grammar = plugin_for(spec.kind).compile(spec, should_stop);
  } catch (const std::exception& ex) {
    result.error = out_of_time ? budget_error() : ex.what();
  }
  return result;
}

std::string GrammarCache::budget_error() const {
  std::ostringstream s;
  s << "the constraint's compile exceeded its " << limits_.compile_timeout_s
    << " s budget (constraints.compile_timeout)";
  return s.str();
}

// The kept grammars' caches grow as their matchers run: their sizes are taken again,
// outside the lock (a grammar measures itself under its own).
void GrammarCache::remeasure() {
  std::vector<std::shared_ptr<CompiledConstraint>> grammars;
  {
    std::lock_guard lock(mutex_);
    for (const Node* node : lru_) {
      if (const auto& g = node->second.result.grammar) grammars.push_back(g);
    }
  }
  std::unordered_map<const CompiledConstraint*, size_t> sizes;
  for (const auto& g : grammars) sizes.emplace(g.get(), g->bytes());
  std::lock_guard lock(mutex_);
  for (Node* node : lru_) {
    Entry& e = node->second;
    auto it = sizes.find(e.result.grammar.get());
    if (it == sizes.end()) continue;
    const size_t now = entry_bytes(node->first, e.result.error, it->second);
    bytes_ = bytes_ - e.bytes + now;
    e.bytes = now;
  }
}

void GrammarCache::finish(Node* node, Result result) {
  const size_t bytes = entry_bytes(node->first, result.error, result.grammar ? result.grammar->bytes() : 0);
  std::unique_lock lock(mutex_);
  Entry& e = node->second;
  e.done = true;
  e.result = result;
  e.bytes = bytes;
  std::vector<Ready> waiters = std::move(e.waiters);
  lru_.push_front(node);
  e.lru = lru_.begin();
  bytes_ += bytes;
  evict_locked();  // may drop this very entry, when it alone is over the bound
  lock.unlock();
  for (Ready& w : waiters) w(result);
}

void GrammarCache::evict_locked() {
  while (!lru_.empty() && (lru_.size() > limits_.max_entries || bytes_ > limits_.max_bytes)) {
    Node* node = lru_.back();
    lru_.pop_back();
    bytes_ -= node->second.bytes;
    entries_.erase(entries_.find(node->first));  // not by key: the key dies with the node
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

size_t GrammarCache::entries() const {
  std::lock_guard lock(mutex_);
  return lru_.size();
}

size_t GrammarCache::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace tsr
