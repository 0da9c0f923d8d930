// Greedy generation and logits against llama.cpp's references in ../shared/models.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>

#include "core/engine/engine.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

struct Case {
  const char* model;
  const char* reference;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model; }

class ReferenceTest : public ::testing::TestWithParam<Case> {};

std::unique_ptr<Engine> make_engine(const std::string& model_path) {
  Config c;
  c.model.path = model_path;
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.threads = 2;
  c.scheduler.max_seqs = 1;
  return Engine::create(c);
}

// Reference top-8 [id, logit] pairs at one position against our logits row.
void expect_top8(const nlohmann::json& ref, std::span<const float> logits, int position) {
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + 8, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (size_t k = 0; k < ref.size(); ++k) {
    const int32_t id = ref[k][0];
    const double value = ref[k][1];
    EXPECT_LE(std::abs(logits[id] - value), 1e-4 * std::max(1.0, std::abs(value)))
        << "position " << position << " id " << id;
    // Same order unless two reference logits are within 1e-5.
    const bool tie_prev = k > 0 && std::abs(double(ref[k - 1][1]) - value) < 1e-5;
    const bool tie_next = k + 1 < ref.size() && std::abs(double(ref[k + 1][1]) - value) < 1e-5;
    if (!tie_prev && !tie_next) {
      EXPECT_EQ(order[k], id) << "position " << position << " rank " << k;
    }
  }
}

TEST_P(ReferenceTest, GreedyIdsAndTopLogitsMatch) {
  TSR_REQUIRE_SHARED(GetParam().model);
  auto engine = make_engine(testing::shared_path(GetParam().model));
  for (const std::string& line : testing::read_lines(testing::shared_path(GetParam().reference))) {
    const auto ref = nlohmann::json::parse(line);
    const std::vector<int32_t> prompt_ids = ref["prompt_ids"];
    const std::vector<int32_t> expected = ref["greedy_ids"];
    EXPECT_EQ(engine->tokenizer().encode(ref["prompt"].get<std::string>(), true, false), prompt_ids);

    std::vector<std::vector<float>> first_rows;
    RequestParams p;
    p.prompt = prompt_ids;
    p.max_tokens = static_cast<int32_t>(expected.size());
    p.sampling.temperature = 0;
    p.ignore_eos = true;
    p.on_logits = [&](std::span<const float> row) {
      if (first_rows.size() < 4) first_rows.emplace_back(row.begin(), row.end());
    };
    const GenerateResult r = engine->generate(std::move(p));
    EXPECT_EQ(r.tokens, expected) << ref["prompt"];
    EXPECT_EQ(r.text, ref["greedy_text"].get<std::string>());
    ASSERT_EQ(first_rows.size(), 4u);
    for (int pos = 0; pos < 4; ++pos) expect_top8(ref["top8_first4"][pos], first_rows[pos], pos);
  }
}

INSTANTIATE_TEST_SUITE_P(
    SharedModels, ReferenceTest,
    ::testing::Values(Case{"models/stories260K.gguf", "models/reference/stories260K.ref.jsonl"},
                      Case{"models/llama-2-tiny-random.gguf", "models/reference/tiny-random.ref.jsonl"}),
    [](const auto& info) { return info.index == 0 ? "stories260K" : "tiny_random"; });

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The command line prints exactly the reference text (plus one newline) on stdout.
TEST(ReferenceCli, RunPrintsGreedyText) {
  TSR_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string refs = testing::shared_path("models/reference/stories260K.ref.jsonl");
  for (const std::string& line : testing::read_lines(refs)) {
    const auto ref = nlohmann::json::parse(line);
    const std::string cmd = std::string(TESSERA_BIN_DIR) + "/tessera run -m " +
                            testing::shared_path("models/stories260K.gguf") + " -p " +
                            shell_quote(ref["prompt"]) + " -n 200 --temp 0 --ignore-eos -t 1 2>/dev/null";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
    ASSERT_TRUE(pipe);
    std::string out;
    std::array<char, 4096> buf;
    for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), pipe.get())) > 0;) out.append(buf.data(), n);
    EXPECT_EQ(out, ref["greedy_text"].get<std::string>() + "\n") << ref["prompt"];
  }
}

}  // namespace
}  // namespace tsr
