#include "core/tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <queue>
#include <string>

#include "base/error.h"

namespace tsr {
namespace {

// SentencePiece spells a space as U+2581 LOWER ONE EIGHTH BLOCK.
constexpr std::string_view kSpaceMark = "\xE2\x96\x81";

using TextMap = std::unordered_map<std::string_view, int32_t>;

// UTF-8 sequence length from the lead byte alone, as llama.cpp's unicode_len_utf8:
// invalid bytes count as one-byte characters, so no input is rejected.
size_t utf8_len(char lead) {
  static constexpr size_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(lead) >> 4];
}

std::string escape_whitespace(std::string_view text, bool space_prefix) {
  std::string out;
  out.reserve(text.size() + text.size() / 4 + 3);
  if (space_prefix) out += kSpaceMark;
  for (char c : text) {
    if (c == ' ') {
      out += kSpaceMark;
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.substr(pos, kSpaceMark.size()) == kSpaceMark) {
      out += ' ';
      pos += kSpaceMark.size();
    } else {
      out += text[pos++];
    }
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte a BYTE token "<0xXX>" stands for.
std::string byte_of_token(const std::string& text, int32_t id) {
  const bool shaped = text.size() == 6 && text.starts_with("<0x") && text.back() == '>';
  const int hi = shaped ? hex_digit(text[3]) : -1;
  const int lo = shaped ? hex_digit(text[4]) : -1;
  if (hi < 0 || lo < 0) {
    throw Error("tokenizer: byte token " + std::to_string(id) + " is '" + text +
                "', not of the form <0xXX>");
  }
  return std::string(1, static_cast<char>(hi * 16 + lo));
}

// A run of the text; symbols form a linked list that shrinks as neighbours merge.
struct Symbol {
  size_t offset;
  size_t n;  // 0 once merged into its left neighbour
  int prev, next;
};

struct Bigram {
  float score;
  int left, right;
  size_t size;  // bytes of the merged text, to detect entries made stale by other merges
};

// Highest score first; on ties the leftmost pair, as llama.cpp's llm_bigram_spm.
struct BigramOrder {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

// llama.cpp's llm_tokenizer_spm_session: repeatedly merges the adjacent pair whose
// concatenation is the best-scoring vocabulary token.
class BigramMerger {
 public:
  BigramMerger(std::string_view text, const TextMap& ids, const std::vector<float>& scores)
      : text_(text), ids_(ids), scores_(scores) {
    split_chars();
  }

  // The texts of the symbols left when no adjacent pair spells a token, in order.
  std::vector<std::string_view> run() {
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      merge(b);
    }
    std::vector<std::string_view> out;
    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) {
      out.push_back(text_.substr(symbols_[i].offset, symbols_[i].n));
    }
    return out;
  }

 private:
  void split_chars() {
    for (size_t off = 0; off < text_.size();) {
      const size_t n = std::min(utf8_len(text_[off]), text_.size() - off);
      const int index = static_cast<int>(symbols_.size());
      symbols_.push_back({off, n, index - 1, off + n == text_.size() ? -1 : index + 1});
      off += n;
    }
  }

  void try_add(int left, int right) {
    if (left == -1 || right == -1) return;
    const Symbol& l = symbols_[left];
    const std::string_view pair = text_.substr(l.offset, l.n + symbols_[right].n);
    const auto it = ids_.find(pair);
    if (it == ids_.end()) return;
    const float score = scores_.empty() ? 0.0f : scores_[it->second];
    queue_.push({score, left, right, pair.size()});
  }

  void merge(const Bigram& b) {
    Symbol& l = symbols_[b.left];
    Symbol& r = symbols_[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) return;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols_[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  std::string_view text_;
  const TextMap& ids_;
  const std::vector<float>& scores_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

}  // namespace

SpmTokenizer::SpmTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {
  const auto& tokens = vocab_.tokens;
  text_to_id_.reserve(tokens.size());
  // Later duplicates win, as in llama.cpp's token_to_id.
  for (size_t i = 0; i < tokens.size(); ++i) text_to_id_[tokens[i]] = static_cast<int32_t>(i);
  init_byte_ids();
  init_pieces();
  special_ids_ = special_token_ids(vocab_);
}

// As llama.cpp's byte_to_token: <0xXX>, else the byte itself as a token; <unk> when
// neither exists (llama.cpp would abort).
void SpmTokenizer::init_byte_ids() {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    const char raw = static_cast<char>(b);
    int32_t id = find_token(hex);
    if (id < 0) id = find_token(std::string_view(&raw, 1));
    byte_ids_[b] = id >= 0 ? id : vocab_.unk_id;
  }
}

void SpmTokenizer::init_pieces() {
  const auto& tokens = vocab_.tokens;
  pieces_.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& text = tokens[i];
    switch (vocab_.types[i]) {
      case TokenType::NORMAL: pieces_[i] = unescape_whitespace(text); break;
      case TokenType::BYTE: pieces_[i] = byte_of_token(text, static_cast<int32_t>(i)); break;
      case TokenType::USER_DEFINED: pieces_[i] = text; break;
      default: break;  // control, unknown, unused: print nothing
    }
  }
}

int32_t SpmTokenizer::find_token(std::string_view text) const {
  const auto it = text_to_id_.find(text);
  return it == text_to_id_.end() ? -1 : it->second;
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_special, bool parse_special,
                                          size_t max_tokens) const {
  std::vector<int32_t> out;
  out.reserve(std::min(text.size() / 3, max_tokens) + 2);
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos_id);
  // Like llama.cpp, the space prefix goes before the text and after every special token.
  bool after_special = true;
  for (const TextFragment& f : split_special(vocab_, special_ids_, text, parse_special)) {
    if (out.size() > max_tokens) return out;
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    tokenize_fragment(escape_whitespace(f.text, vocab_.add_space_prefix && after_special), out);
    after_special = false;
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos_id);
  return out;
}

void SpmTokenizer::tokenize_fragment(std::string_view escaped, std::vector<int32_t>& out) const {
  BigramMerger merger(escaped, text_to_id_, vocab_.scores);
  for (std::string_view symbol : merger.run()) {
    // Merged symbols are tokens by construction; only single characters can be missing.
    const int32_t id = find_token(symbol);
    if (id >= 0) {
      out.push_back(id);
    } else {
      append_bytes(symbol, out);
    }
  }
}

void SpmTokenizer::append_bytes(std::string_view text, std::vector<int32_t>& out) const {
  for (char c : text) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0) {
      throw Error("tokenizer: no byte token for byte " +
                  std::to_string(static_cast<uint8_t>(c)) + " and no unknown token");
    }
    out.push_back(id);
  }
}

}  // namespace tsr
