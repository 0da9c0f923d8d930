// The services the host offers plugins (tsr_host_api) and the tsr_error object that both
// the host and plugins create through it.
#pragma once

#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tessera/abi.h"

namespace tsr {

// The process-wide host API table; valid for the lifetime of the process.
const tsr_host_api* host_api();

// The host API as a host of ABI 1.4 shows it to a plugin built for 1.x (abi_major 1,
// abi_minor 4; the same services). Such a plugin refuses a host of another major.
const tsr_host_api* host_api_1x();

// Logs a message of a plugin through spdlog, or keeps it in this thread's PluginLogCapture.
void log_or_capture(tsr_log_level level, std::string_view message);

// While alive, what plugins log through the host API on this thread is kept instead of
// logged: the loader's first query of a 1.x plugin (as a 2.x host) is declined with a
// message about the major that the second query (as 1.4) makes moot.
class PluginLogCapture {
 public:
  PluginLogCapture();
  ~PluginLogCapture();
  PluginLogCapture(const PluginLogCapture&) = delete;
  PluginLogCapture& operator=(const PluginLogCapture&) = delete;
  // Logs what was kept, as it would have been.
  void replay() const;

 private:
  friend void log_or_capture(tsr_log_level level, std::string_view message);
  std::vector<std::pair<tsr_log_level, std::string>> lines_;
  PluginLogCapture* outer_;
};

// Makes an error object (the same kind plugins get from host_api()->error_new).
tsr_error* error_new(tsr_status status, std::string message);

// The host's side of the C ABI boundary, for every entry the host exports (engine.h, the
// model services of draft plugins): runs `body` and turns what it throws into a status
// and, when `error` is not NULL, an error object the caller frees. (Plugins have the SDK's
// sdk::guard, which makes its error objects through the host API.)
template <class Body>
tsr_status guarded(tsr_error** error, Body&& body) noexcept {
  auto fail = [&](tsr_status status, std::string message) {
    if (error != nullptr) *error = error_new(status, std::move(message));
    return status;
  };
  try {
    body();
    return TSR_STATUS_OK;
  } catch (const Error& e) {
    return fail(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return fail(TSR_STATUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(TSR_STATUS_INTERNAL, e.what());
  }
}

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
