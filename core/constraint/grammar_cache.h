// Compiled constraints by (kind, text): compiles on a worker thread of its own, so that a
// large schema never stalls the engine's step, and shares each result between requests.
// The vocabulary is fixed per engine (one cache per engine), so (kind, text) identifies a
// grammar. Failures are cached too: a schema that does not compile fails fast next time.
//
// Thread-safe: request() may be called from any thread; `ready` callbacks run on the
// worker thread (or, for a cached result, on the caller's thread before request()
// returns).
#pragma once

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

  // The first plugin that serves a kind compiles it.
  GrammarCache(std::vector<std::shared_ptr<ConstraintPlugin>> plugins, size_t capacity = 256);
  ~GrammarCache();  // waits for the compile in progress; pending callbacks never run

  // Throws tsr::Error when no plugin serves `kind`, naming the kinds that are served.
  void check_kind(const std::string& kind) const;
  // Delivers the compiled constraint to `ready`, compiling it first unless cached.
  void request(const ConstraintSpec& spec, Ready ready);
  // Compiles synchronously (through the cache); throws tsr::Error on failure.
  std::shared_ptr<CompiledConstraint> get(const ConstraintSpec& spec);

  size_t hits() const;
  size_t misses() const;

 private:
  struct Entry {
    bool done = false;
    Result result;
    std::vector<Ready> waiters;
    std::list<std::string>::iterator lru;
  };

  const ConstraintPlugin& plugin_for(const std::string& kind) const;
  void run();
  void evict_locked();

  std::vector<std::shared_ptr<ConstraintPlugin>> plugins_;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Entry> entries_;  // key: kind '\0' text
  std::list<std::string> lru_;                      // finished entries, most recent first
  std::deque<std::pair<std::string, ConstraintSpec>> queue_;
  size_t hits_ = 0, misses_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace tsr
