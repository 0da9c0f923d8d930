// The command line before CLI11 reads it: llama.cpp's flags of several letters after one
// dash (-ngl, -cnv, -sys, -hf), which CLI11 would read as a one-letter flag and its value
// (-ngl 99 as -n gl), become their long forms; an unknown subcommand or flag is refused
// with the closest valid name instead of being misread or ignored.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace tsr::app {

// The arguments after argv[0], rewritten for `app` (whose subcommands are registered).
// Throws CLI::ParseError (exit code non-zero) with a did-you-mean message for an unknown
// subcommand or flag.
std::vector<std::string> normalize_args(const CLI::App& app, int argc, const char* const* argv);

}  // namespace tsr::app
