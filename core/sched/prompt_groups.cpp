#include "core/sched/prompt_groups.h"

namespace tsr {

bool PromptGroups::join(uint64_t key, RequestId id) {
  auto [it, opened] = groups_.try_emplace(key, Group{id, {}});
  if (!opened) it->second.followers.push_back(id);
  return !opened;
}

std::vector<RequestId> PromptGroups::take_followers(RequestId leader) {
  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    if (it->second.leader != leader) continue;
    std::vector<RequestId> out = std::move(it->second.followers);
    groups_.erase(it);
    return out;
  }
  return {};
}

std::vector<RequestId> PromptGroups::take_orphans(const std::function<bool(RequestId)>& gone) {
  std::vector<RequestId> out;
  std::erase_if(groups_, [&](const auto& entry) {
    if (!gone(entry.second.leader)) return false;
    out.insert(out.end(), entry.second.followers.begin(), entry.second.followers.end());
    return true;
  });
  return out;
}

}  // namespace tsr
