#include "server/response_store.h"

namespace tsr::server {

void ResponseStore::drop_oldest() {
  const auto it = entries_.find(order_.front());
  if (it != entries_.end()) {
    bytes_ -= it->second.bytes;
    entries_.erase(it);
  }
  order_.pop_front();
}

void ResponseStore::put(const std::string& id, nlohmann::json messages) {
  const size_t bytes = messages.dump().size() + id.size();
  if (bytes > max_bytes_ || max_entries_ == 0) return;
  std::lock_guard lock(mutex_);
  while (!order_.empty() && (entries_.size() >= max_entries_ || bytes_ + bytes > max_bytes_)) drop_oldest();
  entries_[id] = Entry{std::move(messages), bytes, Clock::now()};
  order_.push_back(id);
  bytes_ += bytes;
}

std::optional<nlohmann::json> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mutex_);
  while (!order_.empty() && Clock::now() - entries_.at(order_.front()).stored > ttl_) drop_oldest();
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.messages;
}

}  // namespace tsr::server
