// One client socket's HTTP/1.1 exchanges, event-driven (Boost.Beast on Asio): a socket
// costs no thread while its client is slow. The header and then the body are read under
// deadlines; requests answered from the header alone (refusals, preflights, /health) are
// answered on the I/O thread; the rest run on the worker pool, and their responses are
// written whole or streamed (chunked) through a bounded output. Keep-alive, pipelined
// requests (served in order), half-closed clients (answered, then closed) and HTTP/1.0.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/http_message.h"

namespace tsr::server {

struct HttpLimits {
  size_t max_header_bytes = 64u << 10;
  size_t max_body_bytes = 16u << 20;
  // From the connection's first byte, or the end of its previous exchange, to the header's
  // end: slow or idle clients are closed.
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  // The most a client may take to accept any bytes of its response.
  std::chrono::milliseconds write_timeout{60'000};
};

// What the connection asks of the server. Thread-safe: called from many connections.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // On the I/O thread, with the header and before the body is read: a response ends the
  // exchange (the body, if any, is not read and the connection is closed). Must not block.
  virtual std::optional<HttpResponse> answer_early(HttpRequest& head) = 0;
  // On a worker thread, with the body; must not throw.
  virtual HttpResponse handle(HttpRequest& request) = 0;
  // Once the response is written or has failed (`status` is what was sent).
  virtual void on_complete(HttpRequest& request, int status) = 0;
  // The body of an error the transport answers itself (bad framing, timeouts, limits).
  virtual HttpResponse error_response(int status, const std::string& message) = 0;
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  // `socket` has a strand as its executor. `handler`, `limits` and `workers` must outlive
  // the connection (the listener's).
  HttpConnection(boost::asio::ip::tcp::socket socket, HttpHandler& handler, const HttpLimits& limits,
                 boost::asio::thread_pool& workers);
  ~HttpConnection();

  void start();
  // Ends the connection now (server stop); any thread. A stream's writes then fail.
  void close();

 private:
  class StreamSink;
  struct Transport;

  void read_header();
  void on_header(const boost::system::error_code& ec);
  void read_body();
  void read_sized_body();
  void on_body(const boost::system::error_code& ec);
  void serve();  // on a worker
  void stream(HttpResponse res);
  void write_whole(HttpResponse res);
  void finish(int status, bool keep_alive);
  void refuse(int status, const std::string& message);
  void linger_close();
  void set_sink(const std::shared_ptr<StreamSink>& sink);
  std::shared_ptr<StreamSink> current_sink();
  void discard();

  std::unique_ptr<Transport> t_;
  HttpHandler& handler_;
  const HttpLimits& limits_;
  boost::asio::thread_pool& workers_;
  HttpRequest request_;
  bool keep_alive_ = false;
  bool http10_ = false;
  std::string out_;                  // a whole response being written
  std::mutex sink_mutex_;
  std::weak_ptr<StreamSink> sink_;   // the stream being written, for close(); guarded by sink_mutex_
};

}  // namespace tsr::server
