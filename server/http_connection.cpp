#include "server/http_connection.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <mutex>

namespace tsr::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using error_code = boost::system::error_code;

struct HttpConnection::Transport {
  explicit Transport(net::ip::tcp::socket socket) : stream(std::move(socket)) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  std::optional<http::request_parser<http::string_body>> parser;
  char scratch[4096];  // what a closing client still sends is read into it and dropped
};

namespace {

// Output a streamed response may hold for a slow client before its writer waits.
constexpr size_t kStreamHighWater = 256u << 10;
// How long a closing connection drains what the client still sends, so that the kernel
// does not answer it with a reset that could destroy the response in flight.
constexpr auto kLingerTime = std::chrono::seconds(2);

bool has_body(int status) { return status >= 200 && status != 204 && status != 304; }

// Status line and headers, framed by Content-Length (`length`) or chunked (nullopt;
// HTTP/1.0: until the connection closes).
std::string head_of(const HttpResponse& res, std::optional<size_t> length, bool keep_alive, bool http10) {
  std::string out = "HTTP/1.1 " + std::to_string(res.status) + " ";
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(res.status)));
  out.append(reason.data(), reason.size());
  out += "\r\n";
  for (const auto& [name, value] : res.headers) {
    if (header_name_equals(name, "Connection")) continue;  // decided below
    out += name + ": " + value + "\r\n";
  }
  if (!res.content_type.empty()) out += "Content-Type: " + res.content_type + "\r\n";
  if (length) {
    if (has_body(res.status)) out += "Content-Length: " + std::to_string(*length) + "\r\n";
  } else if (!http10) {
    out += "Transfer-Encoding: chunked\r\n";
  }
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out;
}

bool wants_close(const HttpResponse& res) {
  for (const auto& [name, value] : res.headers) {
    if (header_name_equals(name, "Connection") && header_name_equals(value, "close")) return true;
  }
  return false;
}

HttpRequest head_of(const http::request_parser<http::string_body>& parser, const std::string& remote) {
  const auto& msg = parser.get();
  HttpRequest req;
  req.method = std::string(msg.method_string());
  const std::string_view target(msg.target().data(), msg.target().size());
  req.path = std::string(target.substr(0, target.find('?')));
  req.remote_addr = remote;
  for (const auto& field : msg) req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  return req;
}

}  // namespace

// A streamed body's output, shared by the worker that writes it and the strand that sends
// it: bytes queue in `outbox_` while one write is on the wire; the writer waits while more
// than kStreamHighWater is queued, so a slow client holds a bounded amount of memory.
class HttpConnection::StreamSink : public DataSink, public std::enable_shared_from_this<StreamSink> {
 public:
  StreamSink(std::shared_ptr<HttpConnection> conn, bool chunked) : conn_(std::move(conn)), chunked_(chunked) {}

  bool write(const char* data, size_t size) override {
    if (size == 0) return !broken();
    std::string framed;
    if (chunked_) {
      char len[24];
      framed = std::string(len, static_cast<size_t>(std::snprintf(len, sizeof len, "%zx\r\n", size)));
    }
    framed.append(data, size);
    if (chunked_) framed += "\r\n";
    return push(std::move(framed));
  }

  void done() override {
    ended_ = true;
    if (chunked_) push("0\r\n\r\n");
  }

  bool push(std::string bytes) {
    std::unique_lock lock(mutex_);
    if (broken_) return false;
    outbox_ += bytes;
    if (!writing_) {
      writing_ = true;
      net::post(conn_->t_->stream.get_executor(), [self = shared_from_this()] { self->flush(); });
    }
    cv_.wait(lock, [&] { return broken_ || outbox_.size() < kStreamHighWater; });
    return !broken_;
  }

  // Waits until everything queued is written; false when the client is gone.
  bool drain() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return broken_ || (!writing_ && outbox_.empty()); });
    return !broken_;
  }

  bool ended() const { return ended_; }

  void fail() {
    std::lock_guard lock(mutex_);
    broken_ = true;
    cv_.notify_all();
  }

 private:
  bool broken() {
    std::lock_guard lock(mutex_);
    return broken_;
  }

  // On the strand: sends what is queued, one write at a time.
  void flush() {
    std::unique_lock lock(mutex_);
    if (broken_ || outbox_.empty()) {
      writing_ = false;
      cv_.notify_all();
      return;
    }
    inflight_.swap(outbox_);
    outbox_.clear();
    cv_.notify_all();
    lock.unlock();
    Transport& t = *conn_->t_;
    t.stream.expires_after(conn_->limits_.write_timeout);
    net::async_write(t.stream, net::buffer(inflight_), [self = shared_from_this()](const error_code& ec, size_t) {
      if (!ec) return self->flush();
      self->fail();
      error_code ignored;
      self->conn_->t_->stream.socket().close(ignored);
    });
  }

  std::shared_ptr<HttpConnection> conn_;
  const bool chunked_;
  bool ended_ = false;  // the writer's own
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string outbox_, inflight_;
  bool writing_ = false, broken_ = false;
};

HttpConnection::HttpConnection(net::ip::tcp::socket socket, HttpHandler& handler, const HttpLimits& limits,
                               net::thread_pool& workers)
    : t_(std::make_unique<Transport>(std::move(socket))), handler_(handler), limits_(limits), workers_(workers) {
  error_code ec;
  const auto remote = t_->stream.socket().remote_endpoint(ec);
  if (!ec) request_.remote_addr = remote.address().to_string();
}

HttpConnection::~HttpConnection() = default;

void HttpConnection::start() {
  net::dispatch(t_->stream.get_executor(), [self = shared_from_this()] { self->read_header(); });
}

// The stream is set on a worker and read by close() from any thread.
void HttpConnection::set_sink(const std::shared_ptr<StreamSink>& sink) {
  std::lock_guard lock(sink_mutex_);
  sink_ = sink;
}

std::shared_ptr<HttpConnection::StreamSink> HttpConnection::current_sink() {
  std::lock_guard lock(sink_mutex_);
  return sink_.lock();
}

void HttpConnection::close() {
  if (auto sink = current_sink()) sink->fail();
  net::post(t_->stream.get_executor(), [self = shared_from_this()] {
    error_code ignored;
    self->t_->stream.socket().close(ignored);
  });
}

void HttpConnection::read_header() {
  Transport& t = *t_;
  t.parser.emplace();
  t.parser->header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
  t.parser->body_limit(limits_.max_body_bytes);
  t.stream.expires_after(limits_.header_timeout);
  http::async_read_header(t.stream, t.buffer, *t.parser,
                          [self = shared_from_this()](const error_code& ec, size_t) { self->on_header(ec); });
}

void HttpConnection::on_header(const error_code& ec) {
  if (ec == http::error::header_limit) return refuse(431, "the request header is too large");
  if (ec == http::error::body_limit) return refuse(413, "the request body is too large");
  // A deadline that passes closes the socket (beast's tcp_stream does): a slow client gets
  // no answer, as nginx's client_header_timeout gives none.
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof || ec == net::error::operation_aborted ||
      ec == net::error::connection_reset || ec == net::error::bad_descriptor) {
    return;  // the client closed (or the server stops): nothing to answer
  }
  if (ec) return refuse(400, "malformed HTTP request: " + ec.message());
  const std::string remote = std::move(request_.remote_addr);
  request_ = head_of(*t_->parser, remote);
  const auto& msg = t_->parser->get();
  http10_ = msg.version() < 11;
  keep_alive_ = msg.keep_alive();
  if (std::optional<HttpResponse> early = handler_.answer_early(request_)) {
    if (!t_->parser->is_done()) keep_alive_ = false;  // its body stays unread
    return write_whole(std::move(*early));
  }
  read_body();
}

void HttpConnection::read_body() {
  Transport& t = *t_;
  if (t.parser->is_done()) return on_body({});
  auto read = [self = shared_from_this()] {
    self->t_->stream.expires_after(self->limits_.body_timeout);
    if (self->t_->parser->content_length()) return self->read_sized_body();
    http::async_read(self->t_->stream, self->t_->buffer, *self->t_->parser,
                     [self](const error_code& ec, size_t) { self->on_body(ec); });
  };
  if (!http10_ && header_name_equals(request_.get_header_value("Expect"), "100-continue")) {
    out_ = "HTTP/1.1 100 Continue\r\n\r\n";
    t.stream.expires_after(limits_.write_timeout);
    net::async_write(t.stream, net::buffer(out_), [self = shared_from_this(), read](const error_code& ec, size_t) {
      if (!ec) read();
    });
    return;
  }
  read();
}

// A body of known length (within the limit: the parser checked it with the header) is
// read straight into the request, as large reads as the socket has: through the parser,
// 10 MB took 80 ms in 64 KiB steps, against 8 ms this way. What follows it stays in the
// socket for the next request.
void HttpConnection::read_sized_body() {
  Transport& t = *t_;
  const size_t length = static_cast<size_t>(*t.parser->content_length());
  request_.body.resize(length);
  const size_t have = net::buffer_copy(net::buffer(request_.body), t.buffer.data());
  t.buffer.consume(have);
  if (have == length) return on_body({});
  net::async_read(t.stream, net::buffer(request_.body.data() + have, length - have),
                  [self = shared_from_this()](const error_code& ec, size_t) { self->on_body(ec); });
}

void HttpConnection::on_body(const error_code& ec) {
  if (ec == http::error::body_limit) return refuse(413, "the request body is too large");
  if (ec == beast::error::timeout || ec == http::error::partial_message || ec == net::error::eof || ec == net::error::operation_aborted ||
      ec == net::error::connection_reset || ec == net::error::bad_descriptor) {
    return;
  }
  if (ec) return refuse(400, "malformed HTTP request: " + ec.message());
  if (!t_->parser->content_length()) request_.body = t_->parser->release().body();
  t_->stream.expires_never();  // the handler may take long; the writes set their own
  net::post(workers_, [self = shared_from_this()] { self->serve(); });
}

void HttpConnection::serve() {
  HttpResponse res = handler_.handle(request_);
  if (res.provider) return stream(std::move(res));
  net::post(t_->stream.get_executor(), [self = shared_from_this(), res = std::move(res)]() mutable {
    self->write_whole(std::move(res));
  });
}

// On a worker: the provider runs here until it ends the body or the client leaves.
void HttpConnection::stream(HttpResponse res) {
  const bool keep_alive = keep_alive_ && !http10_ && !wants_close(res);
  auto sink = std::make_shared<StreamSink>(shared_from_this(), !http10_);
  set_sink(sink);
  bool ok = sink->push(head_of(res, std::nullopt, keep_alive, http10_));
  try {
    while (ok && !sink->ended()) ok = res.provider(*sink);
  } catch (const std::exception& e) {  // the body cannot go on; the worker thread must not end
    spdlog::error("{} {}: the streamed response failed: {}", request_.method, request_.path, e.what());
    ok = false;
  }
  const bool success = ok && sink->ended() && sink->drain();
  if (res.releaser) res.releaser(success);
  res.provider = nullptr;  // what it holds (a generation job) goes now
  net::post(t_->stream.get_executor(), [self = shared_from_this(), status = res.status, keep = keep_alive && success] {
    self->set_sink(nullptr);
    self->finish(status, keep);
  });
}

// On the strand.
void HttpConnection::write_whole(HttpResponse res) {
  const bool keep_alive = keep_alive_ && !wants_close(res);
  out_ = head_of(res, res.body.size(), keep_alive, http10_);
  if (has_body(res.status)) out_ += res.body;
  t_->stream.expires_after(limits_.write_timeout);
  net::async_write(t_->stream, net::buffer(out_),
                   [self = shared_from_this(), status = res.status, keep_alive](const error_code& ec, size_t) {
                     self->finish(status, keep_alive && !ec);
                   });
}

void HttpConnection::finish(int status, bool keep_alive) {
  handler_.on_complete(request_, status);
  HttpRequest next;
  next.remote_addr = std::move(request_.remote_addr);
  request_ = std::move(next);
  if (keep_alive) return read_header();
  linger_close();
}

// An error the transport answers itself; the connection closes after it (what follows
// in the byte stream cannot be trusted to start a request).
void HttpConnection::refuse(int status, const std::string& message) {
  keep_alive_ = false;
  if (request_.method.empty()) request_.method = "-";
  write_whole(handler_.error_response(status, message));
}

// Sends FIN, then reads and drops what the client still sends for a short while before
// the socket closes (when this object goes).
void HttpConnection::linger_close() {
  Transport& t = *t_;
  error_code ignored;
  t.stream.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  t.stream.expires_after(kLingerTime);  // once: a client that keeps sending is cut off at it
  discard();
}

void HttpConnection::discard() {
  t_->stream.async_read_some(net::buffer(t_->scratch), [self = shared_from_this()](const error_code& ec, size_t) {
    if (!ec) self->discard();
  });
}

}  // namespace tsr::server
