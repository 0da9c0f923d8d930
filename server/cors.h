// Cross-origin resource sharing for browser clients ([server] cors_origins): responses to
// an allowed Origin carry Access-Control-Allow-Origin, and OPTIONS preflights are answered
// (before authentication: browsers send no credentials on a preflight).
#pragma once

#include <string>
#include <vector>

#include "server/http_message.h"

namespace tsr::server {

class Cors {
 public:
  // Origins as "scheme://host[:port]", or "*" for any; empty: no CORS headers at all.
  explicit Cors(std::vector<std::string> origins) : origins_(std::move(origins)) {}

  // Adds the CORS headers to a response to an allowed origin.
  void decorate(const HttpRequest& req, HttpResponse& res) const;
  // Answers an OPTIONS request: 204 with the allowed methods (and, for an allowed origin,
  // the preflight headers), 403 for a preflight from an origin not allowed.
  void preflight(const HttpRequest& req, HttpResponse& res) const;

 private:
  bool allowed(const std::string& origin) const;
  std::vector<std::string> origins_;
};

}  // namespace tsr::server
