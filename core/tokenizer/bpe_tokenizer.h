// Byte-level BPE (tokenizer.ggml.model = "gpt2"), as llama.cpp's llm_tokenizer_bpe and
// Hugging Face's ByteLevel + BPE: the text is cut into words by the pre-tokenizer's
// regex, each word's bytes are spelled with GPT-2's byte-to-unicode alphabet, and
// adjacent symbols are merged by merge rank. Internal to the core.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace tsr {

// The pre-tokenizer regexes llama.cpp knows by tokenizer.ggml.pre.
enum class BpePre {
  GPT2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  LLAMA3,  // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
  QWEN2,   // as LLAMA3 with \p{N} one digit at a time
  GPT4O,   // o200k (gpt-oss, GPT-4o): cased words with a trailing contraction, \p{N}{1,3}, ...
};

// Maps tokenizer.ggml.pre to its regex; "" (absent) and "default" get GPT-2's.
// Throws tsr::Error naming an unknown name, as llama.cpp refuses to guess.
BpePre bpe_pre_from_name(std::string_view pre);

// Whether llama.cpp adds BOS for this pre-tokenizer when the GGUF file does not say.
bool bpe_pre_adds_bos(std::string_view pre);

// The words `text` splits into (views into `text`), concatenating to `text`.
std::vector<std::string_view> bpe_pre_split(BpePre pre, std::string_view text);

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(Vocab vocab);
  // The text map points into vocab_: copying would leave it dangling.
  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  using Tokenizer::encode;
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              size_t max_tokens) const override;

  // A merge of two adjacent symbols: its rank (lower merges first) and resulting token.
  struct Merge {
    int32_t rank;
    int32_t result;
  };

 private:
  void init_byte_ids();
  void init_merges();
  void init_pieces();
  int32_t find_token(std::string_view text) const;
  // Stops after the word that takes `out` past max_tokens.
  void tokenize_fragment(std::string_view text, std::vector<int32_t>& out, size_t max_tokens) const;
  void tokenize_word(std::string_view word, std::vector<int32_t>& out) const;

  BpePre pre_;
  bool ignore_merges_;  // a word that is a token as a whole is that token (Llama 3)
  std::unordered_map<std::string_view, int32_t> text_to_id_;
  std::unordered_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
  std::array<int32_t, 256> byte_ids_{};          // token of each byte's one-character text
  std::vector<int32_t> special_ids_;
};

}  // namespace tsr
