// A whole text file for the subcommands that read one (perplexity's -f, quantize's --calib).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"

namespace tsr::app {

// Throws tsr::Error (IO_ERROR) naming `what` and the path when the file cannot be opened.
inline std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(what + ": cannot open " + path, TSR_STATUS_IO_ERROR);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tsr::app
