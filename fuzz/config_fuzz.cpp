// Configuration text: any TOML input is parsed into a validated Config or rejected with
// tsr::Error naming the problem; nothing else escapes.
#include <cstdint>
#include <string_view>

#include "core/config/config.h"
#include "base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tsr::config_parse_string(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml");
  } catch (const tsr::Error&) {
  }
  return 0;
}
