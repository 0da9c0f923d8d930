#include "constraints/vocabulary.h"

#include <algorithm>
#include <numeric>

#include "core/tokenizer/tokenizer.h"

namespace tsr::constraints {

Vocabulary vocabulary_from_tokenizer(const Tokenizer& tokenizer) {
  const Vocab& v = tokenizer.vocab();
  Vocabulary out;
  size_t n = static_cast<size_t>(tokenizer.n_tokens());
  out.bytes.resize(n);
  out.special.resize(n);
  for (size_t id = 0; id < n; ++id) {
    TokenType type = id < v.types.size() ? v.types[id] : TokenType::NORMAL;
    bool text = type == TokenType::NORMAL || type == TokenType::USER_DEFINED ||
                type == TokenType::BYTE || type == TokenType::UNDEFINED;
    out.special[id] = !text;
    if (text) out.bytes[id] = tokenizer.token_to_piece(static_cast<int32_t>(id), true);
  }
  out.eos_ids = v.eog_ids;
  if (out.eos_ids.empty() && v.eos_id >= 0) out.eos_ids.push_back(v.eos_id);
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
}

}  // namespace tsr::constraints
