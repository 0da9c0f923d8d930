#include "apps/tessera/app_config.h"

#include <spdlog/spdlog.h>

#include "tessera/sdk/cpu_topology.hpp"

namespace tsr::app {

Config load_app_config(const std::string& config_path, const std::string& model, int32_t threads, bool verbose) {
  Config c = config_path.empty() ? Config{} : config_parse_file(config_path);
  if (!model.empty()) c.model.path = model;
  if (threads > 0) c.backend.threads = threads;
  if (c.backend.threads == 0) c.backend.threads = tsr::sdk::cpu_physical_cores();
  if (verbose) c.log.level = "debug";
  spdlog::set_level(spdlog::level::from_str(c.log.level));
  return c;
}

}  // namespace tsr::app
