// tessera-conformance: checks a plugin library against the ABI using only the installed
// headers. It is its own minimal host (host services, loader) so that a vendor can run it
// without the Tessera core, and so that the core's leniencies cannot hide a plugin's bugs.
#pragma once

#include <memory>
#include <string>

#include "abi_host/backend_1x.h"
#include "tessera/abi.h"

namespace tsr::conformance {

// The host services handed to plugins: logging to stderr, malloc-backed memory, error
// objects that count how many are alive (a plugin's error must reach the caller once).
const tsr_host_api* host_api();
int live_errors();

// A loaded plugin; the library stays loaded for the whole run (like the core's
// RTLD_NODELETE: thread pools may outlive the plugin's objects).
struct LoadedPlugin {
  std::string path;
  tsr_plugin_query_fn query = nullptr;
  const tsr_plugin_desc* desc = nullptr;
  // A backend's ABI 2.x registry: desc->iface, or for a plugin built for 1.x the host
  // adapter's over its table (abi_host/backend_1x.h).
  const tsr_backend_reg_iface* backend_reg = nullptr;
  std::shared_ptr<abi::Backend1x> adapter;
};

// Loads and validates `path` as the host does: the query symbol (asked as 2.x, then as 1.4
// for plugins built for 1.x), the descriptor size and ABI version (a newer minor is refused
// naming both versions), kind, file name, table
// size and required entries. Throws std::runtime_error with the reason.
LoadedPlugin load_plugin(const std::string& path);

// The plugin under test and, when --reference was given, the reference backend.
const LoadedPlugin& plugin();
const LoadedPlugin* reference();

// "backend", "quant", "draft" or "constraint"; NULL for a kind this kit does not know.
const char* kind_name(tsr_plugin_kind kind);

// Takes ownership of a plugin's error: returns "status: message" and frees it.
std::string take_error(tsr_error* error);

}  // namespace tsr::conformance
