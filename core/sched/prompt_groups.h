// Choices that share a prompt (OpenAI's n > 1, RequestParams::prompt_group): the first to
// arrive leads and computes the prompt; the others wait outside the scheduler and, once
// the leader's prompt is computed, fork its KV (every block shared, the partial last one
// copied on write) and draw their first token from the leader's last logits row. So n
// choices prefill the prompt once, as vLLM's and SGLang's parallel sampling intend.
// Requests are named by id: a follower may be cancelled, and a leader may finish, while
// the group waits. Not thread-safe: the engine's step thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "core/request/request.h"

namespace tsr {

class PromptGroups {
 public:
  // Whether request `id` of group `key` follows: a leader of that group is still computing
  // its prompt. Otherwise `id` leads the group (a new one) and runs as usual.
  bool join(uint64_t key, RequestId id);
  // The followers of `leader`, once (its prompt is computed); the group closes.
  std::vector<RequestId> take_followers(RequestId leader);
  // The followers of every group whose leader `gone` says finished or left before its
  // prompt was computed: they run on their own. Those groups close.
  std::vector<RequestId> take_orphans(const std::function<bool(RequestId)>& gone);
  bool empty() const { return groups_.empty(); }

 private:
  struct Group {
    RequestId leader;
    std::vector<RequestId> followers;
  };
  std::unordered_map<uint64_t, Group> groups_;  // open groups by key
};

}  // namespace tsr
