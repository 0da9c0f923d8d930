// Compiled constraints by (kind, text): compiles on worker threads of its own, several at
// once, so that a large schema never stalls the engine's step nor another request's
// compile, and shares each result between requests. The vocabulary is fixed per engine
// (one cache per engine), so (kind, text) identifies a grammar. Failures are cached too: a
// schema that does not compile fails fast next time.
//
// Hostile constraints are bounded three ways: every compile has a time budget (plugins
// with ABI 2.3's grammar_compile_limited poll it and give up; the error names
// constraints.compile_timeout), the finished entries are kept within a byte bound as well
// as a count (least recently used first out; a grammar larger than the whole bound is
// delivered but not kept), and the grammars' sizes are measured again whenever an entry
// is added, since their mask caches grow as matchers run.
//
// Thread-safe: request() may be called from any thread; `ready` callbacks run on a
// worker thread (or, for a cached result, on the caller's thread before request()
// returns).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/constraint/constraint_plugin.h"

namespace tsr {

class GrammarCache {
 public:
  // Either a grammar or the reason it did not compile.
  struct Result {
    std::shared_ptr<CompiledConstraint> grammar;
    std::string error;
  };
  using Ready = std::function<void(const Result&)>;

  // [constraints] compile_workers, cache_memory and compile_timeout, and a count bound.
  struct Limits {
    size_t workers = 2;
    size_t max_entries = 256;
    size_t max_bytes = size_t{256} << 20;
    double compile_timeout_s = 10;
  };

  // The first plugin that serves a kind compiles it.
  GrammarCache(std::vector<std::shared_ptr<ConstraintPlugin>> plugins, Limits limits);
  // Stops the compiles in progress (those of plugins that poll their limits) and waits
  // for them; pending callbacks never run.
  ~GrammarCache();

  // Throws tsr::Error when no plugin serves `kind`, naming the kinds that are served.
  void check_kind(const std::string& kind) const;
  // Delivers the compiled constraint to `ready`, compiling it first unless cached.
  void request(const ConstraintSpec& spec, Ready ready);
  // Compiles synchronously (through the cache, on a worker, within the same budget);
  // throws tsr::Error on failure.
  std::shared_ptr<CompiledConstraint> get(const ConstraintSpec& spec);

  size_t hits() const;
  size_t misses() const;
  // The finished entries kept, and their bytes as last measured.
  size_t entries() const;
  size_t bytes() const;

 private:
  struct Entry {
    bool done = false;
    Result result;
    size_t bytes = 0;  // the key's and the result's, as last measured
    std::vector<Ready> waiters;
    std::list<std::pair<const std::string, Entry>*>::iterator lru;
  };
  using Node = std::pair<const std::string, Entry>;  // an entry with its key, as the map holds it

  const ConstraintPlugin& plugin_for(const std::string& kind) const;
  void run();
  Result compile(const std::string& key) const;
  std::string budget_error() const;
  void remeasure();
  void finish(Node* node, Result result);
  void evict_locked();

  std::vector<std::shared_ptr<ConstraintPlugin>> plugins_;
  const Limits limits_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Entry> entries_;  // key: kind '\0' text
  std::list<Node*> lru_;                            // finished entries, most recent first
  std::deque<Node*> queue_;                         // entries waiting for a worker
  size_t bytes_ = 0;                                // of the entries in lru_
  size_t hits_ = 0, misses_ = 0;
  std::atomic<bool> stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace tsr
