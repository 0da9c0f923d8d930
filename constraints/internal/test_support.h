// Shared helpers for the constraint tests: whole-string checks over the synthetic
// vocabulary (synthetic_vocab.h) that run byte by byte and token by token, verifying the
// mask against accept() on forks.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "constraints/compiled_grammar.h"
#include "constraints/matcher.h"
#include "constraints/synthetic_vocab.h"

namespace tsr::constraints::testing {

// Every token is in the mask iff a fork accepts it.
inline void expect_mask_consistent(const Matcher& m) {
  const Vocabulary& v = *synthetic_vocab();
  std::vector<uint32_t> mask(v.mask_words());
  m.fill_mask(mask.data());
  for (size_t id = 0; id < v.size(); ++id) {
    Matcher f = m.fork();
    ASSERT_EQ(mask_has(mask, static_cast<int32_t>(id)), f.accept(static_cast<int32_t>(id))) << "token " << id;
  }
}

// Whole-string membership, checked byte by byte.
inline bool matches_bytes(const std::shared_ptr<CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  for (char c : text) {
    if (!m.accept_bytes(std::string(1, c))) return false;
  }
  return m.can_terminate();
}

// Whole-string membership, checked token by token with the mask verified at each step;
// also requires the byte-by-byte answer to agree.
inline bool matches(const std::shared_ptr<CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  bool ok = true;
  for (int32_t id : tokenize(text)) {
    expect_mask_consistent(m);
    if (!m.accept(id)) {
      ok = false;
      break;
    }
  }
  if (ok) {
    expect_mask_consistent(m);
    ok = m.can_terminate();
  }
  EXPECT_EQ(ok, matches_bytes(g, text)) << "byte and token walks disagree on: " << text;
  return ok;
}

inline std::string compile_error(ConstraintKind kind, const std::string& text) {
  try {
    compile_test(kind, text);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace tsr::constraints::testing
