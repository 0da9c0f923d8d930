// The host refuses each kind of broken plugin with a message naming the file and reason.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/quant/quant_scheme.h"
#include "core/spec/draft_client.h"
#include "tessera/engine.h"

namespace tsr {
namespace {

struct Refusal {
  const char* variant;
  std::string expected;  // substring of the error message
  tsr_status status;
};

std::string abi(int major, int minor) { return std::to_string(major) + "." + std::to_string(minor); }
const std::string kHost = abi(TSR_ABI_MAJOR, TSR_ABI_MINOR);

void PrintTo(const Refusal& r, std::ostream* os) { *os << r.variant; }

class BrokenPluginTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(BrokenPluginTest, IsRefusedWithReason) {
  const std::string name = std::string("broken_") + GetParam().variant;
  try {
    Plugin::find(TSR_PLUGIN_BACKEND, name, {BROKEN_PLUGIN_DIR});
    FAIL() << "plugin " << name << " was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("libtessera_backend_" + name + ".so"), std::string::npos) << msg;
    EXPECT_NE(msg.find(GetParam().expected), std::string::npos) << msg;
    EXPECT_EQ(e.status(), GetParam().status) << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Abi, BrokenPluginTest,
    ::testing::Values(
        Refusal{"major", "built for ABI " + abi(TSR_ABI_MAJOR + 1, TSR_ABI_MINOR) +
                             ", this host has ABI " + kHost, TSR_STATUS_ABI_MISMATCH},
        Refusal{"newer_minor", "built for ABI " + abi(TSR_ABI_MAJOR, TSR_ABI_MINOR + 1) +
                                   ", newer than this host's ABI " + kHost,
                TSR_STATUS_ABI_MISMATCH},
        Refusal{"small_desc", "descriptor is 8 bytes, smaller than", TSR_STATUS_ABI_MISMATCH},
        Refusal{"small_table", "backend table is 16 bytes, smaller than", TSR_STATUS_ABI_MISMATCH},
        Refusal{"missing_entry", "required entry 'enqueue' is NULL", TSR_STATUS_ABI_MISMATCH},
        Refusal{"null_table", "function table is NULL", TSR_STATUS_ABI_MISMATCH},
        Refusal{"no_symbol", "does not export tsr_plugin_query", TSR_STATUS_ABI_MISMATCH},
        Refusal{"declines", "declined to serve this host", TSR_STATUS_ABI_MISMATCH},
        Refusal{"wrong_kind", "is a quant plugin, expected backend", TSR_STATUS_ABI_MISMATCH},
        Refusal{"wrong_name", "calls itself 'somebody_else'", TSR_STATUS_ABI_MISMATCH},
        Refusal{"partial_graphs", "graph entries are incomplete", TSR_STATUS_ABI_MISMATCH}),
    [](const auto& info) { return std::string(info.param.variant); });

// A quant plugin whose dtype tag promises a layout its rows do not have is refused before a
// backend could address them by the tag (reading past its buffers).
TEST(PluginLoader, QuantDtypeMustMatchItsRows) {
  const std::pair<const char*, const char*> cases[] = {
      {"broken_geometry", "rows of 64 elements take 34 bytes, the type's layout 68"},
      {"broken_dtype", "not a weight format"},
  };
  for (const auto& [name, expected] : cases) {
    try {
      QuantScheme scheme(Plugin::find(TSR_PLUGIN_QUANT, name, {BROKEN_PLUGIN_DIR}));
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(e.status(), TSR_STATUS_ABI_MISMATCH);
    }
  }
}

// A draft declaring a need the host does not serve is refused before draft_create (which
// these plugins fail with an INTERNAL error, so reaching it shows as a different message).
TEST(PluginLoader, DraftNeedsTheHostCannotServeAreRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"broken_hidden_needs", "needs the target's hidden states (TSR_DRAFT_NEEDS_HIDDEN)"},
      {"broken_unknown_needs", "declares needs flags 0x100 that this host does not know"},
  };
  for (const auto& [name, expected] : cases) {
    try {
      DraftClient draft(Plugin::find(TSR_PLUGIN_DRAFT, name, {BROKEN_PLUGIN_DIR}), SpeculativeConfig{}, {"a", "b"},
                        DraftClient::TargetShape{}, nullptr, 1);
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(e.status(), TSR_STATUS_UNSUPPORTED);
    }
  }
}

TEST(PluginLoader, MissingPluginNamesFileAndDirectories) {
  try {
    Plugin::find(TSR_PLUGIN_BACKEND, "nonexistent", {BROKEN_PLUGIN_DIR, "/nowhere"});
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("libtessera_backend_nonexistent.so"), std::string::npos) << msg;
    EXPECT_NE(msg.find("/nowhere"), std::string::npos) << msg;
    EXPECT_EQ(e.status(), TSR_STATUS_NOT_FOUND);
  }
}

TEST(PluginLoader, NotASharedLibraryIsRefused) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "fake_plugins";
  std::filesystem::create_directories(dir);
  const auto file = dir / "libtessera_backend_fake.so";
  {
    std::ofstream f(file);
    for (int i = 0; i < 16; ++i) f << "not an ELF file\n";
  }
  try {
    Plugin::find(TSR_PLUGIN_BACKEND, "fake", {dir});
    FAIL();
  } catch (const Error& e) {
    // The dynamic loader's own words, not Boost's "Bad file descriptor".
    EXPECT_NE(std::string(e.what()).find("could not be loaded"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("invalid ELF header"), std::string::npos) << e.what();
  }
}

TEST(PluginLoader, RealCpuBackendLoads) {
  auto plugin = Plugin::find(TSR_PLUGIN_BACKEND, "cpu", {TESSERA_PLUGIN_DIR});
  EXPECT_EQ(plugin->name(), "cpu");
  EXPECT_EQ(plugin->desc().abi_major, TSR_ABI_MAJOR);
}

TEST(PluginLoader, SearchOrderConfigThenEnvThenExecutable) {
  ::setenv("TESSERA_PLUGIN_PATH", "/env/a:/env/b", 1);
  const auto dirs = plugin_search_dirs("/from/config");
  ::unsetenv("TESSERA_PLUGIN_PATH");
  ASSERT_EQ(dirs.size(), 6u);
  EXPECT_EQ(dirs[0], "/from/config");
  EXPECT_EQ(dirs[1], "/env/a");
  EXPECT_EQ(dirs[2], "/env/b");
  // Beside this test executable (in <build>/tests): <build>/<libdir>/tessera, the build's
  // plugin directory, then ./tessera for a library; last the install prefix's.
  EXPECT_EQ(std::filesystem::weakly_canonical(dirs[3]), std::filesystem::weakly_canonical(TESSERA_PLUGIN_DIR));
  EXPECT_EQ(dirs[4].filename(), "tessera");
  EXPECT_EQ(dirs[5].filename(), "tessera");
}

// A plugin_dir that is not there is refused, naming it, rather than searched past.
TEST(PluginLoader, MissingPluginDirIsRefused) {
  const std::string toml = "plugin_dir = \"/nowhere/plugins\"\n[model]\npath = \"/dev/null\"\n";
  tsr_engine_params params = tsr_engine_default_params();
  params.config_toml = toml.c_str();
  tsr_engine* engine = nullptr;
  tsr_error* error = nullptr;
  EXPECT_EQ(tsr_engine_create(&params, &engine, &error), TSR_STATUS_NOT_FOUND);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(tsr_error_message(error)).find("plugin_dir '/nowhere/plugins' is not a directory"),
            std::string::npos)
      << tsr_error_message(error);
  tsr_error_free(error);
}

// Through the public C API: the engine refuses the plugin and says why.
TEST(PluginLoader, EngineCreateReportsBrokenBackend) {
  const std::string toml = "plugin_dir = \"" BROKEN_PLUGIN_DIR "\"\n"
                           "[model]\npath = \"/dev/null\"\n"
                           "[backend]\nplugin = \"broken_major\"\n";
  tsr_engine_params params = tsr_engine_default_params();
  params.config_toml = toml.c_str();
  tsr_engine* engine = nullptr;
  tsr_error* error = nullptr;
  EXPECT_EQ(tsr_engine_create(&params, &engine, &error), TSR_STATUS_ABI_MISMATCH);
  EXPECT_EQ(engine, nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(tsr_error_message(error)).find("ABI " + abi(TSR_ABI_MAJOR + 1, TSR_ABI_MINOR)), std::string::npos)
      << tsr_error_message(error);
  tsr_error_free(error);
}

}  // namespace
}  // namespace tsr
