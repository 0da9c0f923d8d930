// The shape of a draft tree (tsr_draft_proposal.parents): node i follows the history when
// parents[i] is -1, else the earlier node parents[i]. Proposals are checked to name only
// earlier nodes (DraftClient) before anything here reads them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tsr {

// Each node's depth: 1 for a node that follows the history, its parent's + 1 otherwise;
// a path from the history to node i holds depths[i] tokens.
inline std::vector<int32_t> draft_tree_depths(std::span<const int32_t> parents) {
  std::vector<int32_t> depth(parents.size());
  for (size_t i = 0; i < parents.size(); ++i) depth[i] = parents[i] < 0 ? 1 : depth[size_t(parents[i])] + 1;
  return depth;
}

}  // namespace tsr
