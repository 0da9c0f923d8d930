// A tokenizer of single letters ('a', 'b', ...) for tests of requests and scheduling,
// which need token texts but no real vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/tokenizer/tokenizer.h"

namespace tsr::testing {

inline std::unique_ptr<Tokenizer> letter_tokenizer(int32_t n_tokens) {
  Vocab v;
  v.model = "llama";
  for (int32_t i = 0; i < n_tokens; ++i) v.tokens.push_back(std::string(1, char('a' + i)));
  v.types.assign(size_t(n_tokens), TokenType::NORMAL);
  v.add_bos = false;
  return Tokenizer::create(std::move(v));
}

}  // namespace tsr::testing
