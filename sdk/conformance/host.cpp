// The conformance kit's host: services and loader, written against the C headers only.
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "abi_host/backend_table.h"
#include "conformance.h"
#include "tessera/backend.h"
#include "tessera/constraint.h"
#include "tessera/draft.h"
#include "tessera/quant.h"

struct tsr_error {
  tsr_status status;
  std::string message;
};

namespace tsr::conformance {
namespace {

std::atomic<int> g_live_errors{0};

// Set while the loader's first query runs: a plugin built for 1.x declines a 2.x host with
// a message that its second query, as 1.4, makes moot.
thread_local std::string* t_capture = nullptr;

void host_log(tsr_log_level level, const char* msg, size_t len) {
  static const char* const names[] = {"trace", "debug", "info", "warn", "error"};
  const char* name = level >= TSR_LOG_TRACE && level <= TSR_LOG_ERROR ? names[level] : "?";
  char line[64];
  std::snprintf(line, sizeof(line), "[plugin %s] ", name);
  const std::string text = line + std::string(msg != nullptr ? msg : "", msg != nullptr ? len : 0) + "\n";
  if (t_capture != nullptr) {
    *t_capture += text;
  } else {
    std::fputs(text.c_str(), stderr);
  }
}

void* host_alloc(size_t size, size_t alignment) {
  const size_t align = alignment == 0 ? alignof(std::max_align_t) : alignment;
  return std::aligned_alloc(align, (size + align - 1) / align * align);
}

tsr_error* error_new(tsr_status status, const char* msg, size_t len) {
  ++g_live_errors;
  return new tsr_error{status, std::string(msg != nullptr ? msg : "", msg != nullptr ? len : 0)};
}

void error_free(tsr_error* error) {
  if (error == nullptr) return;
  --g_live_errors;
  delete error;
}

tsr_status error_status(const tsr_error* e) { return e != nullptr ? e->status : TSR_STATUS_OK; }
const char* error_message(const tsr_error* e) { return e != nullptr ? e->message.c_str() : ""; }

const tsr_host_api kHost = {
    sizeof(tsr_host_api), TSR_ABI_MAJOR, TSR_ABI_MINOR, host_log, host_alloc, std::free,
    error_new, error_free, error_status, error_message,
};
// The same services as a 1.4 host shows them, for plugins built for 1.x.
const tsr_host_api kHost1x = {
    sizeof(tsr_host_api), 1, 4, host_log, host_alloc, std::free,
    error_new, error_free, error_status, error_message,
};

[[noreturn]] void refuse(const std::string& path, const std::string& reason) {
  throw std::runtime_error("plugin " + path + " refused: " + reason);
}

std::string version(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Names the first NULL required entry of a table, or returns nullptr.
const char* missing_entry(const tsr_draft_iface& t) {
  if (t.draft_create == nullptr) return "draft_create";
  if (t.draft_destroy == nullptr) return "draft_destroy";
  if (t.seq_create == nullptr) return "seq_create";
  if (t.seq_destroy == nullptr) return "seq_destroy";
  if (t.propose == nullptr) return "propose";
  if (t.on_verified == nullptr) return "on_verified";
  return nullptr;
}

const char* missing_entry(const tsr_constraint_iface& t) {
  const void* const entries[] = {
      (void*)t.kinds, (void*)t.vocab_create, (void*)t.vocab_destroy, (void*)t.grammar_compile,
      (void*)t.grammar_destroy, (void*)t.matcher_create, (void*)t.matcher_destroy,
      (void*)t.matcher_fork, (void*)t.matcher_fill_mask, (void*)t.matcher_accept,
      (void*)t.matcher_rollback, (void*)t.matcher_is_terminated, (void*)t.matcher_can_terminate};
  static const char* const names[] = {
      "kinds", "vocab_create", "vocab_destroy", "grammar_compile", "grammar_destroy",
      "matcher_create", "matcher_destroy", "matcher_fork", "matcher_fill_mask", "matcher_accept",
      "matcher_rollback", "matcher_is_terminated", "matcher_can_terminate"};
  for (size_t i = 0; i < std::size(entries); ++i) {
    if (entries[i] == nullptr) return names[i];
  }
  return nullptr;
}

const char* missing_entry(const tsr_quant_iface& t) {
  if (t.scheme == nullptr) return "scheme";
  if (t.row_bytes == nullptr) return "row_bytes";
  if (t.quantize == nullptr) return "quantize";
  if (t.dequantize == nullptr) return "dequantize";
  if (t.dot == nullptr) return "dot";
  if (t.kernels == nullptr) return "kernels";
  return nullptr;
}

// Tables may be larger (a newer minor of the same major is refused earlier, so larger
// means padding we ignore) but never smaller than ABI 1.0's.
template <class Table>
void validate_table(const std::string& path, const void* iface, size_t size_1_0) {
  const auto& table = *static_cast<const Table*>(iface);
  if (table.struct_size < size_1_0) {
    refuse(path, "function table is " + std::to_string(table.struct_size) + " bytes, ABI 1.0 has " +
                     std::to_string(size_1_0));
  }
  if (const char* entry = missing_entry(table)) refuse(path, std::string("entry ") + entry + " is NULL");
}

void validate(const std::string& path, const tsr_plugin_desc& d) {
  if (d.struct_size < sizeof(tsr_plugin_desc)) refuse(path, "descriptor smaller than ABI 1.0's");
  const std::string host = version(TSR_ABI_MAJOR, TSR_ABI_MINOR);
  const std::string built = version(d.abi_major, d.abi_minor);
  if (d.abi_major != TSR_ABI_MAJOR && d.abi_major != 1) {
    refuse(path, "built for ABI " + built + ", host has ABI " + host + " (and loads 1.0 to 1.4)");
  }
  if (d.abi_major == TSR_ABI_MAJOR && d.abi_minor > TSR_ABI_MINOR) {
    refuse(path, "built for ABI " + built + ", newer than this host's ABI " + host);
  }
  if (d.abi_major == 1 && d.abi_minor > 4) {
    refuse(path, "built for ABI " + built + ", newer than ABI 1.4, the last 1.x this host's ABI " + host + " loads");
  }
  const char* kind = kind_name(d.kind);
  if (kind == nullptr) refuse(path, "unknown kind " + std::to_string(d.kind));
  if (d.name == nullptr || d.version == nullptr) refuse(path, "name or version is NULL");
  const std::string expected = std::string("libtessera_") + kind + "_" + d.name + ".so";
  if (std::filesystem::path(path).filename() != expected) {
    refuse(path, "a " + std::string(kind) + " plugin named '" + d.name + "' must be in " + expected);
  }
  if (d.iface == nullptr) refuse(path, "function table is NULL");
  // The table sizes ABI 1.0 pinned (1.1 for the kinds it added) stay the minimum: these
  // tables did not change in 2.0. Backend registries are checked by abi_host.
  if (d.kind == TSR_PLUGIN_DRAFT) validate_table<tsr_draft_iface>(path, d.iface, 64);
  // Constraint and quant plugins arrived in 1.1: their tables' first sizes are 1.1's.
  if (d.kind == TSR_PLUGIN_CONSTRAINT) {
    if (d.abi_major == 1 && d.abi_minor < 1) {
      refuse(path, "constraint plugins need ABI 1.1 or newer; it was built for " + built);
    }
    validate_table<tsr_constraint_iface>(path, d.iface, 120);
  }
  if (d.kind == TSR_PLUGIN_QUANT) {
    if (d.abi_major == 1 && d.abi_minor < 1) {
      refuse(path, "quant plugins need ABI 1.1 or newer; it was built for " + built);
    }
    validate_table<tsr_quant_iface>(path, d.iface, 64);
  }
}

// A backend's 2.x registry: its own, checked, or the host adapter's over its 1.x table.
void attach_backend_registry(LoadedPlugin& p) {
  if (p.desc->abi_major == TSR_ABI_MAJOR) {
    p.backend_reg = static_cast<const tsr_backend_reg_iface*>(p.desc->iface);
    const std::string problem = abi::backend_reg_problem(p.backend_reg);
    if (!problem.empty()) refuse(p.path, problem);
    return;
  }
  try {
    p.adapter = std::make_shared<abi::Backend1x>(p.desc->iface, p.desc->abi_minor, &kHost);
  } catch (const std::invalid_argument& e) {
    refuse(p.path, e.what());
  }
  p.backend_reg = p.adapter->reg();
}

// Queries as a 2.x host, then as a 1.4 host: a 1.x plugin refuses a host of another major.
const tsr_plugin_desc* query_plugin(tsr_plugin_query_fn query) {
  std::string declined;
  t_capture = &declined;
  const tsr_plugin_desc* desc = query(&kHost, TSR_ABI_MAJOR, TSR_ABI_MINOR);
  t_capture = nullptr;
  if (desc == nullptr) {
    desc = query(&kHost1x, 1, 4);
    if (desc != nullptr && desc->abi_major != 1) desc = nullptr;
  }
  if (desc == nullptr || desc->abi_major == TSR_ABI_MAJOR) std::fputs(declined.c_str(), stderr);
  return desc;
}

}  // namespace

const char* kind_name(tsr_plugin_kind kind) {
  switch (kind) {
    case TSR_PLUGIN_BACKEND: return "backend";
    case TSR_PLUGIN_QUANT: return "quant";
    case TSR_PLUGIN_DRAFT: return "draft";
    case TSR_PLUGIN_CONSTRAINT: return "constraint";
  }
  return nullptr;
}

const tsr_host_api* host_api() { return &kHost; }
int live_errors() { return g_live_errors.load(); }

std::string take_error(tsr_error* error) {
  if (error == nullptr) return "(no error object)";
  std::string text = std::to_string(error->status) + ": " + error->message;
  error_free(error);
  return text;
}

LoadedPlugin load_plugin(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (lib == nullptr) refuse(path, std::string("dlopen failed: ") + dlerror());
  auto query = reinterpret_cast<tsr_plugin_query_fn>(dlsym(lib, TSR_PLUGIN_QUERY_SYMBOL));
  if (query == nullptr) refuse(path, "no " TSR_PLUGIN_QUERY_SYMBOL " symbol");
  const tsr_plugin_desc* desc = query_plugin(query);
  if (desc == nullptr) {
    refuse(path, "it declined this host (ABI " + version(TSR_ABI_MAJOR, TSR_ABI_MINOR) + ", nor as ABI 1.4)");
  }
  validate(path, *desc);
  LoadedPlugin p{path, query, desc, nullptr, nullptr};
  if (desc->kind == TSR_PLUGIN_BACKEND) attach_backend_registry(p);
  return p;
}

}  // namespace tsr::conformance
