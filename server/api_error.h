// Errors the HTTP API reports, in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// Handlers throw ApiError; the server turns it into the status and body.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace tsr::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type, std::string param = {},
           std::string code = {})
      : std::runtime_error(std::move(message)), status_(status), type_(std::move(type)),
        param_(std::move(param)), code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::json to_json() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 naming the parameter at fault.
ApiError bad_param(const std::string& param, const std::string& message);
// 400 for a parameter the engine does not implement yet; never silently ignored.
ApiError unsupported_param(const std::string& param, const std::string& what);

// The body for an error status that carries no ApiError (unknown route, oversized body).
nlohmann::json error_body(int status, const std::string& message);

}  // namespace tsr::server
