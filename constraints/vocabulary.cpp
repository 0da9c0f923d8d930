#include "constraints/vocabulary.h"

#include <algorithm>
#include <numeric>


namespace tsr::constraints {

Vocabulary vocabulary_from_desc(const tsr_vocab_desc& desc) {
  Vocabulary out;
  const auto n = static_cast<size_t>(desc.n_tokens);
  out.bytes.resize(n);
  out.special.resize(n);
  for (size_t id = 0; id < n; ++id) {
    const bool text = desc.token_kinds[id] == TSR_TOKEN_TEXT;
    out.special[id] = !text;
    if (text && desc.token_lens[id] > 0) out.bytes[id].assign(desc.token_bytes[id], desc.token_lens[id]);
    if (desc.token_kinds[id] == TSR_TOKEN_EOS) out.eos_ids.push_back(static_cast<int32_t>(id));
  }
  return out;
}

TokenTrie::TokenTrie(const Vocabulary& vocab) {
  std::vector<uint32_t> order;
  for (uint32_t id = 0; id < vocab.size(); ++id) {
    if (!vocab.special[id] && !vocab.bytes[id].empty()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return vocab.bytes[a] != vocab.bytes[b] ? vocab.bytes[a] < vocab.bytes[b] : a < b;
  });
  // Sorted strings visit the trie in preorder: each token adds the nodes past its common
  // prefix with the previous token.
  byte.push_back(0);
  depth.push_back(0);
  tokens_begin.push_back(0);
  const std::string* prev = nullptr;
  for (uint32_t id : order) {
    const std::string& s = vocab.bytes[id];
    size_t common = 0;
    if (prev) {
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    }
    for (size_t d = common; d < s.size(); ++d) {
      byte.push_back(static_cast<uint8_t>(s[d]));
      depth.push_back(static_cast<uint16_t>(d + 1));
      tokens_begin.push_back(static_cast<uint32_t>(ids.size()));
    }
    ids.push_back(id);
    max_depth = std::max(max_depth, s.size());
    prev = &s;
  }
  tokens_begin.push_back(static_cast<uint32_t>(ids.size()));
  // A node's subtree ends at the next node whose depth is not larger.
  skip.assign(byte.size(), static_cast<uint32_t>(byte.size()));
  std::vector<uint32_t> open;
  for (uint32_t i = 0; i < byte.size(); ++i) {
    while (!open.empty() && depth[open.back()] >= depth[i]) {
      skip[open.back()] = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  deepest.assign(depth.begin(), depth.end());
  for (size_t i = byte.size(); i-- > 1;) {
    for (uint32_t c = static_cast<uint32_t>(i) + 1; c < skip[i]; c = skip[c]) deepest[i] = std::max(deepest[i], deepest[c]);
  }
  tokens_up_to.assign(max_depth + 1, std::vector<uint32_t>(vocab.mask_words(), 0));
  for (uint32_t id : order) {
    for (size_t n = vocab.bytes[id].size(); n <= max_depth; ++n) tokens_up_to[n][id >> 5] |= 1u << (id & 31);
  }
}

}  // namespace tsr::constraints
