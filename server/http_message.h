// The HTTP request and response a handler sees; the transport that reads and writes them
// is http_connection's. A response is whole (a body) or streamed: a content provider,
// called on the handler's thread until it ends the body, writes through a DataSink.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tsr::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;       // "GET", "POST", ...
  std::string path;         // the target without its query
  std::string remote_addr;  // the peer's address
  HttpHeaders headers;
  std::string body;
  std::shared_ptr<void> record;  // the server's state of the exchange, until it is logged

  // Header names compare case-insensitively; the first of repeated headers wins.
  bool has_header(std::string_view name) const;
  std::string get_header_value(std::string_view name) const;  // "" when absent
};

// Writes a streamed body from the handler's thread. Thread-compatible: one writer.
class DataSink {
 public:
  virtual ~DataSink() = default;
  // Blocks while the client is far behind (the connection's output is bounded).
  // Returns false once the client is gone; later writes fail too.
  virtual bool write(const char* data, size_t size) = 0;
  // Ends the body; the provider is not called again.
  virtual void done() = 0;
};

// One round of a streamed body: returns false to stop (the client is gone, or the body
// cannot go on); true to be called again, until it calls sink.done().
using ContentProvider = std::function<bool(DataSink& sink)>;
// Called once the stream ends; `success`: the body was ended with done() and written.
using ContentReleaser = std::function<void(bool success)>;

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;  // besides Content-Type, Content-Length and the framing
  std::string content_type;
  std::string body;
  ContentProvider provider;  // set: a streamed (chunked) body instead of `body`
  ContentReleaser releaser;

  // Replaces a header of that name; CR and LF are dropped from both (no header injection).
  void set_header(std::string_view name, std::string_view value);
  bool has_header(std::string_view name) const;
  void set_content(std::string content, std::string type);
  void set_chunked_content_provider(std::string type, ContentProvider provider, ContentReleaser releaser);
};

bool header_name_equals(std::string_view a, std::string_view b);

}  // namespace tsr::server
