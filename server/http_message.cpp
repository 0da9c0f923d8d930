#include "server/http_message.h"

#include <algorithm>
#include <cctype>

namespace tsr::server {

namespace {

const std::string* find_header(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (header_name_equals(k, name)) return &v;
  }
  return nullptr;
}

std::string without_line_breaks(std::string_view s) {
  std::string out(s);
  std::erase_if(out, [](char c) { return c == '\r' || c == '\n'; });
  return out;
}

}  // namespace

bool header_name_equals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool HttpRequest::has_header(std::string_view name) const { return find_header(headers, name) != nullptr; }

std::string HttpRequest::get_header_value(std::string_view name) const {
  const std::string* v = find_header(headers, name);
  return v ? *v : std::string();
}

void HttpResponse::set_header(std::string_view name, std::string_view value) {
  std::erase_if(headers, [&](const auto& h) { return header_name_equals(h.first, name); });
  headers.emplace_back(without_line_breaks(name), without_line_breaks(value));
}

bool HttpResponse::has_header(std::string_view name) const { return find_header(headers, name) != nullptr; }

void HttpResponse::set_content(std::string content, std::string type) {
  body = std::move(content);
  content_type = without_line_breaks(type);
  provider = nullptr;
}

void HttpResponse::set_chunked_content_provider(std::string type, ContentProvider p, ContentReleaser r) {
  content_type = without_line_breaks(type);
  body.clear();
  provider = std::move(p);
  releaser = std::move(r);
}

}  // namespace tsr::server
