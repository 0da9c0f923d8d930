// What a top portion of a recognizer stack accepts by itself (recognizer.h), and a cache
// of such results shared by every grammar compiled for one token trie: grammars repeat
// the same small sub-automata (the inside of a JSON string above all), whose walks over
// the whole trie would otherwise be redone for each grammar. Entries are keyed by the
// sub-automaton's structure, so equal keys mean equal results. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tsr::constraints {

struct Portion {
  std::vector<uint32_t> words;   // the tokens accepted as a mask when there are many,
  std::vector<uint32_t> ids;     //   else as a list
  std::vector<uint32_t> exits;   // trie nodes (depth >= 1) where the portion can return
};

class SharedPortions {
 public:
  std::optional<Portion> find(const std::string& key) const {
    std::lock_guard lock(mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }

  void insert(const std::string& key, const Portion& p) {
    std::lock_guard lock(mutex_);
    if (map_.size() >= kMaxEntries) map_.clear();
    map_.emplace(key, p);
  }

 private:
  static constexpr size_t kMaxEntries = 1024;  // a dense entry is one mask (16 KiB at 128k)

  mutable std::mutex mutex_;
  std::unordered_map<std::string, Portion> map_;
};

}  // namespace tsr::constraints
