// Constrained decoding end to end, through the engine and the constraint plugins:
//  - 200 sampled generations under 20 real schemas from ../shared/maskbench/dev on each
//    shared model; every one that stops is valid JSON that an independent validator
//    (valijson) accepts;
//  - regex and GBNF outputs are in their language (checked with std::regex);
//  - constraint + n-gram speculation gives the same greedy output as the constraint alone;
//  - a constraint that does not compile fails its request naming the feature; an unknown
//    kind is refused at submit.
#include <gtest/gtest.h>

// valijson reports what it cannot handle (e.g. remote $refs) by exception, not abort().
#define VALIJSON_USE_EXCEPTIONS 1
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <mutex>
#include <regex>
#include <thread>

#include "core/engine/engine.h"
#include "base/error.h"
#include "tests/common/eagle_heads.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

using Json = nlohmann::json;

Config config(const std::string& model, const std::string& spec_method = "none") {
  Config c;
  c.model.path = testing::shared_path(model);
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.threads = 1;
  c.scheduler.max_seqs = 64;
  c.scheduler.max_batch_tokens = 4096;
  c.speculative.method = spec_method;
  c.speculative.adaptive = false;
  return c;
}

RequestParams constrained(Engine& engine, const std::string& prompt, std::string kind,
                          std::string text, int32_t max_tokens, float temperature, uint64_t seed) {
  RequestParams p;
  p.prompt = engine.tokenize(prompt);
  p.max_tokens = std::min(max_tokens, engine.context_length() - static_cast<int32_t>(p.prompt.size()));
  p.sampling.temperature = temperature;
  p.seed = seed;
  p.constraint = ConstraintSpec{std::move(kind), std::move(text)};
  return p;
}

std::vector<GenerateResult> run_all(Engine& engine, std::vector<RequestParams> batch) {
  std::vector<GenerateResult> out(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    engine.submit(std::move(batch[i]), [&out, i](const RequestOutput& o) {
      GenerateResult& r = out[i];
      r.tokens.insert(r.tokens.end(), o.tokens.begin(), o.tokens.end());
      r.text += o.text;
      if (o.finished) {
        r.finish_reason = o.finish_reason;
        r.error = o.error;
        r.stats = o.stats;
      }
    });
  }
  while (engine.step()) {
  }
  return out;
}

// A schema with its valijson form; NULL when valijson itself cannot take it.
struct Schema {
  std::string name;
  Json json;
  std::shared_ptr<valijson::Schema> checker;
};

std::shared_ptr<valijson::Schema> valijson_schema(const Json& schema) {
  try {
    auto out = std::make_shared<valijson::Schema>();
    valijson::SchemaParser parser;
    valijson::adapters::NlohmannJsonAdapter adapter(schema);
    parser.populateSchema(adapter, *out);
    return out;
  } catch (const std::exception&) {
    return nullptr;
  }
}

bool validates(const valijson::Schema& schema, const Json& doc) {
  valijson::Validator validator;
  valijson::adapters::NlohmannJsonAdapter adapter(doc);
  return validator.validate(schema, adapter, nullptr);
}

// 20 schemas spread over the dev set (every 61st file in name order) that valijson takes;
// those Tessera refuses are replaced by the next candidate when generating.
std::vector<Schema> dev_schemas() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(testing::shared_path("maskbench/dev"))) {
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Schema> out;
  for (size_t i = 0; i < files.size(); i += 61) {
    std::ifstream in(files[i]);
    Json file = Json::parse(in);
    auto checker = valijson_schema(file["schema"]);
    if (checker) out.push_back({files[i].filename().string(), file["schema"], checker});
  }
  return out;
}

class ConstrainedJson : public ::testing::TestWithParam<const char*> {};

TEST_P(ConstrainedJson, EveryStoppedGenerationValidates) {
  TSR_REQUIRE_SHARED(GetParam());
  TSR_REQUIRE_SHARED("maskbench/dev");
  auto engine = Engine::create(config(GetParam()));
  const std::vector<Schema> candidates = dev_schemas();
  constexpr size_t kSchemas = 20, kPerSchema = 10;
  std::vector<const Schema*> used;
  std::vector<GenerateResult> results;
  for (const Schema& s : candidates) {
    if (used.size() == kSchemas) break;
    std::vector<RequestParams> batch;
    for (uint64_t seed = 0; seed < kPerSchema; ++seed) {
      batch.push_back(constrained(*engine, "Once upon a time", "json_schema", s.json.dump(), 512, 1.0f, seed));
    }
    std::vector<GenerateResult> out = run_all(*engine, std::move(batch));
    if (out[0].finish_reason == TSR_FINISH_ERROR) {
      // Refused at compile time: the reason names the feature, and no request ran.
      EXPECT_NE(out[0].error.find("unsupported"), std::string::npos) << s.name << ": " << out[0].error;
      for (const GenerateResult& r : out) EXPECT_TRUE(r.tokens.empty());
      continue;
    }
    used.push_back(&s);
    for (GenerateResult& r : out) results.push_back(std::move(r));
  }
  ASSERT_EQ(used.size(), kSchemas);
  size_t stopped = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const GenerateResult& r = results[i];
    const Schema& s = *used[i / kPerSchema];
    ASSERT_NE(r.finish_reason, TSR_FINISH_ERROR) << s.name << ": " << r.error;
    if (r.finish_reason != TSR_FINISH_STOP) continue;
    ++stopped;
    Json doc;
    ASSERT_NO_THROW(doc = Json::parse(r.text)) << s.name << ": " << r.text;
    EXPECT_TRUE(validates(*s.checker, doc)) << s.name << ": " << r.text;
  }
  EXPECT_GT(stopped, 0u);
  std::printf("[ stats    ] %s: %zu of %zu generations under %zu schemas stopped; all validate\n",
              GetParam(), stopped, results.size(), kSchemas);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, ConstrainedJson,
                         ::testing::Values("models/stories260K.gguf", "models/llama-2-tiny-random.gguf"),
                         [](const auto& info) {
                           return std::string(info.index == 0 ? "stories260K" : "tiny_random");
                         });

constexpr const char* kStories = "models/stories260K.gguf";

TEST(Constrained, RegexOutputsMatch) {
  TSR_REQUIRE_SHARED(kStories);
  auto engine = Engine::create(config(kStories));
  const std::string pattern = R"((cat|dog|bird) [a-z]{2,8}( [a-z]{1,8}){0,3}\. [0-9]{1,3}!)";
  std::vector<RequestParams> batch;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    batch.push_back(constrained(*engine, "Once upon a time", "regex", pattern, 128, 1.0f, seed));
  }
  const std::regex check(pattern);
  size_t stopped = 0;
  for (const GenerateResult& r : run_all(*engine, std::move(batch))) {
    ASSERT_NE(r.finish_reason, TSR_FINISH_ERROR) << r.error;
    if (r.finish_reason != TSR_FINISH_STOP) continue;
    ++stopped;
    EXPECT_TRUE(std::regex_match(r.text, check)) << r.text;
  }
  EXPECT_GT(stopped, 8u);
}

TEST(Constrained, GbnfOutputsMatch) {
  TSR_REQUIRE_SHARED(kStories);
  auto engine = Engine::create(config(kStories));
  const std::string grammar = R"(root ::= sentence (" " sentence)?
sentence ::= "The " animal " is " [a-z]+ "."
animal ::= "cat" | "dog" | "big " animal)";
  const std::regex check(R"(The (big )*(cat|dog) is [a-z]+\.( The (big )*(cat|dog) is [a-z]+\.)?)");
  std::vector<RequestParams> batch;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    batch.push_back(constrained(*engine, "Once upon a time", "gbnf", grammar, 128, 1.0f, seed));
  }
  size_t stopped = 0;
  for (const GenerateResult& r : run_all(*engine, std::move(batch))) {
    ASSERT_NE(r.finish_reason, TSR_FINISH_ERROR) << r.error;
    if (r.finish_reason != TSR_FINISH_STOP) continue;
    ++stopped;
    EXPECT_TRUE(std::regex_match(r.text, check)) << r.text;
  }
  EXPECT_GT(stopped, 8u);
}

TEST(Constrained, SpeculationKeepsGreedyOutput) {
  TSR_REQUIRE_SHARED(kStories);
  // Repetitive structure gives the n-gram and suffix drafts something to propose; the
  // draft model (the target itself) proposes for all requests in batched passes.
  const std::string schema = R"({"type": "object", "properties": {"items": {"type": "array",
    "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"}}, "required": ["name", "age"]}, "minItems": 6, "maxItems": 8}},
    "required": ["items"]})";
  const std::vector<std::string> prompts = {"Once upon a time", "Tom and Lily", "The dog"};
  auto make = [&](Engine& e) {
    std::vector<RequestParams> batch;
    for (const std::string& p : prompts) batch.push_back(constrained(e, p, "json_schema", schema, 400, 0.0f, 0));
    batch.push_back(constrained(e, "Once upon a time", "regex", "(ab|cd)+e", 60, 0.0f, 0));
    return batch;
  };
  auto plain = Engine::create(config(kStories));
  const auto expected = run_all(*plain, make(*plain));
  const std::string head = ::testing::TempDir() + "/constrained_eagle_head.gguf";
  testing::write_trained_head(testing::shared_path(kStories), head, 12, 3);  // small: any acceptance will do
  for (const char* method : {"ngram", "suffix", "draft_model", "eagle"}) {
    Config c = config(kStories, method);
    // A self-draft (batched draft passes), or a head trained briefly.
    c.speculative.draft_model = std::string(method) == "eagle" ? head : testing::shared_path(kStories);
    auto spec = Engine::create(c);
    const auto got = run_all(*spec, make(*spec));
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NE(expected[i].finish_reason, TSR_FINISH_ERROR) << expected[i].error;
      EXPECT_EQ(got[i].tokens, expected[i].tokens) << method << ", request " << i;
      EXPECT_EQ(got[i].text, expected[i].text);
    }
    const EngineStats s = spec->stats();
    EXPECT_GT(s.draft_tokens, 0) << method;
    EXPECT_GT(s.accepted_tokens, 0) << method;
  }
}

// A lazy constraint (tool_choice "auto"'s) leaves the output free until the output spells
// its trigger, then constrains what follows: greedy text up to the trigger, the regex's
// language after it. Without the trigger in the output, nothing changes; speculation
// changes neither.
TEST(Constrained, LazyConstraintStartsAtItsTrigger) {
  TSR_REQUIRE_SHARED(kStories);
  const auto request = [](Engine& e, const std::string& trigger) {
    RequestParams p = constrained(e, "Once upon a time", "regex", "( [0-9]){3}", 40, 0.0f, 0);
    p.constraint_trigger = trigger;
    return p;
  };
  auto plain = Engine::create(config(kStories));
  RequestParams free = request(*plain, "");
  free.constraint.reset();
  const GenerateResult unconstrained = plain->generate(free);
  const std::string trigger = " girl";
  const size_t at = unconstrained.text.find(trigger);
  ASSERT_NE(at, std::string::npos) << unconstrained.text;
  for (const char* method : {"none", "ngram"}) {
    auto engine = Engine::create(config(kStories, method));
    const GenerateResult lazy = engine->generate(request(*engine, trigger));
    ASSERT_EQ(lazy.finish_reason, TSR_FINISH_STOP) << method << ": " << lazy.error << " " << lazy.text;
    const std::string prefix = unconstrained.text.substr(0, at + trigger.size());
    EXPECT_EQ(lazy.text.substr(0, prefix.size()), prefix) << method;
    EXPECT_TRUE(std::regex_match(lazy.text.substr(prefix.size()), std::regex("( [0-9]){3}"))) << method << ": " << lazy.text;
    const GenerateResult never = engine->generate(request(*engine, "zebra"));
    EXPECT_EQ(never.tokens, unconstrained.tokens) << method;
  }
}

TEST(Constrained, CompileFailureFailsTheRequestNamingTheFeature) {
  TSR_REQUIRE_SHARED(kStories);
  auto engine = Engine::create(config(kStories));
  const auto out = run_all(*engine, {
      constrained(*engine, "Once", "json_schema", R"({"type": "object", "patternProperties": {"^a": {}}})", 16, 0, 0),
      constrained(*engine, "Once", "json_schema", R"({"type": )", 16, 0, 0),
      constrained(*engine, "Once", "regex", "(?=a)b", 16, 0, 0),
      constrained(*engine, "Once", "gbnf", "root ::= undefined_rule", 16, 0, 0),
  });
  const char* expected[] = {"patternProperties", "JSON", "lookaround", "undefined_rule"};
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].finish_reason, TSR_FINISH_ERROR) << i;
    EXPECT_TRUE(out[i].tokens.empty());
    EXPECT_NE(out[i].error.find(expected[i]), std::string::npos) << out[i].error;
  }
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

// A request whose deadline passes while its constraint compiles finishes as "length", and
// the background thread goes on serving (it no longer counts the request as compiling,
// which would leave it asleep with work to do).
TEST(Constrained, DeadlineWhileCompilingKeepsTheEngineServing) {
  TSR_REQUIRE_SHARED(kStories);
  auto engine = Engine::create(config(kStories));
  engine->start();
  for (int i = 0; i < 3; ++i) {
    RequestParams p = constrained(*engine, "Once", "regex", "(a|b){" + std::to_string(i + 1) + "}z", 8, 0, 0);
    p.timeout_ms = 0;
    EXPECT_EQ(engine->generate(std::move(p)).finish_reason, TSR_FINISH_LENGTH);
  }
  RequestParams plain;
  plain.prompt = engine->tokenize("Once upon a time");
  plain.max_tokens = 24;
  plain.sampling.temperature = 0;
  plain.ignore_eos = true;
  std::atomic<bool> done{false};
  engine->submit(std::move(plain), [&](const RequestOutput& out) { done = done || out.finished; });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(done) << "the engine stopped stepping";
  engine->stop();
}

TEST(Constrained, UnknownKindIsRefusedAtSubmit) {
  TSR_REQUIRE_SHARED(kStories);
  auto engine = Engine::create(config(kStories));
  try {
    engine->submit(constrained(*engine, "Once", "xml_schema", "<x/>", 8, 0, 0), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("xml_schema"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("json_schema"), std::string::npos) << e.what();
  }
}

TEST(Constrained, CompiledGrammarsAreSharedAndJsonObjectIsAnyObject) {
  TSR_REQUIRE_SHARED(kStories);
  auto engine = Engine::create(config(kStories));
  std::vector<RequestParams> batch;
  // A story model writes stories inside strings; favouring the characters that close
  // strings and objects lets most generations finish well within the limit.
  std::vector<LogitBias> bias;
  for (int32_t id = 0; id < engine->tokenizer().n_tokens(); ++id) {
    const std::string piece = engine->tokenizer().token_to_piece(id, true);
    if (piece.find_first_of("\"}") != std::string::npos) bias.push_back({id, 6.0f});
  }
  ASSERT_FALSE(bias.empty());
  for (uint64_t seed = 0; seed < 16; ++seed) {
    batch.push_back(constrained(*engine, "Once upon a time", "json_object", "", 512, 1.0f, seed));
    batch.back().sampling.logit_bias = bias;
  }
  size_t stopped = 0;
  for (const GenerateResult& r : run_all(*engine, std::move(batch))) {
    ASSERT_NE(r.finish_reason, TSR_FINISH_ERROR) << r.error;
    if (r.finish_reason != TSR_FINISH_STOP) continue;
    ++stopped;
    Json doc;
    ASSERT_NO_THROW(doc = Json::parse(r.text)) << r.text;
    EXPECT_TRUE(doc.is_object()) << r.text;
  }
  EXPECT_GT(stopped, 0u);
  const EngineStats s = engine->stats();
  EXPECT_EQ(s.constraint_compiles, 1);
  EXPECT_EQ(s.constraint_cache_hits, 15);
}

// The compile worker, the step thread and client threads together (run under TSan in CI):
// constrained requests, some cancelled while compiling or running, beside plain ones.
TEST(Constrained, BackgroundThreadCompilesWhileOthersRun) {
  TSR_REQUIRE_SHARED(kStories);
  auto engine = Engine::create(config(kStories));
  engine->start();
  std::atomic<int> ok{0}, aborted{0};
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> stopped;  // (pattern, text), checked after
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        // Distinct regexes: every client compiles something new.
        const std::string pattern = "(x|y){" + std::to_string(t + 1) + "}[a-z ]{" + std::to_string(i + 2) + ",40}\\.";
        RequestParams p = constrained(*engine, "Once upon a time", "regex", pattern, 64, 1.0f, t * 10 + i);
        if (i == 1) {
          std::atomic<bool> done{false};
          const RequestId id = engine->submit(std::move(p), [&](const RequestOutput& out) {
            if (out.finished) {
              if (out.finish_reason == TSR_FINISH_ABORT) ++aborted;
              done = true;
            }
          });
          engine->cancel(id);
          while (!done) std::this_thread::yield();
        } else {
          const GenerateResult r = engine->generate(std::move(p));
          EXPECT_NE(r.finish_reason, TSR_FINISH_ERROR) << r.error;
          if (r.finish_reason == TSR_FINISH_STOP) {
            std::lock_guard lock(mutex);  // std::regex is checked on the main thread
            stopped.emplace_back(pattern, r.text);
          }
          ++ok;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  engine->stop();
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(aborted, 4);
  for (const auto& [pattern, text] : stopped) EXPECT_TRUE(std::regex_match(text, std::regex(pattern))) << text;
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

}  // namespace
}  // namespace tsr
