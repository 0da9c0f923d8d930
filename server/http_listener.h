// The listening socket and the threads of the HTTP transport: I/O threads that accept
// and run every connection's reads and writes (Asio, one strand per connection), and the
// worker pool that runs handlers. Connections beyond `max_connections` are answered 503
// and closed at once; the process's open-file limit is raised to hold them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/http_connection.h"

namespace tsr::server {

struct HttpListenerOptions {
  HttpLimits limits;
  int32_t max_connections = 4096;
  size_t workers = 64;   // handler threads: each streamed response holds one
  int32_t io_threads = 1;
};

class HttpListener {
 public:
  // `handler` must outlive the listener.
  HttpListener(HttpHandler& handler, HttpListenerOptions options);
  ~HttpListener();  // stop()

  // Binds and listens; returns the bound port (`port` 0: any free one). Throws tsr::Error
  // naming the address and the reason.
  int bind(const std::string& host, int32_t port);
  // Starts the I/O threads.
  void start();
  // Closes the listening socket and every connection (streams' writes fail), waits for
  // the handlers and the threads. Idempotent.
  void stop();

  int32_t connections() const;  // open now

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tsr::server
