// Plumbing every plugin needs, whatever its kind: the host services handed to
// tsr_plugin_query, the query entry point itself, params checks and opaque-handle casts.
// Kind-specific helpers (backend.hpp, draft.hpp) build on it.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "tessera/abi.h"
#include "tessera/sdk/status.hpp"

// Whether the headers this plugin is compiled against are of ABI major.minor or newer:
// the SDK compiles against every kept version's headers (plugin_api/compat).
#define TSR_SDK_ABI_AT_LEAST(major, minor) \
  (TSR_ABI_MAJOR > (major) || (TSR_ABI_MAJOR == (major) && TSR_ABI_MINOR >= (minor)))

namespace tsr::sdk {

// The host services this plugin library was queried with. Each library has its own copy:
// plugins are built with hidden visibility, so this symbol never merges across libraries.
inline const tsr_host_api* g_host = nullptr;

inline void log(tsr_log_level level, const std::string& message) noexcept {
  if (g_host != nullptr) g_host->log(level, message.data(), message.size());
}

// Runs `body` at the ABI boundary: exceptions become a status and an error object.
template <class Body>
tsr_status boundary(tsr_error** error, Body&& body) noexcept {
  return guard(g_host, error, std::forward<Body>(body));
}

// Checks a params pointer and its struct_size; returns the struct. The host that wrote it
// is never older than this plugin (an older host refuses a newer plugin), so its struct
// is at least as large as the one this plugin was compiled with; it may be larger, and
// this plugin reads only what it knows.
template <class Params>
const Params& checked(const Params* params, const char* entry) {
  require(params != nullptr, std::string(entry) + ": params is NULL");
  require(params->struct_size >= sizeof(Params),
          std::string(entry) + ": params struct_size " + std::to_string(params->struct_size) +
              " is smaller than the " + std::to_string(sizeof(Params)) + " bytes of this plugin's ABI");
  return *params;
}

// Opaque handles (tsr_backend*, tsr_draft_seq*, ...) are the plugin's own C++ objects:
// the C headers never define the handle structs, so a round trip through
// reinterpret_cast is all the ABI sees.
template <class Handle, class T>
Handle* to_handle(T* object) noexcept {
  return reinterpret_cast<Handle*>(object);
}
template <class T, class Handle>
T* from_handle(Handle* handle) noexcept {
  return reinterpret_cast<T*>(handle);
}

// Fails with `what` unless `handle` is set; returns the object behind it.
template <class T, class Handle>
T& object(Handle* handle, const char* what) {
  require(handle != nullptr, std::string(what) + " is NULL");
  return *from_handle<T>(handle);
}

// The body of tsr_plugin_query: accepts any host of our ABI major (a newer host reads our
// smaller structs; an older one is refused by the host itself, which knows both minors),
// keeps the host services and returns the descriptor.
inline const tsr_plugin_desc* query(const tsr_host_api* host, uint32_t host_major,
                                    const tsr_plugin_desc& desc) noexcept {
  if (host == nullptr) return nullptr;
  if (host_major != TSR_ABI_MAJOR) {
    const std::string message = std::string(desc.name) + " was built for ABI major " +
                                std::to_string(TSR_ABI_MAJOR) + ", the host has " +
                                std::to_string(host_major);
    host->log(TSR_LOG_ERROR, message.data(), message.size());
    return nullptr;
  }
  g_host = host;
  return &desc;
}

// A descriptor for this build of the plugin.
inline tsr_plugin_desc describe(tsr_plugin_kind kind, const char* name, const char* version,
                                const void* iface) noexcept {
  return {sizeof(tsr_plugin_desc), TSR_ABI_MAJOR, TSR_ABI_MINOR, kind, name, version, iface};
}

}  // namespace tsr::sdk

// Defines tsr_plugin_query for a plugin whose descriptor `Plugin::desc(name, version)`
// returns (BackendPlugin<Impl> and DraftPlugin<Impl> provide it).
#define TSR_SDK_DEFINE_QUERY(Plugin, name, version)                                         \
  extern "C" TSR_EXPORT const tsr_plugin_desc* tsr_plugin_query(                            \
      const tsr_host_api* host, uint32_t host_abi_major, uint32_t host_abi_minor) {         \
    (void)host_abi_minor;                                                                   \
    return ::tsr::sdk::query(host, host_abi_major, Plugin::desc(name, version));            \
  }
