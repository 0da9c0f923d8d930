#include "core/plugin_host/plugin_loader.h"

#include <spdlog/spdlog.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "base/error.h"
#include "core/config/did_you_mean.h"
#include "abi_host/backend_table.h"
#include "core/plugin_host/host_services.h"
#include "tessera/backend.h"
#include "tessera/constraint.h"
#include "tessera/draft.h"
#include "tessera/quant.h"

namespace tsr {

namespace fs = std::filesystem;

// The smallest descriptor and tables a plugin may return: the sizes ABI 1.0 (1.1 for the
// kinds it added) defined. These tables did not change in 2.0, so they stay the minimum.
// Backend tables are checked by abi_host (backend_table.h, backend_1x.h).
constexpr size_t kDescSizeV1_0 = sizeof(tsr_plugin_desc);
constexpr size_t kDraftIfaceSizeV1_0 = TSR_DRAFT_IFACE_SIZE_V2_5;  // unchanged from 1.0 to 2.5
constexpr size_t kConstraintIfaceSizeV1_1 = TSR_CONSTRAINT_IFACE_SIZE_V1_1;  // new in 1.1
constexpr size_t kQuantIfaceSizeV1_1 = TSR_QUANT_IFACE_SIZE_V1_1;        // new in 1.1

struct Plugin::Library {
  boost::dll::shared_library lib;
};

const char* plugin_kind_name(tsr_plugin_kind kind) {
  switch (kind) {
    case TSR_PLUGIN_BACKEND: return "backend";
    case TSR_PLUGIN_QUANT: return "quant";
    case TSR_PLUGIN_DRAFT: return "draft";
    case TSR_PLUGIN_CONSTRAINT: return "constraint";
  }
  return "unknown";
}

std::string plugin_file_name(tsr_plugin_kind kind, std::string_view name) {
  return "libtessera_" + std::string(plugin_kind_name(kind)) + "_" + std::string(name) + ".so";
}

std::vector<fs::path> plugin_search_dirs(const std::string& configured_dir) {
  std::vector<fs::path> dirs;
  if (!configured_dir.empty()) dirs.emplace_back(configured_dir);
  if (const char* env = std::getenv("TESSERA_PLUGIN_PATH")) {
    std::string_view rest(env);
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) dirs.emplace_back(std::string(dir));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  }
  // The module this code is linked into: the tessera executable in <prefix>/bin, or
  // libtessera.so in <prefix>/<libdir>; the same layout in the build tree.
  // dladdr names the main program as it was invoked (argv[0], perhaps relative to a
  // folder since left); /proc/self/exe has its real path.
  boost::system::error_code ec;
  boost::dll::fs::path module = boost::dll::this_line_location(ec);
  if (!ec && !module.is_absolute()) module = boost::dll::program_location(ec);
  if (!ec) {
    const fs::path dir = module.parent_path().string();
    dirs.push_back((dir / ".." / TESSERA_INSTALL_LIBDIR / "tessera").lexically_normal());
    dirs.push_back(dir / "tessera");
  }
  dirs.emplace_back(TESSERA_INSTALL_PLUGIN_DIR);
  return dirs;
}

namespace {

[[noreturn]] void refuse(const fs::path& file, const std::string& reason,
                         tsr_status status = TSR_STATUS_ABI_MISMATCH) {
  throw Error("cannot use plugin " + file.string() + ": " + reason, status);
}

const char* missing_draft_entry(const tsr_draft_iface& t) {
#define TSR_REQUIRE(entry) \
  if (t.entry == nullptr) return #entry;
  TSR_REQUIRE(draft_create) TSR_REQUIRE(draft_destroy) TSR_REQUIRE(seq_create)
  TSR_REQUIRE(seq_destroy) TSR_REQUIRE(propose) TSR_REQUIRE(on_verified)
#undef TSR_REQUIRE
  return nullptr;
}

const char* missing_constraint_entry(const tsr_constraint_iface& t) {
#define TSR_REQUIRE(entry) \
  if (t.entry == nullptr) return #entry;
  TSR_REQUIRE(kinds) TSR_REQUIRE(vocab_create) TSR_REQUIRE(vocab_destroy)
  TSR_REQUIRE(grammar_compile) TSR_REQUIRE(grammar_destroy) TSR_REQUIRE(matcher_create)
  TSR_REQUIRE(matcher_destroy) TSR_REQUIRE(matcher_fork) TSR_REQUIRE(matcher_fill_mask)
  TSR_REQUIRE(matcher_accept) TSR_REQUIRE(matcher_rollback) TSR_REQUIRE(matcher_is_terminated)
  TSR_REQUIRE(matcher_can_terminate)
#undef TSR_REQUIRE
  return nullptr;
}

const char* missing_quant_entry(const tsr_quant_iface& t) {
#define TSR_REQUIRE(entry) \
  if (t.entry == nullptr) return #entry;
  TSR_REQUIRE(scheme) TSR_REQUIRE(row_bytes) TSR_REQUIRE(quantize) TSR_REQUIRE(dequantize)
  TSR_REQUIRE(dot) TSR_REQUIRE(kernels)
#undef TSR_REQUIRE
  return nullptr;
}

// Checks a kind's table against the size ABI 1.0 gave it and its required entries.
template <class Table>
void validate_table(const fs::path& file, const void* iface, size_t min_size, const char* kind,
                    const char* (*missing)(const Table&), const char* since = "1.0") {
  const auto* table = static_cast<const Table*>(iface);
  if (table->struct_size < min_size) {
    refuse(file, std::string("its ") + kind + " table is " + std::to_string(table->struct_size) +
                     " bytes, smaller than the " + std::to_string(min_size) + " bytes of ABI " + since);
  }
  if (const char* entry = missing(*table)) {
    refuse(file, std::string("required entry '") + entry + "' is NULL");
  }
}

// A 2.x backend's registry is checked here; a 1.x backend's table by its adapter, made here.
std::unique_ptr<abi::Backend1x> backend_registry(const fs::path& file, const tsr_plugin_desc& desc) {
  if (desc.abi_major == TSR_ABI_MAJOR) {
    const std::string problem = abi::backend_reg_problem(static_cast<const tsr_backend_reg_iface*>(desc.iface));
    if (!problem.empty()) refuse(file, problem);
    return nullptr;
  }
  try {
    return std::make_unique<abi::Backend1x>(desc.iface, desc.abi_minor, host_api());
  } catch (const std::invalid_argument& e) {
    refuse(file, e.what());
  }
}

// Constraint and quant plugins came with 1.1.
void require_kind_in_abi(const fs::path& file, const tsr_plugin_desc& desc, const char* kind) {
  if (desc.abi_major == 1 && desc.abi_minor < 1) {
    refuse(file, std::string(kind) + " plugins need ABI 1.1 or newer; it was built for 1.0");
  }
}

void validate_iface(const fs::path& file, const tsr_plugin_desc& desc) {
  if (desc.iface == nullptr) refuse(file, "its function table is NULL");
  switch (desc.kind) {
    case TSR_PLUGIN_BACKEND:
      break;  // backend_registry
    case TSR_PLUGIN_DRAFT:
      validate_table<tsr_draft_iface>(file, desc.iface, kDraftIfaceSizeV1_0, "draft",
                                      missing_draft_entry);
      break;
    case TSR_PLUGIN_CONSTRAINT:
      require_kind_in_abi(file, desc, "constraint");
      validate_table<tsr_constraint_iface>(file, desc.iface, kConstraintIfaceSizeV1_1,
                                           "constraint", missing_constraint_entry, "1.1");
      break;
    case TSR_PLUGIN_QUANT:
      require_kind_in_abi(file, desc, "quant");
      validate_table<tsr_quant_iface>(file, desc.iface, kQuantIfaceSizeV1_1, "quant", missing_quant_entry, "1.1");
      break;
  }
}

std::string version_string(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

void validate_desc(const fs::path& file, const tsr_plugin_desc& desc, tsr_plugin_kind kind,
                   std::string_view name) {
  if (desc.struct_size < kDescSizeV1_0) {
    refuse(file, "its descriptor is " + std::to_string(desc.struct_size) +
                     " bytes, smaller than the " + std::to_string(kDescSizeV1_0) +
                     " bytes of ABI 1.0");
  }
  const std::string host = version_string(TSR_ABI_MAJOR, TSR_ABI_MINOR);
  const std::string built = version_string(desc.abi_major, desc.abi_minor);
  if (desc.abi_major != TSR_ABI_MAJOR && desc.abi_major != 1) {
    refuse(file, "it was built for ABI " + built + ", this host has ABI " + host +
                     " (major versions differ; it also loads plugins built for 1.0 to 1.4)");
  }
  if (desc.abi_major == TSR_ABI_MAJOR && desc.abi_minor > TSR_ABI_MINOR) {
    refuse(file, "it was built for ABI " + built + ", newer than this host's ABI " + host +
                     "; upgrade Tessera or rebuild the plugin against ABI " + host);
  }
  if (desc.abi_major == 1 && desc.abi_minor > 4) {
    refuse(file, "it was built for ABI " + built + ", newer than ABI 1.4, the last 1.x this host's ABI " +
                     host + " loads");
  }
  if (desc.kind != kind) {
    refuse(file, std::string("it is a ") + plugin_kind_name(desc.kind) + " plugin, expected " +
                     plugin_kind_name(kind));
  }
  if (desc.name == nullptr || name != desc.name) {
    refuse(file, "it calls itself '" + std::string(desc.name ? desc.name : "(null)") +
                     "', expected '" + std::string(name) + "'");
  }
  validate_iface(file, desc);
}

// Queries as a 2.x host, and when the plugin declines, as a 1.4 host: a plugin built for
// 1.x refuses a host of another major. The first refusal is kept and logged only when
// the second query is declined too.
const tsr_plugin_desc* query_plugin(tsr_plugin_query_fn query) {
  PluginLogCapture declined;
  if (const tsr_plugin_desc* desc = query(host_api(), TSR_ABI_MAJOR, TSR_ABI_MINOR)) {
    declined.replay();
    return desc;
  }
  const tsr_plugin_desc* desc = query(host_api_1x(), 1, 4);
  if (desc == nullptr || desc->abi_major != 1) declined.replay();
  return desc != nullptr && desc->abi_major == 1 ? desc : nullptr;
}

}  // namespace

Plugin::Plugin(fs::path file, std::unique_ptr<Library> lib, const tsr_plugin_desc* desc,
               std::unique_ptr<abi::Backend1x> adapter)
    : file_(std::move(file)), lib_(std::move(lib)), desc_(desc), adapter_(std::move(adapter)) {}

const void* Plugin::iface() const { return adapter_ ? adapter_->reg() : desc_->iface; }

Plugin::~Plugin() = default;

namespace {

// Why the dynamic loader refuses `file`, in its words ("invalid ELF header", "undefined
// symbol: X"): Boost's error code says only "Bad file descriptor", so dlopen is asked again.
std::string loader_error(const fs::path& file, const boost::system::error_code& ec) {
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    ::dlclose(handle);
    return ec.message();
  }
  const char* why = ::dlerror();
  return why != nullptr ? why : ec.message();
}

}  // namespace

std::shared_ptr<Plugin> Plugin::load(const fs::path& file, tsr_plugin_kind kind,
                                     std::string_view name) {
  auto lib = std::make_unique<Library>();
  boost::system::error_code ec;
  // RTLD_NOW: a symbol the plugin needs and the process lacks refuses it here, not with a
  // "symbol lookup error" exit in the middle of serving. RTLD_NODELETE: a plugin's thread
  // pools (OpenMP, oneDNN) and their thread-local state outlive its objects, so unloading
  // the code under them is never safe.
  const auto mode = static_cast<boost::dll::load_mode::type>(
      static_cast<unsigned>(boost::dll::load_mode::rtld_now) | RTLD_NODELETE);
  lib->lib.load(boost::dll::fs::path(file.string()), mode, ec);
  if (ec) refuse(file, "it could not be loaded: " + loader_error(file, ec), TSR_STATUS_NOT_FOUND);
  if (!lib->lib.has(TSR_PLUGIN_QUERY_SYMBOL)) {
    refuse(file, "it does not export " TSR_PLUGIN_QUERY_SYMBOL " (not a Tessera plugin?)");
  }
  const tsr_plugin_desc* desc =
      query_plugin(&lib->lib.get<const tsr_plugin_desc*(const tsr_host_api*, uint32_t, uint32_t)>(
          TSR_PLUGIN_QUERY_SYMBOL));
  if (desc == nullptr) {
    refuse(file, "it declined to serve this host (ABI " +
                     version_string(TSR_ABI_MAJOR, TSR_ABI_MINOR) +
                     ", nor as ABI 1.4); its log above says why");
  }
  validate_desc(file, *desc, kind, name);
  std::unique_ptr<abi::Backend1x> adapter =
      kind == TSR_PLUGIN_BACKEND ? backend_registry(file, *desc) : nullptr;
  spdlog::debug("loaded {} plugin '{}' {} (ABI {}.{}) from {}", plugin_kind_name(kind), desc->name,
                desc->version ? desc->version : "", desc->abi_major, desc->abi_minor, file.string());
  return std::shared_ptr<Plugin>(new Plugin(file, std::move(lib), desc, std::move(adapter)));
}

std::shared_ptr<Plugin> Plugin::find(tsr_plugin_kind kind, std::string_view name,
                                     const std::vector<fs::path>& dirs) {
  const std::string file_name = plugin_file_name(kind, name);
  std::string searched;
  for (const fs::path& dir : dirs) {
    fs::path candidate = dir / file_name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return load(candidate, kind, name);
    searched += (searched.empty() ? "" : ", ") + dir.string();
  }
  const std::vector<std::string> names = Plugin::available(kind, dirs);
  std::string available;
  for (const std::string& n : names) available += (available.empty() ? "" : ", ") + n;
  const std::vector<std::string_view> candidates(names.begin(), names.end());
  const std::string_view guess = closest_name(name, candidates);
  throw Error(std::string(plugin_kind_name(kind)) + " plugin '" + std::string(name) +
                  "' not found: no " + file_name + " in " +
                  (searched.empty() ? std::string("(no directories)") : searched) +
                  (available.empty() ? std::string() : "; available: " + available) +
                  (guess.empty() ? std::string() : "; did you mean '" + std::string(guess) + "'?") +
                  " (set plugin_dir in the config or TESSERA_PLUGIN_PATH)",
              TSR_STATUS_NOT_FOUND);
}

std::vector<std::string> Plugin::available(tsr_plugin_kind kind, const std::vector<fs::path>& dirs) {
  const std::string prefix = "libtessera_" + std::string(plugin_kind_name(kind)) + "_";
  std::vector<std::string> names;
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.starts_with(prefix) && file.ends_with(".so")) {
        names.push_back(file.substr(prefix.size(), file.size() - prefix.size() - 3));
      }
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace tsr
