#include "core/tokenizer/bpe_tokenizer.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <queue>

#include "base/error.h"
#include "core/tokenizer/spm_tokenizer.h"

namespace tsr {
namespace {

// --- UTF-8 and GPT-2's byte alphabet --------------------------------------------------

constexpr uint32_t kReplacement = 0xFFFD;

// Decodes the code point at the start of `s` (non-empty) into `len` bytes. An invalid
// sequence is one byte of U+FFFD, as in llama.cpp, so no input is rejected.
uint32_t decode_utf8(std::string_view s, size_t& len) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = byte(0);
  len = 1;
  if (lead < 0x80) return lead;
  const size_t n = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
  if (n == 0 || lead > 0xF4 || s.size() < n) return kReplacement;
  uint32_t cp = lead & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return kReplacement;
    cp = cp << 6 | (byte(i) & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
  if (cp < kMin[n] || cp > 0x10FFFF || surrogate) return kReplacement;
  len = n;
  return cp;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others
// for U+0100 onwards in byte order, so every byte is one visible character.
struct ByteAlphabet {
  static constexpr uint32_t kMaxCp = 256 + 68;
  std::array<std::string, 256> text;       // UTF-8 of each byte's character
  std::array<int16_t, kMaxCp> byte_of{};   // inverse; -1 where no byte maps

  ByteAlphabet() {
    byte_of.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? b : next++;
      append_utf8(cp, text[b]);
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

// A token's text in the byte alphabet back to bytes; characters outside the alphabet
// (tokens a converter stored verbatim) are kept as they are.
std::string unspell(std::string_view text) {
  const ByteAlphabet& alphabet = byte_alphabet();
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0, len; pos < text.size(); pos += len) {
    const uint32_t cp = decode_utf8(text.substr(pos), len);
    const int byte = cp < ByteAlphabet::kMaxCp ? alphabet.byte_of[cp] : -1;
    if (byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      out.append(text.substr(pos, len));
    }
  }
  return out;
}

std::string spell(std::string_view bytes) {
  const ByteAlphabet& alphabet = byte_alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += alphabet.text[static_cast<uint8_t>(c)];
  return out;
}

// --- Pre-tokenizer regexes, matched by hand as llama.cpp's unicode.cpp does --------------

// The regexes only ask which of these a character is; \p{L}, \p{N} and \s (White_Space)
// are disjoint, and everything else (unassigned code points included) is "other".
enum CharClass : uint8_t { kEnd = 0, kLetter = 1, kNumber = 2, kSpace = 4, kOther = 8 };

CharClass classify(uint32_t cp) {
  if (u_isUWhiteSpace(static_cast<UChar32>(cp))) return kSpace;
  const uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(cp));
  if (mask & U_GC_L_MASK) return kLetter;
  if (mask & U_GC_N_MASK) return kNumber;
  return kOther;
}

bool is_cr_or_lf(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// Characters are decoded as the matchers reach them (each looks only as far ahead as its
// regex does), so a caller that stops after a few words never decodes the rest of a long
// text.
class Splitter {
 public:
  explicit Splitter(std::string_view text) : text_(text) {}

  // Calls visit(word) for each word in order while it returns true.
  template <class Visit>
  void run(BpePre pre, Visit&& visit) const {
    for (size_t pos = 0, end; has(pos); pos = end) {
      end = pre == BpePre::GPT2    ? match_gpt2(pos)
            : pre == BpePre::GPT4O ? match_gpt4o(pos)
                                   : match_llama3(pos, pre == BpePre::LLAMA3 ? 3 : 1);
      if (!visit(text_.substr(offset(pos), offset(end) - offset(pos)))) return;
    }
  }

 private:
  struct Char {
    uint32_t cp;
    size_t offset;
    CharClass cls;
  };

  // Whether character i exists, decoding up to it.
  bool has(size_t i) const {
    while (chars_.size() <= i && decoded_ < text_.size()) {
      size_t len = 0;
      const uint32_t c = decode_utf8(text_.substr(decoded_), len);
      chars_.push_back({c, decoded_, classify(c)});
      decoded_ += len;
    }
    return i < chars_.size();
  }
  // Past the end a character is kEnd with a code point no branch looks for.
  uint32_t cp(size_t i) const { return has(i) ? chars_[i].cp : 0xFFFFFFFF; }
  bool is(size_t i, uint8_t classes) const { return has(i) && (chars_[i].cls & classes) != 0; }
  size_t offset(size_t i) const { return has(i) ? chars_[i].offset : text_.size(); }
  size_t run_of(size_t i, CharClass cls) const {
    while (is(i, cls)) ++i;
    return i;
  }

  // 's|'t|'re|'ve|'m|'ll|'d; Llama 3 ignores ASCII case (only ASCII, as the JavaScript
  // and llama.cpp ports do). Returns the end of the match, or 0 for none.
  size_t contraction(size_t pos, bool any_case) const {
    if (cp(pos) != '\'') return 0;
    const auto lower = [&](size_t i) {
      const uint32_t c = cp(i);
      return any_case && c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
    };
    const uint32_t a = lower(pos + 1), b = lower(pos + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    const bool two = (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l');
    return two ? pos + 3 : 0;
  }

  // \s+(?!\S)|\s+ at a white-space character: a run followed by text leaves its last
  // character to start the next word.
  size_t whitespace(size_t pos) const {
    const size_t end = run_of(pos, kSpace);
    return end - pos > 1 && has(end) ? end - 1 : end;
  }

  size_t match_gpt2(size_t pos) const {
    if (const size_t end = contraction(pos, false)) return end;
    // ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+'
    const size_t start = pos + (cp(pos) == ' ' ? 1 : 0);
    for (CharClass cls : {kLetter, kNumber, kOther}) {
      if (is(start, cls)) return run_of(start, cls);
    }
    return whitespace(pos);
  }

  size_t match_llama3(size_t pos, size_t max_digits) const {
    if (const size_t end = contraction(pos, true)) return end;
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (const size_t start = word_start(pos); is(start, kLetter)) return run_of(start, kLetter);
    return match_tail(pos, max_digits, false);
  }

  // o200k as llama.cpp splits it (LLAMA_VOCAB_PRE_TYPE_GPT4O): the tokenizer.json regex
  //   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?
  //   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?
  //   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
  // with llama.cpp's rewrite of the cased classes, which its std::regex runs on text whose
  // non-ASCII letters are one collapsed character: "upper" is a letter other than a-z,
  // "lower" a letter other than A-Z (so a non-ASCII letter is both, and marks are neither).
  size_t match_gpt4o(size_t pos) const {
    if (const size_t start = word_start(pos); is(start, kLetter)) {
      const size_t end = cased_word(start);
      const size_t with = contraction(end, true);
      return with != 0 ? with : end;
    }
    return match_tail(pos, 3, true);
  }

  // Where a word starting at pos has its letters: pos itself, or after one character that
  // is no line break, letter or number (the optional [^\r\n\p{L}\p{N}] prefix).
  size_t word_start(size_t pos) const {
    if (is(pos, kLetter)) return pos;
    return !is_cr_or_lf(cp(pos)) && !is(pos, kNumber) && is(pos + 1, kLetter) ? pos + 1 : pos;
  }

  // The end of `upper* lower+`, or failing that `upper+ lower*`, from a letter, as a
  // backtracking regex engine finds it: the greedy upper run gives back characters until
  // a lower one follows, then the lower run is as long as it goes.
  size_t cased_word(size_t start) const {
    const auto upper = [&](size_t i) { return is(i, kLetter) && !(cp(i) >= 'a' && cp(i) <= 'z'); };
    const auto lower = [&](size_t i) { return is(i, kLetter) && !(cp(i) >= 'A' && cp(i) <= 'Z'); };
    size_t upper_end = start;
    while (upper(upper_end)) ++upper_end;
    for (size_t k = upper_end;; --k) {
      if (lower(k)) {
        while (lower(k)) ++k;
        return k;
      }
      if (k == start) break;
    }
    return upper_end;  // the lower run after it is empty, or the first branch had matched
  }

  // The alternatives after the words, shared by the Llama 3 family and o200k: numbers of up
  // to max_digits, ' ?[^\s\p{L}\p{N}]+' followed by line breaks (o200k: and slashes), and
  // white space.
  size_t match_tail(size_t pos, size_t max_digits, bool slashes) const {
    if (is(pos, kNumber)) {
      size_t end = pos + 1;
      while (end - pos < max_digits && is(end, kNumber)) ++end;
      return end;
    }
    const size_t start = pos + (cp(pos) == ' ' ? 1 : 0);
    if (is(start, kOther)) {
      size_t end = run_of(start, kOther);
      while (is_cr_or_lf(cp(end)) || (slashes && cp(end) == '/')) ++end;
      return end;
    }
    // \s*[\r\n]+: the run up to its last line break
    size_t last_break_end = 0;
    for (size_t i = pos; is(i, kSpace); ++i) {
      if (is_cr_or_lf(cp(i))) last_break_end = i + 1;
    }
    return last_break_end > 0 ? last_break_end : whitespace(pos);
  }

  std::string_view text_;
  mutable std::vector<Char> chars_;  // decoded so far
  mutable size_t decoded_ = 0;       // bytes of text_ they cover
};

// --- BPE merging --------------------------------------------------------------------

using MergeMap = std::unordered_map<uint64_t, BpeTokenizer::Merge>;

uint64_t pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}

// One byte of the word, or the token its merges made; a linked list that shrinks.
struct Symbol {
  int32_t id;  // -1: a byte without a token, which never merges
  int prev, next;
  bool merged_away = false;
};

struct Candidate {
  int32_t rank;
  int left, right;
  int32_t left_id, right_id;  // to notice entries made stale by other merges
  int32_t result;
};

// Lowest rank first; on ties the leftmost pair, as llama.cpp's llm_bigram_bpe.
struct CandidateOrder {
  bool operator()(const Candidate& l, const Candidate& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

class Merger {
 public:
  Merger(std::vector<Symbol> symbols, const MergeMap& merges)
      : symbols_(std::move(symbols)), merges_(merges) {}

  void run(std::vector<int32_t>& ids) {
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add(i - 1, i);
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      apply(c);
    }
    for (int i = 0; i != -1; i = symbols_[i].next) ids.push_back(symbols_[i].id);
  }

 private:
  void try_add(int left, int right) {
    if (left == -1 || right == -1) return;
    const int32_t l = symbols_[left].id, r = symbols_[right].id;
    if (l < 0 || r < 0) return;
    const auto it = merges_.find(pair_key(l, r));
    if (it == merges_.end()) return;
    queue_.push({it->second.rank, left, right, l, r, it->second.result});
  }

  void apply(const Candidate& c) {
    Symbol& l = symbols_[c.left];
    Symbol& r = symbols_[c.right];
    const bool stale = l.merged_away || r.merged_away || l.next != c.right ||
                       l.id != c.left_id || r.id != c.right_id;
    if (stale) return;
    l.id = c.result;
    l.next = r.next;
    r.merged_away = true;
    if (r.next >= 0) symbols_[r.next].prev = c.left;
    try_add(l.prev, c.left);
    try_add(c.left, l.next);
  }

  std::vector<Symbol> symbols_;
  const MergeMap& merges_;
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue_;
};

bool is_llama3_name(std::string_view pre) {
  return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3";
}

}  // namespace

BpePre bpe_pre_from_name(std::string_view pre) {
  if (is_llama3_name(pre)) return BpePre::LLAMA3;
  if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "megrez") return BpePre::QWEN2;
  if (pre == "gpt-4o" || pre == "llama4") return BpePre::GPT4O;
  static constexpr std::string_view kGpt2[] = {"",      "default", "gpt-2",      "phi-2",
                                               "jina-es", "jina-de", "jina-v2-es", "jina-v2-de"};
  if (std::find(std::begin(kGpt2), std::end(kGpt2), pre) != std::end(kGpt2)) return BpePre::GPT2;
  throw Error("tokenizer: BPE pre-tokenizer '" + std::string(pre) +
                  "' (tokenizer.ggml.pre) is not supported; known: gpt-2, llama-bpe, qwen2, gpt-4o",
              TSR_STATUS_UNSUPPORTED);
}

bool bpe_pre_adds_bos(std::string_view pre) { return is_llama3_name(pre); }

std::vector<std::string_view> bpe_pre_split(BpePre pre, std::string_view text) {
  std::vector<std::string_view> words;
  Splitter(text).run(pre, [&words](std::string_view w) {
    words.push_back(w);
    return true;
  });
  return words;
}

BpeTokenizer::BpeTokenizer(Vocab vocab)
    : Tokenizer(std::move(vocab)),
      pre_(bpe_pre_from_name(vocab_.pre)),
      // llama.cpp and Hugging Face's Llama 3 tokenizer.json (ignore_merges) both do this.
      ignore_merges_(pre_ == BpePre::LLAMA3) {
  const auto& tokens = vocab_.tokens;
  text_to_id_.reserve(tokens.size());
  // Later duplicates win, as in llama.cpp's token_to_id.
  for (size_t i = 0; i < tokens.size(); ++i) text_to_id_[tokens[i]] = static_cast<int32_t>(i);
  init_byte_ids();
  init_merges();
  init_pieces();
  special_ids_ = special_token_ids(vocab_);
}

void BpeTokenizer::init_byte_ids() {
  const ByteAlphabet& alphabet = byte_alphabet();
  for (int b = 0; b < 256; ++b) byte_ids_[b] = find_token(alphabet.text[b]);
}

// Merges are "left right" in rank order. Hugging Face refuses a merge whose parts or
// result are not tokens; so does this, since merging by id needs all three.
void BpeTokenizer::init_merges() {
  const auto& merges = vocab_.merges;
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    // From 1: a left part that is itself a space (non-byte-level vocabularies) stays whole.
    const size_t space = m.find(' ', 1);
    const std::string_view left = std::string_view(m).substr(0, space);
    const std::string_view right =
        space == std::string::npos ? std::string_view() : std::string_view(m).substr(space + 1);
    const int32_t l = find_token(left), r = find_token(right);
    const int32_t result = find_token(std::string(left) + std::string(right));
    if (space == std::string::npos || l < 0 || r < 0 || result < 0) {
      throw Error("tokenizer: merge " + std::to_string(rank) + " '" + m +
                  "' does not join two tokens into a token of the vocabulary");
    }
    // The first (lowest-rank) occurrence of a pair is the one that applies.
    merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), result});
  }
}

void BpeTokenizer::init_pieces() {
  const auto& tokens = vocab_.tokens;
  pieces_.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    switch (vocab_.types[i]) {
      case TokenType::NORMAL:
      case TokenType::BYTE: pieces_[i] = unspell(tokens[i]); break;
      // Added tokens are stored as the text they stand for, not in the byte alphabet.
      case TokenType::USER_DEFINED: pieces_[i] = tokens[i]; break;
      default: break;  // control, unknown, unused: print nothing
    }
  }
}

int32_t BpeTokenizer::find_token(std::string_view text) const {
  const auto it = text_to_id_.find(text);
  return it == text_to_id_.end() ? -1 : it->second;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special, bool parse_special,
                                          size_t max_tokens) const {
  std::vector<int32_t> out;
  out.reserve(std::min(text.size() / 3, max_tokens) + 2);
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos_id);
  for (const TextFragment& f : split_special(vocab_, special_ids_, text, parse_special)) {
    if (out.size() > max_tokens) return out;
    if (f.token >= 0) {
      out.push_back(f.token);
    } else if (vocab_.add_space_prefix && !f.text.starts_with(' ')) {
      // Hugging Face's ByteLevel add_prefix_space, applied to each text segment.
      std::string prefixed(1, ' ');
      prefixed.append(f.text);
      tokenize_fragment(prefixed, out, max_tokens);
    } else {
      tokenize_fragment(f.text, out, max_tokens);
    }
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos_id);
  return out;
}

void BpeTokenizer::tokenize_fragment(std::string_view text, std::vector<int32_t>& out, size_t max_tokens) const {
  Splitter(text).run(pre_, [&](std::string_view word) {
    tokenize_word(word, out);
    return out.size() <= max_tokens;
  });
}

void BpeTokenizer::tokenize_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    const int32_t whole = find_token(spell(word));
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  const int n = static_cast<int>(word.size());
  std::vector<Symbol> symbols(word.size());
  for (int i = 0; i < n; ++i) {
    const uint8_t byte = static_cast<uint8_t>(word[i]);
    if (byte_ids_[byte] < 0 && vocab_.unk_id < 0) {
      throw Error("tokenizer: byte " + std::to_string(byte) +
                  " has no token and there is no unknown token");
    }
    symbols[i] = {byte_ids_[byte], i - 1, i + 1 < n ? i + 1 : -1};
  }
  const size_t first = out.size();
  Merger(std::move(symbols), merges_).run(out);
  // A byte without a token stayed alone; it becomes <unk>.
  std::replace(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), -1, vocab_.unk_id);
}

}  // namespace tsr
