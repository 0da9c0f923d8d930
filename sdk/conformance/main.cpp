// tessera-conformance PLUGIN.so [--reference BACKEND.so] [gtest flags]
//
// Loads the plugin as the host would, then runs the checks for its kind: Abi.* for every
// plugin, Backend*.*, Draft*.*, Constraint*.* or Quant*.*. Exit status 0 when every check
// passes; a plugin the loader refuses exits 1 with the reason (e.g. a newer ABI minor,
// naming both versions).
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include "conformance.h"

namespace tsr::conformance {
namespace {

std::optional<LoadedPlugin> g_plugin;
std::optional<LoadedPlugin> g_reference;

int usage() {
  std::fprintf(stderr, "usage: tessera-conformance PLUGIN.so [--reference BACKEND.so] [gtest flags]\n");
  return 2;
}

// Runs only the suites of the plugin's kind: a filter the user gives narrows them further
// (the other kinds' suites are excluded from it, since they would read the plugin's table
// as theirs).
void select_suites(tsr_plugin_kind kind) {
  const char* own = kind == TSR_PLUGIN_BACKEND      ? "Backend"
                    : kind == TSR_PLUGIN_DRAFT      ? "Draft"
                    : kind == TSR_PLUGIN_CONSTRAINT ? "Constraint"
                    : kind == TSR_PLUGIN_QUANT      ? "Quant"
                                                    : "";
  std::string others;
  for (const char* suite : {"Backend", "Draft", "Constraint", "Quant"}) {
    if (std::string(suite) != own) others += std::string(others.empty() ? "" : ":") + "*" + suite + "*";
  }
  std::string& filter = ::testing::GTEST_FLAG(filter);
  if (filter == "*") {
    filter = *own ? std::string("Abi*:") + own + "*" : "Abi*";
  } else {
    filter += (filter.find('-') == std::string::npos ? "-" : ":") + others;
  }
}

}  // namespace

const LoadedPlugin& plugin() { return *g_plugin; }
const LoadedPlugin* reference() { return g_reference ? &*g_reference : nullptr; }

}  // namespace tsr::conformance

int main(int argc, char** argv) {
  using namespace tsr::conformance;
  ::testing::InitGoogleTest(&argc, argv);  // removes the gtest flags it knows
  std::string path, ref;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reference" && i + 1 < argc) {
      ref = argv[++i];
    } else if (path.empty() && arg.rfind("--", 0) != 0) {
      path = arg;
    } else {
      return usage();
    }
  }
  if (path.empty()) return usage();
  try {
    g_plugin = load_plugin(path);
    if (!ref.empty()) g_reference = load_plugin(ref);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-conformance: %s\n", e.what());
    return 1;
  }
  if (g_reference && g_reference->desc->kind != TSR_PLUGIN_BACKEND) {
    std::fprintf(stderr, "tessera-conformance: --reference must be a backend plugin\n");
    return 2;
  }
  const tsr_plugin_desc& d = *g_plugin->desc;
  std::printf("plugin %s: %s '%s' %s, ABI %u.%u (host ABI %d.%d)\n", path.c_str(), kind_name(d.kind),
              d.name, d.version, d.abi_major, d.abi_minor, TSR_ABI_MAJOR, TSR_ABI_MINOR);
  select_suites(d.kind);
  return RUN_ALL_TESTS();
}
