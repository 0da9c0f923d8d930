// The services the host offers plugins (tsr_host_api) and the tsr_error object that both
// the host and plugins create through it.
#pragma once

#include <string>

#include "tessera/abi.h"

namespace tsr {

// The process-wide host API table; valid for the lifetime of the process.
const tsr_host_api* host_api();

// Makes an error object (the same kind plugins get from host_api()->error_new).
tsr_error* error_new(tsr_status status, std::string message);

// Throws tsr::Error when `status` is not OK, with `what` as context. Takes ownership of
// `error` (may be NULL) and frees it.
void check_status(tsr_status status, tsr_error* error, const std::string& what);

// Calls a plugin entry `call(tsr_error**)` and throws tsr::Error with `what` as context
// when it fails. (The status is read before the error: argument order is unspecified.)
template <class Call>
void call_plugin(const std::string& what, Call&& call) {
  tsr_error* error = nullptr;
  const tsr_status status = call(&error);
  check_status(status, error, what);
}

}  // namespace tsr
