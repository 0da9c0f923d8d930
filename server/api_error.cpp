#include "server/api_error.h"

namespace tsr::server {

namespace {

nlohmann::json null_if_empty(const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); }

// OpenAI's error types by status.
std::string type_for(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 503: return "server_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

nlohmann::json ApiError::to_json() const {
  return {{"error",
           {{"message", what()}, {"type", type_}, {"param", null_if_empty(param_)}, {"code", null_if_empty(code_)}}}};
}

ApiError bad_param(const std::string& param, const std::string& message) {
  return ApiError(400, message, "invalid_request_error", param);
}

ApiError unsupported_param(const std::string& param, const std::string& what) {
  return ApiError(400, "'" + param + "': " + what + " is not supported yet", "invalid_request_error", param,
                  "unsupported_parameter");
}

nlohmann::json error_body(int status, const std::string& message) {
  return ApiError(status, message, type_for(status)).to_json();
}

}  // namespace tsr::server
