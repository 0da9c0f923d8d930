// The names of the KV cache's dtypes and rotations, as the config and the CLI spell them:
// header-only, so that config parsing checks them without linking the KV cache.
#pragma once

#include <string_view>

namespace tsr {

inline constexpr std::string_view kKvDtypeNames[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "fp8_e4m3"};
inline constexpr std::string_view kKvRotations[] = {"auto", "hadamard", "none"};

}  // namespace tsr
