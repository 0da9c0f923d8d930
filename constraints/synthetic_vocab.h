// A small synthetic vocabulary for the constraint tests and fuzzers (no test framework):
// every single byte, multi-byte tokens, partial UTF-8 tokens and specials, and greedy
// longest-match tokenization over it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "constraints/compiled_grammar.h"

namespace tsr::constraints::testing {

inline constexpr int32_t kEos = 0;
inline constexpr int32_t kBos = 1;

inline std::shared_ptr<const Vocabulary> synthetic_vocab() {
  static auto vocab = [] {
    auto v = std::make_shared<Vocabulary>();
    auto add = [&](std::string bytes, bool special) {
      v->bytes.push_back(std::move(bytes));
      v->special.push_back(special);
    };
    add("", true);  // EOS
    add("", true);  // BOS
    for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)), false);
    for (const char* t : {"{\"", "\": ", ", \"", "\"}", "true", "false", "null", "ab", "abc",
                          "12", "3.5", "-1", "]}", "\u00e9", "\xC3", "\xA9\"", "\u65e5\u672c",
                          "\xE6\x97", "\xA5\xE6\x9C\xAC", "\": \"", "\\\"", "\\n", "  ", "\n"}) {
      add(t, false);
    }
    v->eos_ids = {kEos};
    return std::shared_ptr<const Vocabulary>(v);
  }();
  return vocab;
}

inline std::shared_ptr<CompiledGrammar> compile_test(ConstraintKind kind, const std::string& text) {
  auto vocab = synthetic_vocab();
  static auto trie = std::make_shared<const TokenTrie>(*vocab);
  return compile(kind, text, vocab, trie);
}

// Greedy longest-match tokenization over the synthetic vocabulary.
inline std::vector<int32_t> tokenize(const std::string& text) {
  const Vocabulary& v = *synthetic_vocab();
  std::vector<int32_t> ids;
  for (size_t pos = 0; pos < text.size();) {
    int32_t best = -1;
    for (size_t id = 0; id < v.size(); ++id) {
      const std::string& b = v.bytes[id];
      if (v.special[id] || b.empty() || text.compare(pos, b.size(), b) != 0) continue;
      if (best < 0 || b.size() > v.bytes[best].size()) best = static_cast<int32_t>(id);
    }
    ids.push_back(best);
    pos += v.bytes[best].size();
  }
  return ids;
}

inline bool mask_has(const std::vector<uint32_t>& mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1; }

}  // namespace tsr::constraints::testing
