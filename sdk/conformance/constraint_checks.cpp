// Constraint checks, MaskBench-style, on a small synthetic vocabulary: every single byte,
// multi-byte tokens (some ending or starting inside a UTF-8 character), special tokens
// that carry bytes (never allowed all the same), an empty text token and two EOS tokens.
//
// For each kind the plugin lists, the kit compiles constraints whose valid and invalid
// instances it knows (json_schema, json_object, regex, gbnf, choice) and walks them token
// by token, split three ways (bytes, longest tokens, random tokens). At every step the
// mask must equal what accept() takes (checked exhaustively on forks), never allow a
// special token, allow EOS iff can_terminate(), and never be empty before EOS. Valid
// instances are accepted to the end and then take EOS; invalid ones are refused at some
// token or cannot end. Rollback restores earlier masks exactly and refuses to go past the
// start; forks are independent; objects outlive their parents as constraint.h promises;
// compiles run concurrently; bad arguments fail with a status and an error object.
//
// A constraint the plugin reports as TSR_STATUS_UNSUPPORTED is skipped (plugins may serve
// a subset of a kind), but each known kind needs at least one that compiles. Kinds the
// kit does not know get the generic checks, with random walks where "" compiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "conformance.h"
#include "tessera/constraint.h"

namespace tsr::conformance {
namespace {

const tsr_constraint_iface& table() {
  return *static_cast<const tsr_constraint_iface*>(plugin().desc->iface);
}

std::vector<std::string> plugin_kinds() {
  std::vector<std::string> kinds;
  std::string_view rest = table().kinds;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    kinds.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return kinds;
}

std::string escaped(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += {'\\', c};
    } else if (c == '\n') {
      out += "\\n";
    } else if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    }
  }
  return out + "\"";
}

// ---- the synthetic vocabulary ----

enum class Split { bytes, longest, random };

class SyntheticVocab {
 public:
  SyntheticVocab() {
    // Specials and EOS first and last, so that no plugin can assume where they are.
    add("<unk>", TSR_TOKEN_SPECIAL);
    eos_.push_back(add("</s>", TSR_TOKEN_EOS));
    for (const char* s : {"a", "e", "r", "y", "x", "1", "\"", "{", "(", "é"}) {
      add(s, TSR_TOKEN_SPECIAL);  // bytes a grammar would take: still never allowed
    }
    for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)), TSR_TOKEN_TEXT);
    for (const char* t : kMultiByte) add(t, TSR_TOKEN_TEXT);
    add("", TSR_TOKEN_TEXT, false);  // a text token without bytes (NULL pointer, length 0)
    eos_.push_back(add("", TSR_TOKEN_EOS, false));
    for (size_t i = 0; i < bytes_.size(); ++i) {
      ptrs_.push_back(has_bytes_[i] ? bytes_[i].data() : nullptr);
      lens_.push_back(static_cast<uint32_t>(bytes_[i].size()));
    }
    desc_ = {sizeof(tsr_vocab_desc), size(), 0, ptrs_.data(), lens_.data(), kinds_.data(), nullptr};
  }

  const tsr_vocab_desc& desc() const { return desc_; }
  int32_t size() const { return static_cast<int32_t>(kinds_.size()); }
  size_t mask_words() const { return TSR_MASK_WORDS(size()); }
  uint8_t kind(int32_t id) const { return kinds_[id]; }
  const std::vector<int32_t>& eos() const { return eos_; }
  int32_t byte_token(unsigned char b) const { return kFirstByte + b; }

  std::string describe(int32_t id) const {
    const char* names[] = {"text", "special", "EOS"};
    return "token " + std::to_string(id) + " (" + names[kinds_[id]] + " " + escaped(bytes_[id]) + ")";
  }

  // `s` as token ids: single bytes, the longest token at each position, or a random
  // token among those that match there.
  std::vector<int32_t> tokenize(std::string_view s, Split how, std::mt19937& rng) const {
    std::vector<int32_t> ids;
    for (size_t at = 0; at < s.size();) {
      std::vector<int32_t> fits;
      for (int32_t id = 0; id < size(); ++id) {
        if (kinds_[id] == TSR_TOKEN_TEXT && !bytes_[id].empty() && s.substr(at).starts_with(bytes_[id])) {
          fits.push_back(id);
        }
      }
      int32_t id = byte_token(static_cast<unsigned char>(s[at]));
      if (how == Split::longest) {
        id = *std::max_element(fits.begin(), fits.end(),
                               [&](int32_t a, int32_t b) { return bytes_[a].size() < bytes_[b].size(); });
      } else if (how == Split::random) {
        id = fits[rng() % fits.size()];
      }
      ids.push_back(id);
      at += bytes_[id].size();
    }
    return ids;
  }

 private:
  static constexpr int32_t kFirstByte = 12;  // ids 12..267 are the bytes 0..255
  static constexpr const char* kMultiByte[] = {
      // JSON pieces
      "{\"", "\"}", "\":", "\",", ",\"", "\":\"", "{}", "[]", "[1", ",2", "]}", "true", "false",
      "null", "tr", "ue", "name", "age", "admin", "red", "green", "blue", "\"red\"", "12", "345",
      "-1", "0.5", "e+", "\\\"", "\\\\", "\\n", "\\u00", "  ", "\n\n",
      // words of the regex, GBNF and choice cases
      "yes", "no", "ye", "s!", "ab", "cd", "abc", "xyz", "ish", "-A", "::=",
      // UTF-8: whole characters, and tokens that end or start inside one
      "é", "€", "😀", "é€", "a\xC3", "\xA9" "b", "\xE2\x82", "\xAC\"", "\xF0\x9F", "\x98\x80",
      "\xA9\xC3", "\x82\xAC", "\xFF\xFE"};

  int32_t add(std::string bytes, tsr_token_kind kind, bool has_bytes = true) {
    bytes_.push_back(std::move(bytes));
    kinds_.push_back(static_cast<uint8_t>(kind));
    has_bytes_.push_back(has_bytes);
    return size() - 1;
  }

  std::vector<std::string> bytes_;
  std::vector<uint8_t> kinds_;
  std::vector<bool> has_bytes_;
  std::vector<const char*> ptrs_;
  std::vector<uint32_t> lens_;
  std::vector<int32_t> eos_;
  tsr_vocab_desc desc_{};
};

const SyntheticVocab& vocab() {
  static const SyntheticVocab v;
  return v;
}

// ---- what the kit knows about each kind ----

struct Case {
  std::string text;
  std::vector<std::string> valid;    // whole outputs the constraint allows
  std::vector<std::string> invalid;  // outputs it does not (possibly prefixes of valid ones)
};

struct KindData {
  std::vector<Case> cases;
  std::vector<std::string> malformed;  // must fail with TSR_STATUS_INVALID_ARGUMENT
};

// Valid JSON is compact with properties in schema order: what every plugin generates
// (some allow whitespace or other orders too, so those are in neither list).
KindData json_schema_data() {
  return {{
              {R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},)"
               R"("age":{"type":"integer"},"admin":{"type":"boolean"}},)"
               R"("required":["name","age","admin"],"additionalProperties":false})",
               {R"({"name":"Bo","age":7,"admin":true})", R"({"name":"","age":-12,"admin":false})",
                R"({"name":"Zoé €😀","age":0,"admin":true})", R"({"name":"a\"b\\c\n","age":345,"admin":false})"},
               {"", R"({"name":"Bo","age":7})", R"({"name":"Bo","age":7,"admin":true,"x":1})",
                R"({"name":7,"age":7,"admin":true})", R"({"name":"Bo","age":7.5,"admin":true})",
                R"({"name":"Bo","age":07,"admin":true})", R"({"name":"123456789","age":1,"admin":true})",
                R"({"name":"Bo","age":7,"admin":yes})", R"({"name":"Bo","age":7,"admin":true}})",
                "{\"name\":\"\xFF\",\"age\":1,\"admin\":true}", "{\"name\":\"a\nb\",\"age\":1,\"admin\":true}",
                R"([1])", R"({"name":"Bo","age":7,"admin":tru})"}},
              {R"({"type":"object","properties":{"id":{"type":"integer"},)"
               R"("tag":{"enum":["red","green","blue"]},"note":{"type":"string","maxLength":4}},)"
               R"("required":["id"],"additionalProperties":false})",
               {R"({"id":1})", R"({"id":1,"tag":"red"})", R"({"id":12,"note":"hi"})",
                R"({"id":-1,"tag":"blue","note":"ok"})"},
               {R"({"tag":"red"})", R"({"id":1,"tag":"pink"})", R"({"id":1,"tag":"re"})",
                R"({"id":1,"note":"hello"})", R"({"id":1,})", R"({})", R"({"id":"1"})"}},
              {R"({"enum":["yes","no","maybe"]})",
               {R"("yes")", R"("maybe")", R"("no")"},
               {R"("ye")", "yes", R"("no!")", R"("")", R"("Yes")"}},
              {R"({"type":"string","maxLength":3})",
               {R"("")", R"("abc")", R"("é€😀")"},
               {R"("abcd")", "abc", R"("ab)", R"("é€😀a")"}},
              {R"({"type":"array","items":{"type":"integer"},"maxItems":3})",
               {"[]", "[1]", "[1,2,-3]"},
               {"[1,2,3,4]", "[1,]", R"(["a"])", "[1.5]", "[", "{}"}},
          },
          {R"({"type":)", "not json", R"({"type":"object"}})"}};
}

KindData json_object_data() {
  return {{{"",
            {"{}", R"({"a":1})", R"({"a":[1,2,{"b":null}],"c":"x"})", R"({"é":"😀","n":-0.5e+3,"t":true})"},
            {"", "[]", "1", R"("x")", R"({"a"})", "{a:1}", R"({"a":1,})", R"({"a":1}})",
             R"({"a":tru})", "{\"a\":\"\xFF\"}"}}},
          {}};
}

KindData regex_data() {
  return {{
              {"[a-c]+x?", {"a", "abc", "cabx"}, {"", "x", "abcxx", "abd", "A"}},
              {"(ab|cd)*e", {"e", "abe", "cdabe"}, {"ab", "abce", "", "ee"}},
              {"\\d{2,3}-[A-Z]", {"12-A", "345-Z"}, {"1-A", "1234-A", "12-a", "12-"}},
              {"(é|€)+😀?", {"é", "€é😀"}, {"e", "😀", "é😀😀", "\xC3"}},
              {"[^a]{2}", {"bc", "é€", "😀b"}, {"a", "ab", "\xFF\xFE", "bcd"}},
          },
          {"(ab", "[a-", "a)", "*a"}};
}

KindData gbnf_data() {
  return {{
              {R"(root ::= "yes" | "no")", {"yes", "no"}, {"ye", "yess", "", "No"}},
              {"root ::= item (\",\" item)*\nitem ::= [a-z]+ | num\nnum ::= [0-9]{1,3}\n",
               {"a", "ab,c", "1,22,xyz"}, {",", "a,", "1234", "a,,b", "A"}},
              {R"(root ::= [é€] "😀"?)", {"é", "€😀"}, {"e", "😀", "é😀😀"}},
              {R"g(root ::= "(" root ")" | "x")g", {"x", "(x)", "((x))"}, {"(x", "(x))", "()", ""}},
          },
          {R"(root ::= "unterminated)", R"(root ::= missing)", R"(notroot ::= "a")"}};
}

KindData choice_data() {
  return {{
              {"red\ngreen\ngreenish\nblue\n", {"red", "green", "greenish", "blue"},
               {"gre", "greenishx", "", "redd", "Red", "red\n"}},
              {"yes\nyes!\né€😀", {"yes", "yes!", "é€😀"}, {"ye", "yes!!", "é€", "é€😀😀"}},
          },
          {"", "\n\n"}};
}

// The kit's data for `kind`; none for kinds it does not know.
std::optional<KindData> known_kind(const std::string& kind) {
  static const std::map<std::string, std::function<KindData()>> kinds = {
      {"json_schema", json_schema_data}, {"json_object", json_object_data},
      {"regex", regex_data},             {"gbnf", gbnf_data},
      {"choice", choice_data}};
  const auto it = kinds.find(kind);
  if (it == kinds.end()) return std::nullopt;
  return it->second();
}

// ---- handles ----

struct GrammarFree {
  void operator()(tsr_grammar* g) const { table().grammar_destroy(g); }
};
using Grammar = std::unique_ptr<tsr_grammar, GrammarFree>;

using Mask = std::vector<uint32_t>;
bool bit(const Mask& m, int32_t id) { return (m[id / 32] >> (id % 32)) & 1u; }

// Takes the error slot, not its value: the slot is read after the call has filled it.
void check(tsr_status status, tsr_error** slot, const std::string& what) {
  tsr_error* error = *slot;
  *slot = nullptr;
  if (status != TSR_STATUS_OK) throw std::runtime_error(what + " failed: " + take_error(error));
  if (error != nullptr) ADD_FAILURE() << what << " succeeded but set an error: " << take_error(error);
}

// The plugin's message (empty without an error object); frees the error.
std::string message_of(tsr_error* error) {
  std::string message = error != nullptr ? host_api()->error_message(error) : "";
  take_error(error);
  return message;
}

class Matcher {
 public:
  explicit Matcher(tsr_matcher* handle) : h_(handle) {}
  Matcher(Matcher&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  Matcher& operator=(Matcher&&) = delete;
  ~Matcher() { table().matcher_destroy(h_); }

  static Matcher create(tsr_grammar* g) {
    tsr_matcher* m = nullptr;
    tsr_error* e = nullptr;
    check(table().matcher_create(g, &m, &e), &e, "matcher_create");
    return Matcher(m);
  }

  Matcher fork() const {
    tsr_matcher* m = nullptr;
    tsr_error* e = nullptr;
    check(table().matcher_fork(h_, &m, &e), &e, "matcher_fork");
    return Matcher(m);
  }

  // Starts from garbage: the plugin must write every word, not only set bits.
  Mask mask() const {
    Mask words(vocab().mask_words(), 0xA5A5A5A5u);
    tsr_error* e = nullptr;
    check(table().matcher_fill_mask(h_, words.data(), words.size(), &e), &e, "fill_mask");
    return words;
  }

  bool accept(int32_t token) {
    const int32_t r = table().matcher_accept(h_, token);
    EXPECT_TRUE(r == 0 || r == 1) << "matcher_accept returned " << r;
    return r == 1;
  }

  // OK, or the status after checking that an error object came with it.
  tsr_status rollback(size_t n) {
    tsr_error* e = nullptr;
    const tsr_status status = table().matcher_rollback(h_, n, &e);
    if (status != TSR_STATUS_OK) {
      EXPECT_NE(e, nullptr) << "rollback failed without an error object";
    }
    take_error(e);
    return status;
  }

  bool terminated() const { return table().matcher_is_terminated(h_) == 1; }
  bool can_terminate() const { return table().matcher_can_terminate(h_) == 1; }
  tsr_matcher* get() const { return h_; }

 private:
  tsr_matcher* h_;
};

// The mask, checked against accept() on a fork for every token and against the rules
// every mask obeys. Returns nullopt after reporting a failure.
std::optional<Mask> checked_mask(const Matcher& m, const std::string& where) {
  const SyntheticVocab& v = vocab();
  const Mask mask = m.mask();
  std::string problems;
  const auto problem = [&](const std::string& p) {
    if (problems.size() < 2000) problems += "\n  " + p;
  };
  bool any = false;
  for (int32_t id = 0; id < v.size(); ++id) {
    const bool allowed = bit(mask, id);
    any |= allowed;
    if (allowed && v.kind(id) == TSR_TOKEN_SPECIAL) problem("the mask allows special " + v.describe(id));
    if (v.kind(id) == TSR_TOKEN_EOS && allowed != m.can_terminate()) {
      problem("the mask " + std::string(allowed ? "allows " : "refuses ") + v.describe(id) +
              " but can_terminate() is " + (m.can_terminate() ? "1" : "0"));
    }
    Matcher f = m.fork();
    if (f.accept(id) != allowed) {
      problem("the mask " + std::string(allowed ? "allows " : "refuses ") + v.describe(id) +
              " but accept() on a fork " + (allowed ? "refuses" : "takes") + " it");
    }
  }
  for (int32_t id = v.size(); id < static_cast<int32_t>(mask.size() * 32); ++id) {
    if (bit(mask, id)) problem("bit " + std::to_string(id) + " is set, past the vocabulary");
  }
  if (m.terminated() && any) problem("a terminated matcher allows tokens");
  if (!m.terminated() && !any) problem("a dead end: nothing allowed, not even EOS, before termination");
  if (problems.empty()) return mask;
  ADD_FAILURE() << where << ":" << problems;
  return std::nullopt;
}

// After EOS: terminated, nothing allowed, nothing accepted.
void check_terminated(Matcher& m, const std::string& where) {
  EXPECT_TRUE(m.terminated()) << where << ": not terminated after EOS";
  EXPECT_FALSE(m.can_terminate()) << where << ": can_terminate() after EOS";
  const Mask mask = m.mask();
  EXPECT_TRUE(std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; }))
      << where << ": a terminated matcher allows tokens";
  for (int32_t id = 0; id < vocab().size(); ++id) {
    if (m.accept(id)) {
      ADD_FAILURE() << where << ": a terminated matcher accepted " << vocab().describe(id);
      return;
    }
  }
}

std::string split_name(Split s) {
  return s == Split::bytes ? "bytes" : s == Split::longest ? "longest tokens" : "random tokens";
}

// ---- the fixture ----

struct Usable {
  std::string kind;
  const Case* c;
  Grammar grammar;
};

class Constraint : public ::testing::Test {
 protected:
  void SetUp() override {
    tsr_error* e = nullptr;
    check(table().vocab_create(&vocab().desc(), &vocab_, &e), &e, "vocab_create");
    for (const std::string& kind : plugin_kinds()) data_[kind] = known_kind(kind);
  }
  void TearDown() override {
    usable_.clear();
    unknown_.clear();
    table().vocab_destroy(vocab_);
    EXPECT_EQ(live_errors(), 0) << "error objects leaked";
  }

  // Compiles `text` from a buffer with junk after it: text_len, not a NUL, ends it.
  tsr_status compile(const std::string& kind, std::string_view text, Grammar& out, std::string& message,
                     tsr_constraint_vocab* v = nullptr) {
    std::string buffer(text);
    buffer += "\")]}|*junk";
    tsr_grammar* g = nullptr;
    tsr_error* e = nullptr;
    const tsr_status status =
        table().grammar_compile(v ? v : vocab_, kind.c_str(), buffer.data(), text.size(), &g, &e);
    if (status == TSR_STATUS_OK) {
      EXPECT_EQ(e, nullptr) << "grammar_compile succeeded but set an error object";
      EXPECT_NE(g, nullptr) << "grammar_compile succeeded without a grammar";
    } else {
      EXPECT_NE(e, nullptr) << "grammar_compile failed without an error object";
    }
    message = message_of(e);
    out.reset(g);
    return status;
  }

  // The kit's cases that compile, for every kind the plugin lists that the kit knows.
  // Unsupported ones are skipped; every other failure fails the test.
  const std::vector<Usable>& usable() {
    if (usable_built_) return usable_;
    usable_built_ = true;
    for (const auto& [kind, data] : data_) {
      if (!data) continue;
      size_t compiled = 0;
      for (const Case& c : data->cases) {
        Grammar g;
        std::string message;
        const tsr_status status = compile(kind, c.text, g, message);
        if (status == TSR_STATUS_UNSUPPORTED) {
          static std::set<std::string> reported;  // each test compiles the cases again
          if (reported.insert(kind + c.text).second) {
            std::printf("[ skipped ] %s %s: the plugin does not support it (%s)\n", kind.c_str(),
                        escaped(c.text).c_str(), message.c_str());
          }
          continue;
        }
        EXPECT_EQ(status, TSR_STATUS_OK) << kind << " " << escaped(c.text) << ": " << message;
        if (status != TSR_STATUS_OK) continue;
        ++compiled;
        usable_.push_back({kind, &c, std::move(g)});
      }
      EXPECT_GT(compiled, 0u) << "the plugin lists kind " << kind << " but compiles none of the kit's cases";
    }
    return usable_;
  }

  // Every grammar to random-walk: the usable cases, and "" for kinds the kit does not know.
  std::vector<std::pair<std::string, tsr_grammar*>> walkable() {
    std::vector<std::pair<std::string, tsr_grammar*>> out;
    for (const Usable& u : usable()) out.emplace_back(u.kind + " " + escaped(u.c->text), u.grammar.get());
    for (const auto& [kind, data] : data_) {
      if (data) continue;
      Grammar g;
      std::string message;
      if (compile(kind, "", g, message) == TSR_STATUS_OK) {
        out.emplace_back(kind + " \"\"", g.get());
        unknown_.push_back(std::move(g));
      } else {
        EXPECT_FALSE(message.empty()) << kind << ": a failed compile without a message";
      }
    }
    return out;
  }

  static std::string where(const Usable& u, const std::string& input, Split split) {
    return u.kind + " " + escaped(u.c->text) + ", input " + escaped(input) + " split into " + split_name(split);
  }

  tsr_constraint_vocab* vocab_ = nullptr;
  std::map<std::string, std::optional<KindData>> data_;
  std::vector<Usable> usable_;
  bool usable_built_ = false;
  std::vector<Grammar> unknown_;  // compiled from "" for kinds the kit does not know
  std::mt19937 rng_{20240611};
};

// ---- plugin, vocabulary and compile checks ----

TEST_F(Constraint, ListsItsKinds) {
  const std::vector<std::string> kinds = plugin_kinds();
  EXPECT_FALSE(kinds.empty()) << "kinds is empty";
  for (const std::string& k : kinds) {
    EXPECT_TRUE(!k.empty() && k.find_first_of(" \t\n") == std::string::npos)
        << "kinds \"" << table().kinds << "\" is not a comma-separated list of names";
  }
}

// Expects `call` to fail with an error object, and not to crash without an error slot.
void refused(const char* what, const std::function<tsr_status(tsr_error**)>& call) {
  tsr_error* e = nullptr;
  const tsr_status status = call(&e);
  const bool has_error = e != nullptr;
  const std::string message = message_of(e);
  EXPECT_NE(status, TSR_STATUS_OK) << what;
  if (status != TSR_STATUS_OK) {
    EXPECT_TRUE(has_error) << what << ": no error object";
    EXPECT_TRUE(!has_error || !message.empty()) << what << ": an empty message";
  }
  EXPECT_NE(call(nullptr), TSR_STATUS_OK) << what << " without an error pointer";
}

TEST_F(Constraint, BadVocabulariesAreRefused) {
  using Change = std::function<void(tsr_vocab_desc&, std::vector<uint8_t>& kinds)>;
  const auto bad = [](const char* what, const Change& change) {
    tsr_vocab_desc d = vocab().desc();
    std::vector<uint8_t> kinds(d.token_kinds, d.token_kinds + d.n_tokens);
    d.token_kinds = kinds.data();
    change(d, kinds);
    refused(what, [&](tsr_error** e) {
      tsr_constraint_vocab* out = nullptr;
      const tsr_status status = table().vocab_create(&d, &out, e);
      table().vocab_destroy(out);
      return status;
    });
  };
  bad("struct_size 8", [](tsr_vocab_desc& d, auto&) { d.struct_size = 8; });
  bad("n_tokens 0", [](tsr_vocab_desc& d, auto&) { d.n_tokens = 0; });
  bad("n_tokens -1", [](tsr_vocab_desc& d, auto&) { d.n_tokens = -1; });
  bad("NULL token_lens", [](tsr_vocab_desc& d, auto&) { d.token_lens = nullptr; });
  bad("NULL token_kinds", [](tsr_vocab_desc& d, auto&) { d.token_kinds = nullptr; });
  bad("NULL token_bytes", [](tsr_vocab_desc& d, auto&) { d.token_bytes = nullptr; });
  bad("a token kind of 7", [](tsr_vocab_desc&, auto& kinds) { kinds[5] = 7; });
  refused("NULL desc", [](tsr_error** e) {
    tsr_constraint_vocab* out = nullptr;
    return table().vocab_create(nullptr, &out, e);
  });
  refused("NULL out", [](tsr_error** e) { return table().vocab_create(&vocab().desc(), nullptr, e); });
  table().vocab_destroy(nullptr);
  table().grammar_destroy(nullptr);
  table().matcher_destroy(nullptr);
}

TEST_F(Constraint, BadCompileArgumentsAreRefused) {
  const std::string kind = plugin_kinds().front();
  tsr_grammar* g = nullptr;
  // A grammar_compile call with these arguments, for refused().
  const auto compiling = [](tsr_constraint_vocab* v, const char* k, const char* text, size_t len,
                            tsr_grammar** out) {
    return [=](tsr_error** e) { return table().grammar_compile(v, k, text, len, out, e); };
  };
  refused("NULL vocab", compiling(nullptr, kind.c_str(), "x", 1, &g));
  refused("NULL kind", compiling(vocab_, nullptr, "x", 1, &g));
  refused("NULL out", compiling(vocab_, kind.c_str(), "x", 1, nullptr));
  refused("NULL text of length 5", compiling(vocab_, kind.c_str(), nullptr, 5, &g));
  refused("a kind the plugin does not list", compiling(vocab_, "no_such_kind", "x", 1, &g));
}

// A malformed constraint fails with INVALID_ARGUMENT and a message, as constraint.h says.
TEST_F(Constraint, MalformedConstraintsFailWithAMessage) {
  for (const auto& [kind, data] : data_) {
    if (!data) continue;
    for (const std::string& text : data->malformed) {
      Grammar g;
      std::string message;
      EXPECT_EQ(compile(kind, text, g, message), TSR_STATUS_INVALID_ARGUMENT)
          << kind << " " << escaped(text) << ": " << message;
      EXPECT_NE(message, "") << kind << " " << escaped(text) << ": an empty message";
    }
  }
}

// ---- walks over the kit's instances ----

TEST_F(Constraint, ValidInstancesAreAcceptedToTheEnd) {
  for (const Usable& u : usable()) {
    for (const std::string& input : u.c->valid) {
      for (const Split split : {Split::bytes, Split::longest, Split::random}) {
        const std::string at = where(u, input, split);
        Matcher m = Matcher::create(u.grammar.get());
        bool ok = true;
        for (const int32_t token : vocab().tokenize(input, split, rng_)) {
          const auto mask = checked_mask(m, at);
          ok = mask && bit(*mask, token) && m.accept(token);
          if (!ok) {
            if (mask) ADD_FAILURE() << at << ": " << vocab().describe(token) << " was refused";
            break;
          }
        }
        if (!ok || !checked_mask(m, at + " at the end")) continue;
        EXPECT_TRUE(m.can_terminate()) << at << ": cannot end after the whole input";
        for (const int32_t eos : vocab().eos()) {
          Matcher f = m.fork();
          EXPECT_TRUE(f.accept(eos)) << at << ": " << vocab().describe(eos) << " refused at the end";
          check_terminated(f, at + " after EOS");
        }
      }
    }
  }
}

TEST_F(Constraint, InvalidInstancesAreRejected) {
  for (const Usable& u : usable()) {
    for (const std::string& input : u.c->invalid) {
      for (const Split split : {Split::bytes, Split::longest, Split::random}) {
        const std::string at = where(u, input, split);
        Matcher m = Matcher::create(u.grammar.get());
        bool done = false;  // refused (as it should be), or failed already
        for (const int32_t token : vocab().tokenize(input, split, rng_)) {
          const auto mask = checked_mask(m, at);
          done = !mask || !m.accept(token);
          if (mask && done) {
            EXPECT_EQ(m.mask(), *mask) << at << ": a refused token changed the matcher";
          }
          if (done) break;
        }
        if (done) continue;
        EXPECT_FALSE(m.can_terminate()) << at << ": every token accepted and the output may end here";
        EXPECT_FALSE(m.accept(vocab().eos().front())) << at << ": EOS accepted after an invalid output";
      }
    }
  }
}

TEST_F(Constraint, RollbackRestoresEarlierMasks) {
  for (const Usable& u : usable()) {
    for (const std::string& input : u.c->valid) {
      const std::string at = where(u, input, Split::longest);
      std::vector<int32_t> tokens = vocab().tokenize(input, Split::longest, rng_);
      tokens.push_back(vocab().eos().front());
      Matcher m = Matcher::create(u.grammar.get());
      std::vector<Mask> masks;  // masks[i]: after i tokens
      for (const int32_t t : tokens) {
        masks.push_back(m.mask());
        if (!m.accept(t)) break;
      }
      masks.push_back(m.mask());
      if (masks.size() != tokens.size() + 1) continue;  // ValidInstances reports it
      const size_t n = tokens.size();
      EXPECT_EQ(m.rollback(n + 1), TSR_STATUS_INVALID_ARGUMENT) << at << ": rollback past the start";
      EXPECT_TRUE(m.terminated()) << at << ": a refused rollback changed the matcher";
      EXPECT_EQ(m.rollback(0), TSR_STATUS_OK) << at;
      EXPECT_EQ(m.rollback(1), TSR_STATUS_OK) << at << ": rollback of EOS";
      EXPECT_FALSE(m.terminated()) << at << ": still terminated after EOS was rolled back";
      EXPECT_TRUE(m.can_terminate()) << at << ": cannot end after EOS was rolled back";
      EXPECT_EQ(m.mask(), masks[n - 1]) << at << ": the mask after rolling back EOS";
      // Back to every earlier point, then forward again to the end.
      for (size_t back = 1; back < n; back = back * 2 + 1) {
        ASSERT_EQ(m.rollback(back), TSR_STATUS_OK) << at << ": rollback(" << back << ")";
        EXPECT_EQ(m.mask(), masks[n - 1 - back]) << at << ": the mask after rollback(" << back << ")";
        for (size_t i = n - 1 - back; i < n - 1; ++i) ASSERT_TRUE(m.accept(tokens[i])) << at << " replaying";
        EXPECT_EQ(m.mask(), masks[n - 1]) << at << ": the mask after replaying";
      }
      EXPECT_EQ(m.rollback(n - 1), TSR_STATUS_OK) << at << ": rollback to the start";
      EXPECT_EQ(m.mask(), masks[0]) << at << ": the mask at the start";
      EXPECT_EQ(m.rollback(1), TSR_STATUS_INVALID_ARGUMENT) << at << ": rollback(1) at the start";
    }
  }
}

TEST_F(Constraint, ForksAreIndependent) {
  for (const Usable& u : usable()) {
    const std::string& input = u.c->valid.front();
    const std::string at = where(u, input, Split::bytes);
    const std::vector<int32_t> tokens = vocab().tokenize(input, Split::bytes, rng_);
    const size_t half = tokens.size() / 2;
    std::optional<Matcher> m = Matcher::create(u.grammar.get());
    for (size_t i = 0; i < half; ++i) ASSERT_TRUE(m->accept(tokens[i])) << at;
    const Mask mid = m->mask();
    Matcher f = m->fork();
    for (size_t i = half; i < tokens.size(); ++i) ASSERT_TRUE(m->accept(tokens[i])) << at;
    ASSERT_TRUE(m->accept(vocab().eos().front())) << at;
    EXPECT_EQ(f.mask(), mid) << at << ": the original's progress moved the fork";
    EXPECT_FALSE(f.terminated()) << at << ": the original's EOS terminated the fork";
    EXPECT_EQ(f.rollback(half + 1), TSR_STATUS_INVALID_ARGUMENT) << at << ": the fork's history is too long";
    m.reset();  // the fork outlives its original
    for (size_t i = half; i < tokens.size(); ++i) ASSERT_TRUE(f.accept(tokens[i])) << at << " on the fork";
    EXPECT_TRUE(f.accept(vocab().eos().back())) << at << ": EOS on the fork";
    EXPECT_EQ(f.rollback(tokens.size() + 1), TSR_STATUS_OK) << at << ": the fork keeps the history before it";
    EXPECT_TRUE(f.accept(tokens.front())) << at;
  }
}

// constraint.h: a grammar may be destroyed before its matchers, a vocab before its grammars.
TEST_F(Constraint, ObjectsOutliveTheirParents) {
  for (const Usable& u : usable()) {
    const std::string at = u.kind + " " + escaped(u.c->text);
    tsr_constraint_vocab* v = nullptr;
    tsr_error* e = nullptr;
    check(table().vocab_create(&vocab().desc(), &v, &e), &e, "vocab_create");
    Grammar g;
    std::string message;
    const tsr_status status = compile(u.kind, u.c->text, g, message, v);
    table().vocab_destroy(v);
    ASSERT_EQ(status, TSR_STATUS_OK) << at << ": " << message;
    Matcher m = Matcher::create(g.get());
    g.reset();
    for (const int32_t t : vocab().tokenize(u.c->valid.front(), Split::longest, rng_)) {
      ASSERT_TRUE(m.accept(t)) << at << ": after its vocab and grammar were destroyed";
    }
    EXPECT_TRUE(checked_mask(m, at + " after its vocab and grammar were destroyed"));
    EXPECT_TRUE(m.can_terminate()) << at;
  }
}

// Random walks along the mask, with rollbacks: the generic check, also for unknown kinds.
TEST_F(Constraint, RandomWalksFollowTheMask) {
  for (const auto& [name, grammar] : walkable()) {
    for (int walk = 0; walk < 6; ++walk) {
      const std::string at = name + ", random walk " + std::to_string(walk);
      Matcher m = Matcher::create(grammar);
      std::vector<Mask> masks;
      for (int step = 0; step < 40 && !m.terminated(); ++step) {
        const auto mask = checked_mask(m, at + " step " + std::to_string(step));
        if (!mask) break;
        masks.push_back(*mask);
        if (step % 9 == 8) {  // undo a few steps now and then
          const size_t back = rng_() % masks.size();
          ASSERT_EQ(m.rollback(back), TSR_STATUS_OK) << at;
          masks.resize(masks.size() - back);
          EXPECT_EQ(m.mask(), masks.back()) << at << ": the mask after rollback(" << back << ")";
        }
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab().size(); ++id) {
          if (bit(masks.back(), id)) allowed.push_back(id);
        }
        if (allowed.empty()) break;
        const int32_t t = allowed[rng_() % allowed.size()];
        ASSERT_TRUE(m.accept(t)) << at << ": " << vocab().describe(t) << " allowed but refused";
      }
      if (m.terminated()) check_terminated(m, at);
    }
  }
}

TEST_F(Constraint, ForcedBytesAreForced) {
  if (table().matcher_forced_bytes == nullptr) GTEST_SKIP() << "matcher_forced_bytes is optional";
  for (const Usable& u : usable()) {
    for (const std::string& input : u.c->valid) {
      const std::string at = where(u, input, Split::bytes);
      Matcher m = Matcher::create(u.grammar.get());
      for (const int32_t token : vocab().tokenize(input, Split::bytes, rng_)) {
        const Mask before = m.mask();
        char buf[64];
        size_t len = 99;
        tsr_error* e = nullptr;
        check(table().matcher_forced_bytes(m.get(), buf, sizeof buf, &len, &e), &e, "forced_bytes");
        ASSERT_LE(len, sizeof buf) << at;
        EXPECT_EQ(m.mask(), before) << at << ": forced_bytes moved the matcher";
        if (len > 0) {
          EXPECT_FALSE(m.can_terminate()) << at << ": bytes forced where the output may end";
          Matcher f = m.fork();  // every forced byte is allowed in turn, and nothing else
          for (size_t i = 0; i < len; ++i) {
            const Mask fm = f.mask();
            const auto forced = static_cast<unsigned char>(buf[i]);
            for (int b = 0; b < 256; ++b) {
              EXPECT_EQ(bit(fm, vocab().byte_token(static_cast<unsigned char>(b))), b == forced)
                  << at << ": byte " << b << " with forced byte " << int(forced);
            }
            ASSERT_TRUE(f.accept(vocab().byte_token(forced))) << at;
          }
        }
        ASSERT_TRUE(m.accept(token)) << at;
        if (::testing::Test::HasFailure()) return;
      }
      size_t len = 99;
      tsr_error* e = nullptr;
      check(table().matcher_forced_bytes(m.get(), nullptr, 0, &len, &e), &e, "forced_bytes with capacity 0");
      EXPECT_EQ(len, 0u) << at << ": capacity 0";
    }
  }
}

TEST_F(Constraint, BadMatcherCallsFailCleanly) {
  const auto all = walkable();
  if (all.empty()) GTEST_SKIP() << "no constraint compiled";
  tsr_grammar* g = all.front().second;
  Matcher m = Matcher::create(g);
  const Mask start = m.mask();
  tsr_matcher* out = nullptr;
  refused("matcher_create NULL grammar",
          [&](tsr_error** e) { return table().matcher_create(nullptr, &out, e); });
  refused("matcher_create NULL out", [&](tsr_error** e) { return table().matcher_create(g, nullptr, e); });
  refused("matcher_fork NULL matcher", [&](tsr_error** e) { return table().matcher_fork(nullptr, &out, e); });
  refused("matcher_fork NULL out", [&](tsr_error** e) { return table().matcher_fork(m.get(), nullptr, e); });
  Mask words(vocab().mask_words());
  refused("fill_mask NULL matcher", [&](tsr_error** e) {
    return table().matcher_fill_mask(nullptr, words.data(), words.size(), e);
  });
  refused("fill_mask NULL bitmask", [&](tsr_error** e) {
    return table().matcher_fill_mask(m.get(), nullptr, words.size(), e);
  });
  refused("fill_mask one word short", [&](tsr_error** e) {
    return table().matcher_fill_mask(m.get(), words.data(), words.size() - 1, e);
  });
  refused("rollback NULL matcher", [&](tsr_error** e) { return table().matcher_rollback(nullptr, 0, e); });
  if (table().matcher_forced_bytes != nullptr) {
    char buf[8];
    refused("forced_bytes NULL len", [&](tsr_error** e) {
      return table().matcher_forced_bytes(m.get(), buf, sizeof buf, nullptr, e);
    });
  }
  EXPECT_EQ(table().matcher_accept(nullptr, 0), 0) << "accept on a NULL matcher";
  EXPECT_EQ(table().matcher_is_terminated(nullptr), 0) << "is_terminated on a NULL matcher";
  EXPECT_EQ(table().matcher_can_terminate(nullptr), 0) << "can_terminate on a NULL matcher";
  for (const int32_t t : {-1, vocab().size(), INT32_MAX, INT32_MIN}) {
    EXPECT_FALSE(m.accept(t)) << "accepted token id " << t << ", outside the vocabulary";
  }
  EXPECT_EQ(m.mask(), start) << "a refused call changed the matcher";
}

// One thread's share of ConcurrentCompilesAndMatchers: compiles every case (starting at
// a different one per thread) and runs a valid instance through it. Returns the problems.
std::string compile_and_match(tsr_constraint_vocab* v, const std::vector<Usable>& cases, size_t thread) {
  std::string errors;
  std::mt19937 rng(static_cast<uint32_t>(thread));
  for (size_t i = 0; i < cases.size(); ++i) {
    const Usable& u = cases[(i + thread) % cases.size()];
    const std::string at = u.kind + " " + escaped(u.c->text) + " on thread " + std::to_string(thread);
    tsr_grammar* g = nullptr;
    tsr_error* e = nullptr;
    const std::string& text = u.c->text;
    if (table().grammar_compile(v, u.kind.c_str(), text.data(), text.size(), &g, &e) != TSR_STATUS_OK) {
      errors += at + " did not compile: " + take_error(e) + "\n";
      continue;
    }
    Matcher m = Matcher::create(g);
    table().grammar_destroy(g);
    for (const int32_t token : vocab().tokenize(u.c->valid.back(), Split::random, rng)) {
      (void)m.mask();
      if (!m.accept(token)) errors += at + ": " + vocab().describe(token) + " refused\n";
    }
    if (!m.can_terminate()) errors += at + ": cannot end after a valid instance\n";
  }
  return errors;
}

// grammar_compile is thread-safe, and matchers of different grammars run concurrently.
TEST_F(Constraint, ConcurrentCompilesAndMatchers) {
  const std::vector<Usable>& cases = usable();
  if (cases.empty()) GTEST_SKIP() << "no case of a kind the kit knows compiled";
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < errors.size(); ++t) {
    threads.emplace_back([&, t] {
      try {
        errors[t] = compile_and_match(vocab_, cases, t);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace tsr::conformance
