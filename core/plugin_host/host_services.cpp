#include "core/plugin_host/host_services.h"

#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <string_view>

#include "base/error.h"
#include "tessera/engine.h"

struct tsr_error {
  tsr_status status;
  std::string message;
};

namespace tsr {
namespace {

spdlog::level::level_enum to_spdlog(tsr_log_level level) {
  switch (level) {
    case TSR_LOG_TRACE: return spdlog::level::trace;
    case TSR_LOG_DEBUG: return spdlog::level::debug;
    case TSR_LOG_INFO: return spdlog::level::info;
    case TSR_LOG_WARN: return spdlog::level::warn;
    case TSR_LOG_ERROR: return spdlog::level::err;
  }
  return spdlog::level::info;
}

thread_local PluginLogCapture* t_capture = nullptr;

void host_log(tsr_log_level level, const char* msg, size_t len) {
  log_or_capture(level, std::string_view(msg ? msg : "", msg ? len : 0));
}

void* host_alloc(size_t size, size_t alignment) {
  if (alignment < alignof(std::max_align_t)) alignment = alignof(std::max_align_t);
  if ((alignment & (alignment - 1)) != 0) return nullptr;
  if (size > SIZE_MAX - (alignment - 1)) return nullptr;  // rounding up would wrap to a tiny block
  size_t rounded = (size + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
}

void host_free(void* ptr) { std::free(ptr); }

// NULL when out of memory (abi.h): nothing may throw into the plugin's frames.
tsr_error* host_error_new(tsr_status status, const char* msg, size_t len) {
  try {
    return new tsr_error{status, std::string(msg ? msg : "", msg ? len : 0)};
  } catch (...) {
    return nullptr;
  }
}

const tsr_host_api kHostApi = {
    sizeof(tsr_host_api), TSR_ABI_MAJOR, TSR_ABI_MINOR, host_log, host_alloc, host_free,
    host_error_new, tsr_error_free, tsr_error_status, tsr_error_message,
};

const tsr_host_api kHostApi1x = {
    sizeof(tsr_host_api), 1, 4, host_log, host_alloc, host_free,
    host_error_new, tsr_error_free, tsr_error_status, tsr_error_message,
};

}  // namespace

void log_or_capture(tsr_log_level level, std::string_view message) {
  if (t_capture != nullptr) {
    t_capture->lines_.emplace_back(level, std::string(message));
  } else {
    spdlog::log(to_spdlog(level), "{}", message);
  }
}

PluginLogCapture::PluginLogCapture() : outer_(t_capture) { t_capture = this; }
PluginLogCapture::~PluginLogCapture() { t_capture = outer_; }

void PluginLogCapture::replay() const {
  PluginLogCapture* const current = t_capture;
  t_capture = outer_;
  for (const auto& [level, line] : lines_) log_or_capture(level, line);
  t_capture = current;
}

const tsr_host_api* host_api() { return &kHostApi; }
const tsr_host_api* host_api_1x() { return &kHostApi1x; }

tsr_error* error_new(tsr_status status, std::string message) {
  return new tsr_error{status, std::move(message)};
}

void check_status(tsr_status status, tsr_error* error, const std::string& what) {
  if (status == TSR_STATUS_OK) {
    tsr_error_free(error);
    return;
  }
  std::string detail = error ? error->message : "no details given";
  tsr_error_free(error);
  throw Error(what + ": " + detail, status);
}

}  // namespace tsr

extern "C" {

tsr_status tsr_error_status(const tsr_error* error) {
  return error ? error->status : TSR_STATUS_OK;
}

const char* tsr_error_message(const tsr_error* error) {
  return error ? error->message.c_str() : "";
}

void tsr_error_free(tsr_error* error) { delete error; }

}  // extern "C"
