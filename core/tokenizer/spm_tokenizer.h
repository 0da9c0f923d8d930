// SentencePiece BPE (tokenizer.ggml.model = "llama"), as llama.cpp's llm_tokenizer_spm,
// plus the special-token splitting every tokenizer model shares. Internal to the core.
#pragma once

#include <array>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace tsr {

// A piece of the input after special-token splitting: raw text, or a token the text
// spelled (token >= 0, text empty).
struct TextFragment {
  std::string_view text;
  int32_t token = -1;
};

// Ids of the tokens that are matched in the text before tokenization (control,
// user-defined, unknown), longest text first, as llama.cpp's cache_special_tokens.
std::vector<int32_t> special_token_ids(const Vocab& vocab);

// Splits `text` at the tokens of `special_ids` like llama.cpp's tokenizer_st_partition:
// each token in turn (longest first) cuts every remaining raw fragment at all its
// occurrences. Without parse_special only user-defined tokens are matched.
std::vector<TextFragment> split_special(const Vocab& vocab,
                                        const std::vector<int32_t>& special_ids,
                                        std::string_view text, bool parse_special);

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab vocab);
  // The text map points into vocab_: copying would leave it dangling.
  SpmTokenizer(const SpmTokenizer&) = delete;
  SpmTokenizer& operator=(const SpmTokenizer&) = delete;

  using Tokenizer::encode;
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              size_t max_tokens) const override;

 private:
  void init_byte_ids();
  void init_pieces();
  int32_t find_token(std::string_view text) const;
  void tokenize_fragment(std::string_view escaped, std::vector<int32_t>& out) const;
  void append_bytes(std::string_view text, std::vector<int32_t>& out) const;

  std::unordered_map<std::string_view, int32_t> text_to_id_;
  std::array<int32_t, 256> byte_ids_{};   // byte fallback token per byte value
  std::vector<int32_t> special_ids_;
};

}  // namespace tsr
