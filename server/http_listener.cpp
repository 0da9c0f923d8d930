#include "server/http_listener.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <sys/resource.h>

#include "base/error.h"

namespace tsr::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

// A server holds a descriptor per connection; Debian's default soft limit (1024) would
// refuse connections long before max_connections. The soft limit is raised toward the
// hard one, as nginx's worker_rlimit_nofile does.
void raise_open_file_limit(int32_t max_connections) {
  const rlim_t wanted = static_cast<rlim_t>(max_connections) + 256;  // model, plugins, logs
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= wanted) return;
  lim.rlim_cur = std::min(wanted, lim.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < wanted) {
    spdlog::warn("server.max_connections = {} needs {} open files; the limit is {} (ulimit -n)", max_connections,
                 wanted, lim.rlim_cur);
  }
}

}  // namespace

struct HttpListener::Impl {
  HttpHandler& handler;
  HttpListenerOptions options;
  net::thread_pool workers;  // before io: the connections that io's handlers hold use it
  std::mutex mutex;
  std::unordered_map<uint64_t, std::weak_ptr<HttpConnection>> open;  // guarded by mutex
  uint64_t next_id = 0;
  std::atomic<int32_t> count{0};
  bool stopped = false;
  net::io_context io;
  tcp::acceptor acceptor{io};
  net::steady_timer retry{io};
  std::vector<std::thread> threads;
  std::string refusal;  // the 503 for connections beyond the limit

  Impl(HttpHandler& h, HttpListenerOptions o) : handler(h), options(std::move(o)), workers(options.workers) {}

  void accept();
  void on_accept(const error_code& ec, tcp::socket socket);
  void adopt(tcp::socket socket);
  void refuse(tcp::socket socket) const;
};

void HttpListener::Impl::accept() {
  acceptor.async_accept(net::make_strand(io), [this](const error_code& ec, tcp::socket s) { on_accept(ec, std::move(s)); });
}

void HttpListener::Impl::on_accept(const error_code& ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
  if (ec) {
    // Out of descriptors (EMFILE) or memory: a busy retry would spin; try again shortly.
    spdlog::warn("accept failed: {} ({} connections open)", ec.message(), count.load());
    retry.expires_after(std::chrono::milliseconds(50));
    retry.async_wait([this](const error_code& e) {
      if (!e) accept();
    });
    return;
  }
  if (count.load() >= options.max_connections) {
    refuse(std::move(socket));
  } else {
    adopt(std::move(socket));
  }
  accept();
}

void HttpListener::Impl::adopt(tcp::socket socket) {
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // SSE chunks are small and must not wait
  auto conn = std::shared_ptr<HttpConnection>(
      new HttpConnection(std::move(socket), handler, options.limits, workers), [this, id = next_id](HttpConnection* c) {
        delete c;
        std::lock_guard lock(mutex);
        open.erase(id);
        --count;
      });
  {
    std::lock_guard lock(mutex);
    open.emplace(next_id++, conn);
    ++count;
  }
  conn->start();
}

// One non-blocking write of the canned answer: a client that does not read it loses it.
void HttpListener::Impl::refuse(tcp::socket socket) const {
  error_code ignored;
  socket.non_blocking(true, ignored);
  socket.write_some(net::buffer(refusal), ignored);
  socket.shutdown(tcp::socket::shutdown_both, ignored);
}

HttpListener::HttpListener(HttpHandler& handler, HttpListenerOptions options)
    : impl_(std::make_unique<Impl>(handler, std::move(options))) {
  const HttpResponse r = handler.error_response(
      503, "too many connections: this server holds " + std::to_string(impl_->options.max_connections) +
               " ([server] max_connections)");
  impl_->refusal = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + r.content_type +
                   "\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " + std::to_string(r.body.size()) +
                   "\r\n\r\n" + r.body;
}

HttpListener::~HttpListener() { stop(); }

int HttpListener::bind(const std::string& host, int32_t port) {
  Impl& m = *impl_;
  raise_open_file_limit(m.options.max_connections);
  error_code ec;
  const auto endpoints = tcp::resolver(m.io).resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  std::string reason = ec ? ec.message() : "the address does not resolve";
  for (const auto& e : endpoints) {
    m.acceptor.close(ec);
    // SO_REUSEADDR alone: a restarted server binds past TIME_WAIT, but a second server on a
    // busy port fails with EADDRINUSE (SO_REUSEPORT would let both bind and split clients).
    if (!m.acceptor.open(e.endpoint().protocol(), ec) &&
        !m.acceptor.set_option(tcp::acceptor::reuse_address(true), ec) && !m.acceptor.bind(e.endpoint(), ec) &&
        !m.acceptor.listen(net::socket_base::max_listen_connections, ec)) {
      return m.acceptor.local_endpoint().port();
    }
    reason = ec.message();
  }
  m.acceptor.close(ec);
  throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": " + reason, TSR_STATUS_IO_ERROR);
}

void HttpListener::start() {
  Impl& m = *impl_;
  m.accept();
  for (int32_t i = 0; i < std::max(1, m.options.io_threads); ++i) m.threads.emplace_back([&m] { m.io.run(); });
}

void HttpListener::stop() {
  Impl& m = *impl_;
  if (m.stopped) return;
  m.stopped = true;
  net::post(m.io, [&m] {
    error_code ignored;
    m.acceptor.close(ignored);
    m.retry.cancel();
  });
  std::vector<std::shared_ptr<HttpConnection>> live;
  {
    std::lock_guard lock(m.mutex);
    for (auto& [id, weak] : m.open) {
      if (auto c = weak.lock()) live.push_back(std::move(c));
    }
  }
  for (auto& c : live) c->close();
  live.clear();
  m.workers.join();  // handlers end: their streams' writes fail
  m.io.stop();
  for (std::thread& t : m.threads) t.join();
  m.threads.clear();
  // What was posted and not yet run (the closes above, the aborted reads) runs now, so
  // that every socket is closed when stop() returns.
  m.io.restart();
  m.io.poll();
}

int32_t HttpListener::connections() const { return impl_->count.load(); }

}  // namespace tsr::server
