// Text <-> token ids. Created from a Vocab; immutable and thread-safe afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/vocab.h"

namespace tsr {

class Tokenizer {
 public:
  // Throws tsr::Error when the vocabulary's model is not supported.
  static std::unique_ptr<Tokenizer> create(Vocab vocab);
  virtual ~Tokenizer() = default;

  // add_special: add BOS (and EOS) as the vocabulary's flags say.
  // parse_special: text that spells a control/unknown token becomes that token;
  // otherwise such text is tokenized as plain text. Text spelling a user-defined token
  // always becomes that token, as in llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const {
    return encode(text, add_special, parse_special, SIZE_MAX);
  }
  // The same, stopping once the ids outnumber `max_tokens`: a text too long for a context is
  // known after tokenizing about a context's worth of it, not all of it (the result then
  // holds more than max_tokens ids, and is not the text's whole tokenization). Byte-level
  // BPE stops after any pre-tokenized word; SentencePiece merges a text between special
  // tokens as a whole, as llama.cpp does, so it stops only between those.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                                      size_t max_tokens) const = 0;

  // The bytes a token stands for when it follows other text: control tokens give ""
  // (unless render_special), byte tokens <0xXX> their byte, "▁" becomes a space.
  // Bytes may be an incomplete UTF-8 sequence.
  std::string token_to_piece(int32_t id, bool render_special = false) const;

  // Concatenated pieces; with strip_leading_space the space that encode() added in front
  // of the text (add_space_prefix) is removed again, so decode(encode(x)) == x.
  std::string decode(std::span<const int32_t> ids, bool strip_leading_space = true,
                     bool render_special = false) const;

  const Vocab& vocab() const { return vocab_; }
  int32_t n_tokens() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  bool is_eog(int32_t id) const;
  // The most bytes of text one token can stand for (the longest token text or piece, and
  // at least one UTF-8 character), so that a text of n bytes gives at least
  // n / max_token_bytes() tokens: a server can refuse a text too long for its context
  // without tokenizing it.
  size_t max_token_bytes() const { return max_token_bytes_; }

 protected:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  Vocab vocab_;
  std::vector<std::string> pieces_;  // each token's bytes without render_special; set by subclasses

 private:
  size_t max_token_bytes_ = 4;  // set by create() once the subclass has its pieces
};

}  // namespace tsr
