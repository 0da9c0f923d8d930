// The stored conversations behind /v1/responses' previous_response_id: each stored
// response keeps its whole conversation as chat messages (the previous ones', its input,
// its output; never its instructions, which do not carry over, as OpenAI's do not), in
// memory, bounded by count and bytes (the oldest go first) and by age. Thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace tsr::server {

class ResponseStore {
 public:
  ResponseStore(size_t max_entries, size_t max_bytes, std::chrono::seconds ttl)
      : max_entries_(max_entries), max_bytes_(max_bytes), ttl_(ttl) {}

  // Keeps `messages` (a JSON array) under `id`, dropping the oldest entries while over a
  // bound; a conversation larger than max_bytes alone is not kept.
  void put(const std::string& id, nlohmann::json messages);
  // The conversation of `id`, or nullopt when unknown, expired or dropped.
  std::optional<nlohmann::json> get(const std::string& id);

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    nlohmann::json messages;
    size_t bytes;
    Clock::time_point stored;
  };
  void drop_oldest();

  const size_t max_entries_, max_bytes_;
  const std::chrono::seconds ttl_;
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  std::deque<std::string> order_;  // oldest first
  size_t bytes_ = 0;
};

}  // namespace tsr::server
