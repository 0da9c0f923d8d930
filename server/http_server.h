// The HTTP front of `tessera serve`: OpenAI-compatible endpoints, /health, /metrics,
// Bearer authentication, request limits and the bounded queue, over the event-driven
// transport of http_listener (slow clients hold a socket, never a thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tsr {
class Engine;
}

namespace tsr::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int32_t port = 8080;             // 0: any free port (start() returns it)
  int32_t max_queue = 256;         // engine requests that may wait for the running batch
  std::string api_key;             // empty: no authentication
  bool metrics_auth = false;       // /metrics needs the key too
  int32_t max_choices = 128;       // prompts x n of one request, at most
  int64_t max_queue_tokens = 0;    // prompt tokens of unfinished requests; 0: 32 x the context
  size_t max_body_bytes = 16u << 20;
  int32_t max_connections = 4096;  // open at once; more are answered 503 and closed
  std::chrono::milliseconds header_timeout{10'000};  // a request's header, or an idle connection
  std::chrono::milliseconds body_timeout{60'000};    // a request's body, once its header is in
  std::chrono::milliseconds write_timeout{60'000};   // a client that accepts none of its response
  std::string model_id;            // the name /v1/models lists and "model" must match
  std::string model_path;          // accepted as "model" too
  std::vector<std::string> cors_origins;  // browser origins allowed ("*": any); empty: none
};

class HttpServer {
 public:
  // The engine must outlive the server; start() puts it into background-thread mode.
  HttpServer(Engine& engine, ServerOptions options);
  ~HttpServer();  // stop()

  // Binds and serves on a background thread; returns the bound port. Throws tsr::Error
  // when the address cannot be bound.
  int start();
  // Stops accepting, cancels the requests in flight, waits for the handlers. The engine
  // keeps running (it belongs to the caller).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The name a model file is served under: its file name without the extension.
std::string model_id_from_path(const std::string& path);

}  // namespace tsr::server
