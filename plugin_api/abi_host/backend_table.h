// Checks a host makes of a backend plugin's ABI 2.x registry before using it: shared by the
// core's loader and the conformance kit, so that both refuse the same plugins.
#pragma once

#include <string>

#include "tessera/backend.h"

namespace tsr::abi {

// What makes `reg` unusable ("" when nothing): a NULL or short registry or backend table,
// a required entry that is NULL, or a graph set that is neither complete nor empty.
std::string backend_reg_problem(const tsr_backend_reg_iface* reg);

}  // namespace tsr::abi
