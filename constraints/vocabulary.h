// The token vocabulary a grammar is compiled for: each token's bytes, which tokens are
// special (never allowed, except end-of-sequence tokens where the grammar may end), and a
// byte trie over the normal tokens for the mask walk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "constraints/portion_cache.h"
#include "tessera/constraint.h"

namespace tsr::constraints {

struct Vocabulary {
  std::vector<std::string> bytes;  // per token id; ignored for special tokens
  std::vector<bool> special;       // control/unused/unknown tokens
  std::vector<int32_t> eos_ids;    // allowed exactly where the grammar can end

  size_t size() const { return bytes.size(); }
  size_t mask_words() const { return (bytes.size() + 31) / 32; }
};

// The vocabulary a host describes through the constraint ABI (text tokens keep their
// bytes; EOS tokens are special and listed in eos_ids).
Vocabulary vocabulary_from_desc(const tsr_vocab_desc& desc);

// The normal tokens' bytes in depth-first preorder: node i spells its parent's bytes plus
// byte[i]; skip[i] is the first node after i's subtree, so a walk drops a dead prefix
// with one jump. Node 0 is the root (empty prefix).
struct TokenTrie {
  explicit TokenTrie(const Vocabulary& vocab);

  std::vector<uint8_t> byte;
  std::vector<uint16_t> depth;
  std::vector<uint32_t> skip;
  std::vector<uint32_t> tokens_begin;  // tokens ending at node i: ids[tokens_begin[i] ..
  std::vector<uint32_t> ids;           //   tokens_begin[i + 1])
  std::vector<uint16_t> deepest;       // the largest depth in node i's subtree
  size_t max_depth = 0;
  // tokens_up_to[n]: a mask of the normal tokens of at most n bytes.
  std::vector<std::vector<uint32_t>> tokens_up_to;
  // Recognizer results that hold for every grammar over this trie.
  mutable SharedPortions shared_portions;
};

}  // namespace tsr::constraints
