// Streaming token -> text conversion. A token may stand for part of a UTF-8 character
// (byte-fallback tokens such as <0xE2>), so text is released only in whole characters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/tokenizer/tokenizer.h"

namespace tsr {

// Length of the longest prefix of `bytes` that does not end inside an incomplete UTF-8
// sequence which later bytes could still complete. Bytes that can never become valid
// UTF-8 do not shorten the prefix: they are decided already.
size_t utf8_complete_prefix(std::string_view bytes);

// `bytes` as valid UTF-8: each maximal subpart of an ill-formed sequence becomes one
// U+FFFD (Unicode 15 §3.9; what Python's bytes.decode("utf-8", "replace") does).
std::string utf8_replace_invalid(std::string_view bytes);

// Converts one request's generated tokens to text as they arrive. The concatenation of
// all push() results and flush() equals utf8_replace_invalid(all pieces concatenated),
// and every result is valid UTF-8. Holds a reference: the tokenizer must outlive it.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The text completed by `token`; an incomplete trailing character is held back.
  // Throws tsr::Error for ids outside the vocabulary.
  std::string push(int32_t token);

  // Releases what is held back, which can no longer be completed: U+FFFD.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // at most 3 bytes: the start of a character still arriving
};

}  // namespace tsr
