// The compile cache against hostile constraints: costly compiles run beside cheap ones,
// each within its time budget, and the kept grammars within their byte bound. Uses the
// in-tree json_schema and regex plugins over a vocabulary of every string of one to three
// letters a-p (4,368 tokens), large enough for a mask walk to cost something.
#include "core/constraint/grammar_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "base/error.h"
#include "core/constraint/token_vocab.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/tokenizer/tokenizer.h"

namespace tsr {
namespace {

std::unique_ptr<Tokenizer> short_words() {
  Vocab v;
  v.model = "llama";
  std::vector<std::string> words{""};
  for (int len = 1; len <= 3; ++len) {
    std::vector<std::string> longer;
    for (const std::string& w : words) {
      for (char c = 'a'; c <= 'p'; ++c) longer.push_back(w + c);
    }
    v.tokens.insert(v.tokens.end(), longer.begin(), longer.end());
    words = std::move(longer);
  }
  v.types.assign(v.tokens.size(), TokenType::NORMAL);
  v.eos_id = static_cast<int32_t>(v.tokens.size());
  v.eog_ids = {v.eos_id};
  v.tokens.push_back("</s>");
  v.types.push_back(TokenType::CONTROL);
  v.add_bos = false;
  return Tokenizer::create(std::move(v));
}

std::vector<std::shared_ptr<ConstraintPlugin>> plugins() {
  const auto tokenizer = short_words();
  const TokenVocab vocab(*tokenizer);
  std::vector<std::shared_ptr<ConstraintPlugin>> out;
  for (const char* name : {"json_schema", "regex"}) {
    out.push_back(ConstraintPlugin::create(Plugin::find(TSR_PLUGIN_CONSTRAINT, name, {TESSERA_PLUGIN_DIR}), vocab));
  }
  return out;
}

GrammarCache::Limits limits(size_t workers, double timeout_s, size_t max_bytes = size_t{256} << 20) {
  GrammarCache::Limits l;
  l.workers = workers;
  l.compile_timeout_s = timeout_s;
  l.max_bytes = max_bytes;
  return l;
}

std::string compile_error(GrammarCache& cache, const ConstraintSpec& spec) {
  try {
    cache.get(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Whose every position is open in a thousand ways: its first mask alone takes seconds.
const ConstraintSpec kCostlyRegex{"regex", "(.*){1000}"};

ConstraintSpec enum_of(int n) {
  std::string s = R"({"enum":[)";
  for (int i = 0; i < n; ++i) s += (i ? ",\"item" : "\"item") + std::to_string(i) + "\"";
  return {"json_schema", s + "]}"};
}

TEST(GrammarCache, ACostlyRegexFailsWithinItsBudget) {
  GrammarCache cache(plugins(), limits(1, 0.2));
  const std::string error = compile_error(cache, kCostlyRegex);
  EXPECT_NE(error.find("exceeded its 0.2 s budget (constraints.compile_timeout)"), std::string::npos) << error;
  // The failure is cached: the second request gets it without a compile.
  EXPECT_EQ(compile_error(cache, kCostlyRegex), error);
  EXPECT_EQ(cache.misses(), 1u);
}

TEST(GrammarCache, DeepSchemaIsRefusedWhileParsed) {
  std::string schema;
  for (int i = 0; i < 10000; ++i) schema += R"({"type":"object","properties":{"a":)";
  schema += "{}" + std::string(20000, '}');
  GrammarCache cache(plugins(), limits(1, 0.5));
  const std::string error = compile_error(cache, {"json_schema", schema});
  EXPECT_NE(error.find("nested deeper than"), std::string::npos) << error;
}

// Each item used to be checked against the whole enum again: quadratic, 42 s for 100,000.
TEST(GrammarCache, LongEnumCompilesInLinearTime) {
  GrammarCache cache(plugins(), limits(1, 60));
  EXPECT_NE(cache.get(enum_of(100000)), nullptr);
}

TEST(GrammarCache, ACheapCompileIsNotDelayedByACostlyOne) {
  GrammarCache cache(plugins(), limits(2, 3600));
  std::atomic<bool> costly_done = false;
  cache.request(kCostlyRegex, [&](const GrammarCache::Result&) { costly_done = true; });
  // The costly compile is on the other worker now (or about to be); the cheap one must
  // not wait for it. The costly one takes seconds and is stopped by the destructor.
  EXPECT_NE(cache.get({"json_object", ""}), nullptr);
  EXPECT_FALSE(costly_done);
}

TEST(GrammarCache, KeepsTheGrammarsWithinTheByteBound) {
  const size_t bound = size_t{1} << 20;
  GrammarCache cache(plugins(), limits(2, 60, bound));
  size_t largest = 0;
  for (int n = 1; n <= 40; ++n) {
    cache.get(enum_of(200 * n));
    EXPECT_LE(cache.bytes(), bound);
    largest = std::max(largest, cache.bytes());
  }
  EXPECT_GT(largest, 0u);
  EXPECT_LT(cache.entries(), 40u);  // some were evicted
  // A grammar larger than the whole bound is delivered, not kept.
  GrammarCache tiny(plugins(), limits(1, 60, 1024));
  EXPECT_NE(tiny.get(enum_of(1000)), nullptr);
  EXPECT_EQ(tiny.entries(), 0u);
  EXPECT_EQ(tiny.bytes(), 0u);
}

}  // namespace
}  // namespace tsr
