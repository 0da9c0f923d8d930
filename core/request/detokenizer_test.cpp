#include "core/request/detokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/model/gguf.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// --- Reference decoder ---------------------------------------------------------------
// Derived from code point values instead of the byte-range table the implementation
// uses: after each byte the possible values of the character form a range, and the
// maximal subpart ends as soon as that range holds no Unicode scalar value of the
// sequence's length (Unicode 15 §3.9, U+FFFD substitution of maximal subparts).

void append_utf8(std::string& out, uint32_t cp) {
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

// Length a lead byte announces by its high bits alone; 0 for 10xxxxxx and 11111xxx.
size_t announced_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b < 0xC0) return 0;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  if (b < 0xF8) return 4;
  return 0;
}

// Whether some completion of `bits` (the first `have` of `length` bytes) is a scalar
// value that needs exactly `length` bytes.
bool can_complete(uint32_t bits, size_t have, size_t length) {
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  const int missing = 6 * static_cast<int>(length - have);
  const uint32_t lo = bits << missing;
  const uint32_t hi = lo | ((1u << missing) - 1);
  const bool all_surrogates = lo >= 0xD800 && hi <= 0xDFFF;
  return hi >= kMin[length] && lo <= 0x10FFFF && !all_surrogates;
}

struct Decoded {
  std::string text;
  size_t complete;  // where a final sequence starts that more bytes could still complete
};

Decoded reference_decode(std::string_view s) {
  Decoded out{"", s.size()};
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<uint8_t>(s[i]);
    const size_t length = announced_length(lead);
    uint32_t bits = length <= 1 ? lead : lead & (0x7F >> length);
    size_t have = 1;
    const bool ok = length > 0 && can_complete(bits, have, length);
    while (ok && have < length && i + have < s.size()) {
      const auto next = static_cast<uint8_t>(s[i + have]);
      const uint32_t more = bits << 6 | (next & 0x3F);
      if ((next & 0xC0) != 0x80 || !can_complete(more, have + 1, length)) break;
      bits = more;
      ++have;
    }
    if (ok && have == length) {
      append_utf8(out.text, bits);
    } else {
      out.text += kFffd;
      if (ok && i + have == s.size()) out.complete = i;
    }
    i += have;
  }
  return out;
}

bool is_valid_utf8(std::string_view s) { return reference_decode(s).text == s; }

TEST(ReferenceDecoder, AgreesWithPythonOnKnownCases) {
  // Expected values from Python's bytes.decode("utf-8", "replace").
  EXPECT_EQ(reference_decode("\xED\xA0\x80").text, kFffd + kFffd + kFffd);
  EXPECT_EQ(reference_decode("\xE0\x80\xAF").text, kFffd + kFffd + kFffd);
  EXPECT_EQ(reference_decode("\xF0\x9F\x98").text, kFffd);
  EXPECT_EQ(reference_decode("\xF4\x90\x80\x80").text, kFffd + kFffd + kFffd + kFffd);
  EXPECT_EQ(reference_decode(std::string("\xE2\x82") + "a").text, kFffd + "a");
  EXPECT_EQ(reference_decode("\xF0\x9F\x98\x80\xC3\xA9").text, "\xF0\x9F\x98\x80\xC3\xA9");
}

// --- A hand-made vocabulary ----------------------------------------------------------

constexpr int32_t kByte0 = 3;  // <0x00> .. <0xFF> are ids 3 .. 258, as in Llama-2

std::unique_ptr<Tokenizer> make_tokenizer() {
  Vocab v;
  v.model = "llama";
  auto add = [&v](std::string text, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(0);
    v.types.push_back(type);
  };
  add("<unk>", TokenType::UNKNOWN);
  add("<s>", TokenType::CONTROL);
  add("</s>", TokenType::CONTROL);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, TokenType::BYTE);
  }
  add("\u2581hello", TokenType::NORMAL);  // 259
  add("a", TokenType::NORMAL);            // 260
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.eog_ids = {2};
  return Tokenizer::create(std::move(v));
}

constexpr int32_t kHello = 259, kA = 260, kEos = 2;
constexpr int32_t byte_token(int b) { return kByte0 + b; }

class Detokenizer : public ::testing::Test {
 protected:
  using Out = std::vector<std::string>;

  // The result of each push, then that of flush.
  std::vector<std::string> stream(const std::vector<int32_t>& ids) {
    IncrementalDetokenizer detok(*tok_);
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(detok.push(id));
    out.push_back(detok.flush());
    return out;
  }
  std::unique_ptr<Tokenizer> tok_ = make_tokenizer();
};

TEST_F(Detokenizer, WholeTokensPassThrough) {
  EXPECT_EQ(stream({kHello, kA, kEos, kHello}), (Out{" hello", "a", "", " hello", ""}));
}

TEST_F(Detokenizer, TwoByteCharacterOverByteTokens) {
  EXPECT_EQ(stream({kA, byte_token(0xC3), byte_token(0xA9), kA}),
            (Out{"a", "", "\xC3\xA9", "a", ""}));
}

TEST_F(Detokenizer, ThreeByteCharacterOverByteTokens) {
  // U+2581, the SentencePiece space mark, as byte-fallback tokens.
  EXPECT_EQ(stream({byte_token(0xE2), byte_token(0x96), byte_token(0x81)}),
            (Out{"", "", "\xE2\x96\x81", ""}));
}

TEST_F(Detokenizer, EmojiOverFourByteTokens) {
  EXPECT_EQ(
      stream({byte_token(0xF0), byte_token(0x9F), byte_token(0x98), byte_token(0x80), kHello}),
      (Out{"", "", "", "\xF0\x9F\x98\x80", " hello", ""}));
}

TEST_F(Detokenizer, ControlTokensDoNotBreakACharacter) {
  EXPECT_EQ(stream({byte_token(0xC3), kEos, byte_token(0xA9)}), (Out{"", "", "\xC3\xA9", ""}));
}

TEST_F(Detokenizer, LoneContinuationByteIsReplacedAtOnce) {
  EXPECT_EQ(stream({kA, byte_token(0x80), kA}), (Out{"a", kFffd, "a", ""}));
}

TEST_F(Detokenizer, TruncatedSequenceFollowedByAscii) {
  // E2 82 is one maximal subpart: one U+FFFD, released when "a" shows it cannot finish.
  EXPECT_EQ(stream({byte_token(0xE2), byte_token(0x82), kA}), (Out{"", "", kFffd + "a", ""}));
}

TEST_F(Detokenizer, TruncatedSequenceFollowedByNewLead) {
  EXPECT_EQ(stream({byte_token(0xE2), byte_token(0xC3), byte_token(0xA9)}),
            (Out{"", kFffd, "\xC3\xA9", ""}));
}

TEST_F(Detokenizer, EncodedSurrogateIsThreeReplacements) {
  // ED A0 80 would be U+D800: ED allows only 80..9F next, so each byte is its own subpart.
  EXPECT_EQ(stream({byte_token(0xED), byte_token(0xA0), byte_token(0x80)}),
            (Out{"", kFffd + kFffd, kFffd, ""}));
}

TEST_F(Detokenizer, OverlongEncodingsAreReplacedPerByte) {
  EXPECT_EQ(stream({byte_token(0xC0), byte_token(0xAF)}), (Out{kFffd, kFffd, ""}));
  EXPECT_EQ(stream({byte_token(0xE0), byte_token(0x80), byte_token(0xAF)}),
            (Out{"", kFffd + kFffd, kFffd, ""}));
  EXPECT_EQ(stream({byte_token(0xF0), byte_token(0x8F), kA}), (Out{"", kFffd + kFffd, "a", ""}));
}

TEST_F(Detokenizer, BeyondU10FFFFIsReplaced) {
  EXPECT_EQ(stream({byte_token(0xF4), byte_token(0x90)}), (Out{"", kFffd + kFffd, ""}));
  EXPECT_EQ(stream({byte_token(0xF5), kA}), (Out{kFffd, "a", ""}));
  EXPECT_EQ(stream({byte_token(0xFF)}), (Out{kFffd, ""}));
}

TEST_F(Detokenizer, FlushReplacesAnIncompleteTail) {
  EXPECT_EQ(stream({kA, byte_token(0xF0), byte_token(0x9F), byte_token(0x98)}),
            (Out{"a", "", "", "", kFffd}));
  EXPECT_EQ(stream({}), (Out{""}));
}

TEST_F(Detokenizer, UsableAgainAfterFlush) {
  IncrementalDetokenizer detok(*tok_);
  EXPECT_EQ(detok.push(byte_token(0xC3)), "");
  EXPECT_EQ(detok.flush(), kFffd);
  EXPECT_EQ(detok.push(byte_token(0xA9)), kFffd);
  EXPECT_EQ(detok.flush(), "");
}

TEST_F(Detokenizer, RejectsIdsOutsideTheVocabulary) {
  IncrementalDetokenizer detok(*tok_);
  EXPECT_THROW(detok.push(261), Error);
}

TEST(Utf8, CompletePrefix) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("ab"), 2u);
  EXPECT_EQ(utf8_complete_prefix("a\xC3"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xF0\x9F\x98\x80"), 5u);
  // Already ill-formed: decided, nothing to wait for.
  EXPECT_EQ(utf8_complete_prefix("a\x80"), 2u);
  EXPECT_EQ(utf8_complete_prefix("a\xED\xA0"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xF5"), 2u);
}

// --- The Llama-2 vocabulary ----------------------------------------------------------

const char* const kLlama2 = "models/llama-2-tiny-random.gguf";

// Random ids, three quarters of them byte tokens (lead bytes, continuation bytes, any
// byte) so that multi-byte characters and broken ones are frequent; the rest anywhere in
// the vocabulary, control tokens included.
std::vector<int32_t> random_ids(const Tokenizer& tok, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> any(0, tok.n_tokens() - 1);
  std::uniform_int_distribution<int32_t> lead(0xC2, 0xF4);
  std::uniform_int_distribution<int32_t> continuation(0x80, 0xBF);
  std::uniform_int_distribution<int> kind(0, 3);
  std::vector<int32_t> ids;
  while (ids.size() < count) {
    const int k = kind(rng);
    if (k == 0) {
      ids.push_back(any(rng));
    } else {
      const int32_t byte = k == 1 ? lead(rng) : k == 2 ? continuation(rng) : any(rng) & 0xFF;
      ids.push_back(kByte0 + byte);
    }
  }
  return ids;
}

TEST(DetokenizerLlama2, StreamEqualsDecodingAllPiecesAtOnce) {
  TSR_REQUIRE_SHARED(kLlama2);
  const auto tok =
      Tokenizer::create(vocab_from_gguf(*GgufFile::open(testing::shared_path(kLlama2))));
  ASSERT_EQ(tok->token_to_piece(kByte0 + 0xE2), "\xE2");
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const std::vector<int32_t> ids = random_ids(*tok, 500, seed);
    IncrementalDetokenizer detok(*tok);
    std::string pieces, streamed;
    for (int32_t id : ids) {
      pieces += tok->token_to_piece(id);
      const std::string out = detok.push(id);
      ASSERT_TRUE(is_valid_utf8(out)) << "seed " << seed;
      streamed += out;
    }
    const std::string tail = detok.flush();
    ASSERT_TRUE(is_valid_utf8(tail));
    streamed += tail;
    EXPECT_EQ(streamed, reference_decode(pieces).text) << "seed " << seed;
    EXPECT_EQ(utf8_replace_invalid(pieces), reference_decode(pieces).text) << "seed " << seed;
  }
}

// All 4-byte strings over bytes from every class the lead-byte table distinguishes, and
// each of their prefixes.
TEST(Utf8, AgreesWithReferenceOnAllShortStrings) {
  const std::vector<uint8_t> interesting = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
                                            0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE,
                                            0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
  for (uint8_t a : interesting) {
    for (uint8_t b : interesting) {
      for (uint8_t c : interesting) {
        for (uint8_t d : interesting) {
          const std::string s{char(a), char(b), char(c), char(d)};
          for (size_t n = 0; n <= s.size(); ++n) {
            const std::string_view prefix = std::string_view(s).substr(0, n);
            const Decoded expected = reference_decode(prefix);
            ASSERT_EQ(utf8_replace_invalid(prefix), expected.text);
            ASSERT_EQ(utf8_complete_prefix(prefix), expected.complete);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tsr
