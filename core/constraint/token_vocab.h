// The model's vocabulary as constraint plugins see it (tsr_vocab_desc): each token's bytes
// and whether it is text, special, or end-of-generation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/constraint.h"

namespace tsr {

class Tokenizer;

class TokenVocab {
 public:
  // Normal, user-defined, byte and undefined tokens are text (their piece, possibly a
  // partial UTF-8 character); end-of-generation ids are EOS; every other token is special.
  explicit TokenVocab(const Tokenizer& tokenizer);
  TokenVocab(const TokenVocab&) = delete;
  TokenVocab& operator=(const TokenVocab&) = delete;

  // Points into this object: valid while it lives.
  const tsr_vocab_desc& desc() const { return desc_; }
  size_t mask_words() const { return TSR_MASK_WORDS(kinds_.size()); }

 private:
  std::vector<std::string> bytes_;
  std::vector<const char*> pointers_;
  std::vector<uint32_t> lens_;
  std::vector<uint8_t> kinds_;
  tsr_vocab_desc desc_{};
};

}  // namespace tsr
