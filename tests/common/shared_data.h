// Locating ../shared test data; tests skip with a clear message where it is absent.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tsr::testing {

inline std::string shared_path(const std::string& relative) {
  return std::string(TESSERA_SHARED_DIR) + "/" + relative;
}

inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace tsr::testing

// Skips the current test unless the shared file exists.
#define TSR_REQUIRE_SHARED(relative)                                                   \
  do {                                                                                 \
    if (!std::filesystem::exists(::tsr::testing::shared_path(relative))) {             \
      GTEST_SKIP() << "shared test data " << ::tsr::testing::shared_path(relative)     \
                   << " is absent (CI provides ../shared beside the checkout)";        \
    }                                                                                  \
  } while (0)
