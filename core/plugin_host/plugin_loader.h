// Finds, loads (Boost.DLL) and validates plugin libraries libtessera_<kind>_<name>.so.
//
// A plugin is refused, with a message naming the file and the reason, when it lacks
// tsr_plugin_query, declines the host (returns NULL), was built for an ABI this host does
// not load (another major than 2 and 1.0 … 1.4, or a newer minor), returns a descriptor
// or table smaller than its ABI defines, names another
// kind or name than its file, or leaves a required entry NULL.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "abi_host/backend_1x.h"
#include "tessera/abi.h"

namespace tsr {

const char* plugin_kind_name(tsr_plugin_kind kind);

// "libtessera_<kind>_<name>.so"
std::string plugin_file_name(tsr_plugin_kind kind, std::string_view name);

// Search order: `configured_dir` (config plugin_dir, if not empty), the directories of
// TESSERA_PLUGIN_PATH (colon-separated), then, relative to the module the core is linked
// into, ../<libdir>/tessera (the tessera executable in bin/) and ./tessera (libtessera.so
// in <libdir>/) — identical in the build and the install tree —, and last the plugin
// directory of the install prefix this build was configured for.
std::vector<std::filesystem::path> plugin_search_dirs(const std::string& configured_dir);

// A loaded and validated plugin library. The library stays loaded while this object (or a
// shared_ptr copy held by an object the plugin created) lives.
class Plugin {
 public:
  // Throws tsr::Error (status TSR_STATUS_ABI_MISMATCH for ABI problems).
  static std::shared_ptr<Plugin> load(const std::filesystem::path& file, tsr_plugin_kind kind,
                                      std::string_view name);
  // Names of the plugins of `kind` whose files are in `dirs` (sorted, for messages).
  static std::vector<std::string> available(tsr_plugin_kind kind,
                                            const std::vector<std::filesystem::path>& dirs);
  // Searches `dirs` in order for the plugin's file, then loads it; a missing plugin's error
  // lists the ones that are there.
  static std::shared_ptr<Plugin> find(tsr_plugin_kind kind, std::string_view name,
                                      const std::vector<std::filesystem::path>& dirs);
  ~Plugin();

  const tsr_plugin_desc& desc() const { return *desc_; }
  // The kind's table: for a backend its ABI 2.x registry (tsr_backend_reg_iface), also for
  // a plugin built for 1.x, which is shown through the host's adapter (abi_host/backend_1x.h).
  const void* iface() const;
  const std::filesystem::path& file() const { return file_; }
  std::string name() const { return desc_->name; }

 private:
  struct Library;
  Plugin(std::filesystem::path file, std::unique_ptr<Library> lib, const tsr_plugin_desc* desc,
         std::unique_ptr<abi::Backend1x> adapter);
  std::filesystem::path file_;
  std::unique_ptr<Library> lib_;
  const tsr_plugin_desc* desc_;
  std::unique_ptr<abi::Backend1x> adapter_;  // set for a backend built for ABI 1.x
};

}  // namespace tsr
