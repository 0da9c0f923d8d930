#include "server/cors.h"

#include "server/http_message.h"

#include <algorithm>

#include "server/api_error.h"

namespace tsr::server {

namespace {
constexpr const char* kMethods = "GET, POST, OPTIONS";
}  // namespace

bool Cors::allowed(const std::string& origin) const {
  if (origin.empty()) return false;
  return std::any_of(origins_.begin(), origins_.end(), [&](const std::string& o) { return o == "*" || o == origin; });
}

void Cors::decorate(const HttpRequest& req, HttpResponse& res) const {
  const std::string origin = req.get_header_value("Origin");
  if (!allowed(origin)) return;
  const bool any = std::find(origins_.begin(), origins_.end(), "*") != origins_.end();
  res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
  if (!any) res.set_header("Vary", "Origin");  // caches must not serve one origin's answer to another
}

void Cors::preflight(const HttpRequest& req, HttpResponse& res) const {
  const std::string origin = req.get_header_value("Origin");
  if (req.has_header("Access-Control-Request-Method") && !allowed(origin)) {
    res.status = 403;
    res.set_content(ApiError(403, "cross-origin requests from '" + origin.substr(0, 200) +
                                      "' are not allowed ([server] cors_origins)",
                             "invalid_request_error", "", "origin_not_allowed").to_json().dump(),
                    "application/json");
    return;
  }
  res.status = 204;
  res.set_header("Allow", kMethods);
  if (!allowed(origin)) return;
  res.set_header("Access-Control-Allow-Methods", kMethods);
  const std::string asked = req.get_header_value("Access-Control-Request-Headers");
  res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
  res.set_header("Access-Control-Max-Age", "600");
}

}  // namespace tsr::server
