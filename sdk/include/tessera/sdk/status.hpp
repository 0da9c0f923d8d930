// C++ helpers for plugin authors: turn C++ failures into tsr_status + tsr_error at the
// ABI boundary, so that no exception crosses it. Header-only; needs only plugin_api.
#pragma once

#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessera/abi.h"

namespace tsr::sdk {

// Thrown inside a plugin to fail the current call with a status and message.
class Failure : public std::runtime_error {
 public:
  Failure(tsr_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  tsr_status status() const noexcept { return status_; }

 private:
  tsr_status status_;
};

// Stores an error made by the host in *error (when error is not NULL); returns status.
inline tsr_status report(const tsr_host_api* host, tsr_error** error, tsr_status status,
                         const std::string& message) noexcept {
  if (error != nullptr) {
    *error = host != nullptr ? host->error_new(status, message.data(), message.size()) : nullptr;
  }
  return status;
}

// Runs `body` and converts any exception into a status and error object.
template <class Body>
tsr_status guard(const tsr_host_api* host, tsr_error** error, Body&& body) noexcept {
  try {
    body();
    return TSR_STATUS_OK;
  } catch (const Failure& f) {
    return report(host, error, f.status(), f.what());
  } catch (const std::bad_alloc&) {
    return report(host, error, TSR_STATUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return report(host, error, TSR_STATUS_INTERNAL, e.what());
  } catch (...) {
    return report(host, error, TSR_STATUS_INTERNAL, "unknown exception");
  }
}

// Fails the current call with TSR_STATUS_INVALID_ARGUMENT unless `cond` holds.
inline void require(bool cond, const std::string& message) {
  if (!cond) throw Failure(TSR_STATUS_INVALID_ARGUMENT, message);
}

// As above, with the message built only on failure: for checks on every op of a step.
template <class MakeMessage>
  requires std::is_invocable_r_v<std::string, MakeMessage>
inline void require(bool cond, MakeMessage&& make_message) {
  if (!cond) throw Failure(TSR_STATUS_INVALID_ARGUMENT, make_message());
}

}  // namespace tsr::sdk
