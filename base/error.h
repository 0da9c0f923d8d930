// The error type thrown inside the host (the core, the samplers, the server). It never
// crosses the C ABI: the entry points catch it (host_services.h, guarded) and turn it into
// a tsr_status plus a tsr_error object.
#pragma once

#include <stdexcept>
#include <string>

#include "tessera/abi.h"

namespace tsr {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message, tsr_status status = TSR_STATUS_INVALID_ARGUMENT)
      : std::runtime_error(std::move(message)), status_(status) {}
  tsr_status status() const noexcept { return status_; }

 private:
  tsr_status status_;
};

}  // namespace tsr
