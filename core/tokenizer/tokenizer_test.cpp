#include "core/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"

namespace tsr {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;

const std::string kShared = TESSERA_SHARED_DIR;
const std::string kLlama2 = kShared + "/models/llama-2-tiny-random.gguf";
const std::string kStories = kShared + "/models/stories260K.gguf";

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> rows;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  return rows;
}

// One tokenizer per model file for the whole run: building the 32000-token maps under
// the sanitizers is not free.
const Tokenizer& tokenizer_for(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& tok = cache[path];
  if (!tok) tok = Tokenizer::create(vocab_from_gguf(*GgufFile::open(path)));
  return *tok;
}

#define REQUIRE_FILE(path)                                                           \
  do {                                                                               \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "test data absent: " << (path); \
  } while (0)

// --- Reference data produced by llama.cpp -------------------------------------------

TEST(TokenizerReference, TinyRandomPrompts) {
  const std::string ref = kShared + "/models/reference/tiny-random.tok.jsonl";
  REQUIRE_FILE(kLlama2);
  REQUIRE_FILE(ref);
  const Tokenizer& tok = tokenizer_for(kLlama2);
  const auto rows = read_jsonl(ref);
  ASSERT_EQ(rows.size(), 16u);
  for (const json& row : rows) {
    const std::string text = row["prompt"];
    const Ids ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
    EXPECT_EQ(ids, row["prompt_ids"].get<Ids>()) << text;
    EXPECT_EQ(tok.decode(ids), text);
    EXPECT_EQ(tok.decode(tok.encode(text, false, false)), text);
  }
}

TEST(TokenizerReference, Stories260K) {
  const std::string ref = kShared + "/models/reference/stories260K.ref.jsonl";
  REQUIRE_FILE(kStories);
  REQUIRE_FILE(ref);
  const Tokenizer& tok = tokenizer_for(kStories);
  const auto rows = read_jsonl(ref);
  ASSERT_EQ(rows.size(), 5u);
  for (const json& row : rows) {
    const std::string prompt = row["prompt"];
    EXPECT_EQ(tok.encode(prompt, true, false), row["prompt_ids"].get<Ids>()) << prompt;
    const Ids greedy = row["greedy_ids"].get<Ids>();
    std::string pieces;
    for (int32_t id : greedy) pieces += tok.token_to_piece(id);
    EXPECT_EQ(pieces, row["greedy_text"].get<std::string>()) << prompt;
    EXPECT_EQ(tok.decode(greedy, /*strip_leading_space=*/false), pieces);
  }
}

TEST(TokenizerReference, LlamaSpmVectors) {
  const std::string ref = kShared + "/tokenizers/vectors.jsonl";
  REQUIRE_FILE(kLlama2);
  REQUIRE_FILE(ref);
  const Tokenizer& tok = tokenizer_for(kLlama2);
  const auto rows = read_jsonl(ref);
  ASSERT_EQ(rows.size(), 44u);
  // Only the SentencePiece ids: `llama_bpe` belongs to the byte-level BPE tokenizer.
  for (const json& row : rows) {
    const std::string text = row["text"];
    const Ids ids = tok.encode(text, false, false);
    EXPECT_EQ(ids, row["llama_spm"].get<Ids>()) << text;
    EXPECT_EQ(tok.decode(ids), text);
  }
}

TEST(TokenizerReference, MultilingualParagraphs) {
  const std::string ref = kShared + "/tokenizers/multilingual.jsonl";
  REQUIRE_FILE(kLlama2);
  REQUIRE_FILE(ref);
  const Tokenizer& tok = tokenizer_for(kLlama2);
  const auto rows = read_jsonl(ref);
  ASSERT_EQ(rows.size(), 458u);
  for (const json& row : rows) {
    const std::string text = row["text"];
    const Ids ids = tok.encode(text, false, false);
    EXPECT_EQ(ids, row["llama_spm"].get<Ids>()) << text.substr(0, 80);
    EXPECT_EQ(tok.decode(ids), text) << text.substr(0, 80);
  }
}

// The whole multilingual file as one text: round trip on 150 KB (speed is measured by
// bench/, not here).
TEST(TokenizerReference, LongTextRoundTrips) {
  const std::string ref = kShared + "/tokenizers/multilingual.jsonl";
  REQUIRE_FILE(kLlama2);
  REQUIRE_FILE(ref);
  const Tokenizer& tok = tokenizer_for(kLlama2);
  std::string text;
  for (const json& row : read_jsonl(ref)) text += row["text"].get<std::string>() + "\n";
  ASSERT_GT(text.size(), 150'000u);
  const Ids ids = tok.encode(text, false, false);
  EXPECT_EQ(tok.decode(ids), text);
}

// --- Behaviour on the Llama-2 vocabulary ---------------------------------------------

class Llama2Tokenizer : public ::testing::Test {
 protected:
  void SetUp() override { REQUIRE_FILE(kLlama2); }
  const Tokenizer& tok() { return tokenizer_for(kLlama2); }
};

TEST_F(Llama2Tokenizer, VocabularyFromGguf) {
  const Vocab& v = tok().vocab();
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.tokens.size(), 32000u);
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(v.pad_id, -1);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_TRUE(v.add_space_prefix);
  EXPECT_EQ(v.eog_ids, Ids{2});
  EXPECT_TRUE(tok().is_eog(2));
  EXPECT_FALSE(tok().is_eog(1));
}

TEST_F(Llama2Tokenizer, EmptyText) {
  EXPECT_EQ(tok().encode("", true, false), Ids{1});
  EXPECT_EQ(tok().encode("", false, false), Ids{});
  EXPECT_EQ(tok().decode(Ids{}), "");
  EXPECT_EQ(tok().decode(Ids{1}), "");
}

TEST_F(Llama2Tokenizer, OnlySpaces) {
  // "▁▁" (259) and "▁▁▁▁" (268): the prefix space joins the text's spaces.
  EXPECT_EQ(tok().encode(" ", false, false), Ids{259});
  EXPECT_EQ(tok().encode("   ", false, false), Ids{268});
  EXPECT_EQ(tok().decode(Ids{268}), "   ");
  EXPECT_EQ(tok().decode(Ids{268}, /*strip_leading_space=*/false), "    ");
}

TEST_F(Llama2Tokenizer, ByteFallback) {
  // U+0001 has no token of its own: "▁" then <0x01> (id 3 + byte).
  EXPECT_EQ(tok().encode("\x01", false, false), (Ids{29871, 4}));
  EXPECT_EQ(tok().token_to_piece(4), "\x01");
  EXPECT_EQ(tok().token_to_piece(3 + 0xF0), "\xF0");
  EXPECT_EQ(tok().decode(Ids{29871, 4}), "\x01");
}

TEST_F(Llama2Tokenizer, InvalidUtf8BecomesByteTokens) {
  // 0xFF/0xFE are never UTF-8, 0x80 is a lone continuation byte, "\xE2\x96" is cut short.
  EXPECT_EQ(tok().encode("\xFF\xFE", false, false), (Ids{29871, 3 + 0xFF, 3 + 0xFE}));
  EXPECT_EQ(tok().encode("\x80", false, false), (Ids{29871, 3 + 0x80}));
  EXPECT_EQ(tok().encode("a\xE2", false, false), (Ids{263, 3 + 0xE2}));
  EXPECT_EQ(tok().encode("a\xE2\x96", false, false), (Ids{263, 3 + 0xE2, 3 + 0x96}));
  for (std::string text : {"\xFF\xFE", "\x80", "a\xE2", "a\xE2\x96", "\xC3(x\xE2\x82"}) {
    EXPECT_EQ(tok().decode(tok().encode(text, false, false)), text);
  }
}

TEST_F(Llama2Tokenizer, SpecialTokensParsedOnlyOnRequest) {
  const std::string text = "<s>hello</s>";
  // Plain text: "▁<" "s" ">" "hello" "</" "s" ">".
  EXPECT_EQ(tok().encode(text, false, false), (Ids{529, 29879, 29958, 12199, 829, 29879, 29958}));
  // Parsed: the text after <s> gets the prefix space like the start of the text does.
  EXPECT_EQ(tok().encode(text, false, true), (Ids{1, 22172, 2}));
  EXPECT_EQ(tok().encode(text, true, true), (Ids{1, 1, 22172, 2}));
  EXPECT_EQ(tok().encode("<unk>", false, true), Ids{0});
}

TEST_F(Llama2Tokenizer, SpecialTokenPieces) {
  EXPECT_EQ(tok().token_to_piece(1), "");
  EXPECT_EQ(tok().token_to_piece(1, /*render_special=*/true), "<s>");
  EXPECT_EQ(tok().token_to_piece(0), "");
  EXPECT_EQ(tok().token_to_piece(0, true), "<unk>");
  EXPECT_EQ(tok().token_to_piece(22172), " hello");
  EXPECT_EQ(tok().decode(Ids{1, 22172, 2}, true, /*render_special=*/true), "<s>hello</s>");
  EXPECT_EQ(tok().decode(Ids{1, 22172, 2}), "hello");
  EXPECT_EQ(tok().decode(Ids{1, 22172, 2}, false), " hello");
}

TEST_F(Llama2Tokenizer, BadTokenIdThrows) {
  EXPECT_THROW(tok().token_to_piece(-1), Error);
  EXPECT_THROW(tok().token_to_piece(32000), Error);
  EXPECT_THROW(tok().decode(Ids{5, 40000}), Error);
}

// --- Small hand-made vocabularies -----------------------------------------------------

struct TokenSpec {
  std::string text;
  float score = 0;
  TokenType type = TokenType::NORMAL;
};

Vocab make_vocab(const std::vector<TokenSpec>& specs) {
  Vocab v;
  v.model = "llama";
  for (const TokenSpec& s : specs) {
    v.tokens.push_back(s.text);
    v.scores.push_back(s.score);
    v.types.push_back(s.type);
  }
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.eog_ids = {2};
  return v;
}

const std::vector<TokenSpec> kBase = {
    {"<unk>", 0, TokenType::UNKNOWN}, {"<s>", 0, TokenType::CONTROL},
    {"</s>", 0, TokenType::CONTROL},  {"\u2581"},  // 3
    {"a"}, {"b"}, {"c"},                            // 4 5 6
};

Vocab with_tokens(std::vector<TokenSpec> extra) {
  std::vector<TokenSpec> specs = kBase;
  specs.insert(specs.end(), extra.begin(), extra.end());
  return make_vocab(specs);
}

TEST(SpmTokenizer, UnknownWithoutByteTokens) {
  const auto tok = Tokenizer::create(with_tokens({}));
  // "é" is two bytes, neither with a token: one <unk> per byte, as llama.cpp's byte
  // fallback does byte by byte.
  EXPECT_EQ(tok->encode("a\xC3\xA9", false, false), (Ids{3, 4, 0, 0}));
}

TEST(SpmTokenizer, HighestScoreMergesFirst) {
  const auto low_ab = Tokenizer::create(with_tokens({{"ab", -2}, {"bc", -1}}));
  EXPECT_EQ(low_ab->encode("abc", false, false), (Ids{3, 4, 8}));
  const auto high_ab = Tokenizer::create(with_tokens({{"ab", -1}, {"bc", -2}}));
  EXPECT_EQ(high_ab->encode("abc", false, false), (Ids{3, 7, 6}));
}

TEST(SpmTokenizer, TiesMergeLeftmostFirst) {
  const auto tok = Tokenizer::create(with_tokens({{"ab", -1}, {"ba", -1}}));
  EXPECT_EQ(tok->encode("aba", false, false), (Ids{3, 7, 4}));
}

TEST(SpmTokenizer, NoSpacePrefixWhenVocabularySaysSo) {
  Vocab v = with_tokens({{"\u2581a", -1}});
  v.add_space_prefix = false;
  const auto tok = Tokenizer::create(v);
  EXPECT_EQ(tok->encode("a a", true, false), (Ids{1, 4, 7}));
  EXPECT_EQ(tok->decode(Ids{1, 4, 7}), "a a");
}

TEST(SpmTokenizer, AddsEosWhenVocabularySaysSo) {
  Vocab v = with_tokens({});
  v.add_eos = true;
  const auto tok = Tokenizer::create(v);
  EXPECT_EQ(tok->encode("a", true, false), (Ids{1, 3, 4, 2}));
  EXPECT_EQ(tok->encode("a", false, false), (Ids{3, 4}));
}

TEST(SpmTokenizer, UserDefinedTokensAlwaysMatched) {
  // As llama.cpp (and Hugging Face tokenizers): user-defined tokens are split out even
  // without parse_special; control tokens only with it. Like llama.cpp, the text after
  // any special token gets the prefix space again ("▁b").
  const auto tok = Tokenizer::create(with_tokens({{"<tag>", 0, TokenType::USER_DEFINED}}));
  EXPECT_EQ(tok->encode("a<tag>b", false, false), (Ids{3, 4, 7, 3, 5}));
  // "<", "s", ">" have no tokens here and no byte tokens exist: <unk> each.
  EXPECT_EQ(tok->encode("a<s>b", false, false), (Ids{3, 4, 0, 0, 0, 5}));
  EXPECT_EQ(tok->encode("a<s>b", false, true), (Ids{3, 4, 1, 3, 5}));
  EXPECT_EQ(tok->token_to_piece(7), "<tag>");
  EXPECT_EQ(tok->decode(Ids{3, 4, 7, 5}), "a<tag>b");
}

TEST(SpmTokenizer, LongerSpecialTokensSplitFirst) {
  // llama.cpp partitions by each special token in turn, longest first: "bca" claims its
  // text before "ab" is looked for, even though "ab" starts further left.
  const auto tok = Tokenizer::create(with_tokens({{"ab", 0, TokenType::CONTROL},
                                                  {"bca", 0, TokenType::CONTROL}}));
  EXPECT_EQ(tok->encode("abca", false, true), (Ids{3, 4, 8}));
  EXPECT_EQ(tok->encode("abab", false, true), (Ids{7, 7}));
}

TEST(SpmTokenizer, RejectsInconsistentVocab) {
  Vocab v = with_tokens({});
  v.scores.pop_back();
  EXPECT_THROW(Tokenizer::create(v), Error);
  v = with_tokens({});
  v.bos_id = 100;
  EXPECT_THROW(Tokenizer::create(v), Error);
  v = with_tokens({{"<0xZZ>", 0, TokenType::BYTE}});
  EXPECT_THROW(Tokenizer::create(v), Error);
}

TEST(Tokenizer, UnknownModelsAreRefused) {
  Vocab v = with_tokens({});
  v.model = "t5";
  try {
    Tokenizer::create(v);
    FAIL() << "expected tsr::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tokenizer model 't5' is not supported yet");
  }
}

// --- vocab_from_gguf on synthesized files ----------------------------------------------

// GgufWriter cannot be moved, so tests declare one and fill it here.
void add_llama_tokens(GgufWriter& w, const std::vector<std::string>& tokens) {
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
}

std::unique_ptr<GgufFile> parse(const GgufWriter& w) {
  return GgufFile::from_bytes(w.to_bytes(), "synth.gguf");
}

std::string vocab_error(const GgufWriter& w) {
  try {
    vocab_from_gguf(*parse(w));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

const std::vector<std::string> kFive = {"<unk>", "<s>", "</s>", "\u2581a", "b"};

TEST(VocabFromGguf, LlamaDefaults) {
  GgufWriter w;
  add_llama_tokens(w, kFive);
  const Vocab v = vocab_from_gguf(*parse(w));
  EXPECT_EQ(v.tokens, kFive);
  EXPECT_TRUE(v.scores.empty());
  EXPECT_EQ(v.types, std::vector<TokenType>(5, TokenType::NORMAL));
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(v.pad_id, -1);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_TRUE(v.add_space_prefix);
  EXPECT_EQ(v.eog_ids, Ids{2});
  EXPECT_EQ(v.chat_template, "");
}

TEST(VocabFromGguf, ReadsEveryKey) {
  GgufWriter w;
  add_llama_tokens(w, kFive);
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1.5f, -2});
  w.add_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 4});
  w.add_string_array("tokenizer.ggml.merges", {"a b"});
  w.add_u32("tokenizer.ggml.bos_token_id", 2);
  w.add_u32("tokenizer.ggml.eos_token_id", 1);
  w.add_u32("tokenizer.ggml.unknown_token_id", 4);
  w.add_u32("tokenizer.ggml.padding_token_id", 0);
  w.add_u32("tokenizer.ggml.eot_token_id", 3);
  w.add_u32("tokenizer.ggml.eom_token_id", 1);
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_bool("tokenizer.ggml.add_eos_token", true);
  w.add_bool("tokenizer.ggml.add_space_prefix", false);
  w.add_string("tokenizer.chat_template", "{{ messages }}");
  const Vocab v = vocab_from_gguf(*parse(w));
  EXPECT_EQ(v.pre, "default");
  EXPECT_EQ(v.scores, (std::vector<float>{0, 0, 0, -1.5f, -2}));
  EXPECT_EQ(v.types[4], TokenType::USER_DEFINED);
  EXPECT_EQ(v.merges, std::vector<std::string>{"a b"});
  EXPECT_EQ(v.bos_id, 2);
  EXPECT_EQ(v.eos_id, 1);
  EXPECT_EQ(v.unk_id, 4);
  EXPECT_EQ(v.pad_id, 0);
  EXPECT_EQ(v.eog_ids, (Ids{1, 3}));  // EOM repeats EOS: listed once
  EXPECT_FALSE(v.add_bos);
  EXPECT_TRUE(v.add_eos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_EQ(v.chat_template, "{{ messages }}");
}

TEST(VocabFromGguf, RejectsInconsistentData) {
  GgufWriter scores;
  add_llama_tokens(scores, kFive);
  scores.add_f32_array("tokenizer.ggml.scores", {0, 0});
  EXPECT_EQ(vocab_error(scores), "synth.gguf: tokenizer.ggml.scores has 2 entries for 5 tokens");

  GgufWriter types;
  add_llama_tokens(types, kFive);
  types.add_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 1, 9});
  EXPECT_EQ(vocab_error(types),
            "synth.gguf: tokenizer.ggml.token_type[4] = 9 is not a known token type");

  GgufWriter bos;
  add_llama_tokens(bos, kFive);
  bos.add_u32("tokenizer.ggml.bos_token_id", 5);
  EXPECT_EQ(vocab_error(bos),
            "synth.gguf: tokenizer.ggml.bos_token_id = 5 is outside the vocabulary of 5 tokens");

  GgufWriter two;
  add_llama_tokens(two, {"<unk>", "<s>"});
  EXPECT_EQ(vocab_error(two),
            "synth.gguf: tokenizer.ggml.eos_token_id = 2 (default) is outside the vocabulary "
            "of 2 tokens");

  GgufWriter no_tokens;
  no_tokens.add_string("tokenizer.ggml.model", "llama");
  EXPECT_EQ(vocab_error(no_tokens), "synth.gguf: missing tokenizer.ggml.tokens");

  GgufWriter no_model;
  no_model.add_string_array("tokenizer.ggml.tokens", kFive);
  EXPECT_EQ(vocab_error(no_model), "synth.gguf: missing tokenizer.ggml.model");
}

TEST(VocabFromGguf, OtherModelsGetNoLlamaDefaults) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string_array("tokenizer.ggml.tokens", kFive);
  const Vocab v = vocab_from_gguf(*parse(w));
  EXPECT_EQ(v.bos_id, -1);
  EXPECT_FALSE(v.add_bos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_TRUE(v.eog_ids.empty());
}

}  // namespace
}  // namespace tsr
