// The configuration a subcommand runs with, built the same way by run, serve, bench and
// perplexity: the -c file (or the defaults), -m and -t on top.
#pragma once

#include <cstdint>
#include <string>

#include "core/config/config.h"

namespace tsr::app {

// Threads left at 0 become the physical cores; [log] level is applied (-v: debug).
// Throws tsr::Error for an unreadable or invalid config file.
Config load_app_config(const std::string& config_path, const std::string& model, int32_t threads,
                       bool verbose = false);

}  // namespace tsr::app
