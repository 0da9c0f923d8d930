// Plugins built against the headers of every kept minor (plugin_api/compat/1.0 … 1.4, 2.0)
// load into today's 2.x host through the core's loader (backends behind its adapter) and
// work, to the reference text; a plugin built for a newer minor than the host is refused
// with a message naming both versions; so are constraint and quant plugins claiming 1.0,
// before their kinds existed.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/engine/engine.h"
#include "base/error.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/plugin_host/tensor.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

TEST(Compat, BackendBuiltAgainst1_0LoadsAndRuns) {
  auto plugin = Plugin::load(COMPAT_DIR "/libtessera_backend_example.so", TSR_PLUGIN_BACKEND, "example");
  EXPECT_EQ(plugin->desc().abi_major, 1u);
  EXPECT_EQ(plugin->desc().abi_minor, 0u);
  auto backend = Backend::create(plugin, 0, 1);
  auto buffer = backend->alloc(16);
  const char data[16] = "abi 1.0 plugin";
  char back[16] = {};
  backend->write(*buffer, 0, data, sizeof(data));
  backend->read(*buffer, 0, back, sizeof(back));
  EXPECT_STREQ(back, data);
}

// A 1.3 backend reads the shorter tsr_rope_params: the host never hands it frequency
// factors it would skip, and says which ABI it lacks.
TEST(Compat, BackendBuiltAgainst1_3IsNotGivenRopeFactors) {
  auto plugin = Plugin::load(COMPAT_1_3_DIR "/libtessera_backend_example.so", TSR_PLUGIN_BACKEND, "example");
  EXPECT_EQ(plugin->desc().abi_minor, 3u);
  auto backend = Backend::create(plugin, 0, 1);
  EXPECT_FALSE(backend->has_rope_freq_factors());
  auto buffer = backend->alloc(64);
  tsr_tensor x = tensor_make(TSR_DTYPE_F32, buffer->base(), {1, 1, 4});
  tsr_tensor pos = tensor_make(TSR_DTYPE_I32, buffer->base() + 16, {1});
  tsr_tensor factors = tensor_make(TSR_DTYPE_F32, buffer->base() + 32, {2});
  backend->rope({sizeof(tsr_rope_params), &x, &pos, 4, TSR_ROPE_NORMAL, 10000, 1, nullptr});
  try {
    backend->rope({sizeof(tsr_rope_params), &x, &pos, 4, TSR_ROPE_NORMAL, 10000, 1, &factors});
    ADD_FAILURE() << "a 1.3 backend was given rope factors";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("built for ABI 1.3, which has no RoPE frequency factors"), std::string::npos)
        << e.what();
  }
}

// The example backend of each kept minor (1.x behind the host's adapter) generates
// llama.cpp's greedy text for stories260K (the ops, graphs and packing where its minor has
// them; the first reference prompt).
class CompatGeneration : public ::testing::TestWithParam<const char*> {};

TEST_P(CompatGeneration, GeneratesTheReferenceText) {
  TSR_REQUIRE_SHARED("models/stories260K.gguf");
  Config c;
  c.model.path = testing::shared_path("models/stories260K.gguf");
  c.plugin_dir = std::string(COMPAT_ROOT "/compat_") + GetParam();
  c.backend.plugin = "example";
  c.backend.threads = 1;
  c.scheduler.max_seqs = 1;
  auto engine = Engine::create(c);
  const auto lines = testing::read_lines(testing::shared_path("models/reference/stories260K.ref.jsonl"));
  ASSERT_FALSE(lines.empty());
  const auto ref = nlohmann::json::parse(lines.front());
  RequestParams p;
  p.prompt = ref["prompt_ids"].get<std::vector<int32_t>>();
  p.max_tokens = static_cast<int32_t>(ref["greedy_ids"].size());
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  const GenerateResult r = engine->generate(std::move(p));
  EXPECT_EQ(r.tokens, ref["greedy_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(r.text, ref["greedy_text"].get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(KeptMinors, CompatGeneration, ::testing::Values("1_0", "1_1", "1_2", "1_3", "1_4", "2_0"),
                         [](const auto& info) { return std::string("abi_") + info.param; });

TEST(Compat, DraftBuiltAgainst1_0Loads) {
  auto plugin = Plugin::load(COMPAT_DIR "/libtessera_draft_example.so", TSR_PLUGIN_DRAFT, "example");
  EXPECT_EQ(plugin->desc().abi_minor, 0u);
}

TEST(Compat, NewerMinorIsRefusedNamingBothVersions) {
  const std::string host = std::to_string(TSR_ABI_MAJOR) + "." + std::to_string(TSR_ABI_MINOR);
  const std::string newer = std::to_string(TSR_ABI_MAJOR) + "." + std::to_string(TSR_ABI_MINOR + 1);
  try {
    Plugin::load(BROKEN_PLUGIN_DIR "/libtessera_backend_broken_newer_minor.so", TSR_PLUGIN_BACKEND,
                 "broken_newer_minor");
    FAIL() << "a newer-minor plugin was loaded";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("ABI " + newer), std::string::npos) << message;
    EXPECT_NE(message.find("ABI " + host), std::string::npos) << message;
  }
}

TEST(Compat, ConstraintAndQuantPluginsClaiming1_0AreRefused) {
  for (const auto& [kind, name] :
       {std::pair{TSR_PLUGIN_CONSTRAINT, "constraint"}, std::pair{TSR_PLUGIN_QUANT, "quant"}}) {
    try {
      Plugin::load(std::string(CLAIMS_1_0_DIR "/libtessera_") + name + "_claims_1_0.so", kind, "claims_1_0");
      ADD_FAILURE() << "a " << name << " plugin claiming ABI 1.0 was loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(name) + " plugins need ABI 1.1"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tsr
