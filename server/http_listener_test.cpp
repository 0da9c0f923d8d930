// The HTTP transport against raw sockets: deadlines, the connection limit, keep-alive,
// pipelining, half-close, 100-continue, HTTP/1.0 streams and malformed input. The handler
// here echoes; the OpenAI endpoints on top are server_test's.
#include "server/http_listener.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace tsr::server {
namespace {

using namespace std::chrono_literals;

// GET /stream answers with three chunks; /early is answered from the header; anything
// else echoes "method path body".
class EchoHandler final : public HttpHandler {
 public:
  std::optional<HttpResponse> answer_early(HttpRequest& head) override {
    if (head.path != "/early") return std::nullopt;
    HttpResponse res;
    res.set_content("early", "text/plain");
    return res;
  }
  HttpResponse handle(HttpRequest& req) override {
    HttpResponse res;
    if (req.path == "/forever") {  // until the client or the server goes
      res.set_chunked_content_provider("text/plain", [](DataSink& sink) {
        std::this_thread::sleep_for(5ms);
        return sink.write("tick;", 5);
      }, [this](bool success) { streams_failed += !success; });
      return res;
    }
    if (req.path == "/stream") {
      auto left = std::make_shared<int>(3);
      res.set_chunked_content_provider("text/plain", [left](DataSink& sink) {
        if (!sink.write("part;", 5)) return false;
        if (--*left == 0) sink.done();
        return true;
      }, [this](bool success) { streams_ok += success; });
      return res;
    }
    res.set_content(req.method + " " + req.path + " " + req.body, "text/plain");
    return res;
  }
  void on_complete(HttpRequest&, int) override { ++completed; }
  HttpResponse error_response(int status, const std::string& message) override {
    HttpResponse res;
    res.status = status;
    res.set_content(message, "text/plain");
    return res;
  }
  std::atomic<int> completed{0}, streams_ok{0}, streams_failed{0};
};

// A client socket with a receive timeout.
class Socket {
 public:
  explicit Socket(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    const timeval timeout{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Socket() { ::close(fd_); }
  bool connected() const { return connected_; }
  bool send(const std::string& s) { return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size()); }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Everything until the server closes (or the timeout).
  std::string read_all() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd_, buf, sizeof buf, 0)) > 0;) out.append(buf, size_t(n));
    return out;
  }
  // Reads until `needle` has been seen `times` times.
  std::string read_until(const std::string& needle, int times = 1) {
    std::string out;
    char buf[4096];
    while (count(out, needle) < times) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, size_t(n));
    }
    return out;
  }
  static int count(const std::string& s, const std::string& needle) {
    int n = 0;
    for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
    return n;
  }

 private:
  int fd_;
  bool connected_ = false;
};

class HttpListenerTest : public ::testing::Test {
 protected:
  void start(HttpListenerOptions o = {}) {
    o.workers = 4;
    listener_ = std::make_unique<HttpListener>(handler_, o);
    port_ = listener_->bind("127.0.0.1", 0);
    listener_->start();
  }
  static std::string get(const std::string& path, const std::string& extra = "") {
    return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
  }
  EchoHandler handler_;
  std::unique_ptr<HttpListener> listener_;
  int port_ = 0;
};

TEST_F(HttpListenerTest, KeepAliveAndPipelinedRequestsAreServedInOrder) {
  start();
  Socket s(port_);
  ASSERT_TRUE(s.send(get("/a") + "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz" + get("/c")));
  const std::string all = s.read_until("GET /c ");
  const size_t a = all.find("GET /a "), b = all.find("POST /b xyz"), c = all.find("GET /c ");
  ASSERT_NE(a, std::string::npos) << all;
  ASSERT_NE(b, std::string::npos) << all;
  ASSERT_NE(c, std::string::npos) << all;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_NE(all.find("Connection: keep-alive"), std::string::npos);
}

// A client that sends its request and then shuts down its side still gets the answer.
TEST_F(HttpListenerTest, HalfClosedClientIsAnswered) {
  start();
  Socket s(port_);
  ASSERT_TRUE(s.send("POST /half HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"));
  s.shutdown_write();
  const std::string out = s.read_all();
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200 OK")) << out;
  EXPECT_NE(out.find("POST /half hi"), std::string::npos) << out;
}

TEST_F(HttpListenerTest, SlowHeaderIsCutOffAtItsDeadline) {
  HttpListenerOptions o;
  o.limits.header_timeout = 300ms;
  o.limits.body_timeout = 300ms;
  start(o);
  Socket slow(port_);
  ASSERT_TRUE(slow.send("GET /slow HTTP/1.1\r\nHost: x\r\nX-Slow: a"));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(slow.read_all(), "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);  // closed at the deadline, not at the client's timeout
  Socket idle(port_);
  EXPECT_EQ(idle.read_all(), "");
  // The body has a deadline of its own.
  Socket slow_body(port_);
  ASSERT_TRUE(slow_body.send("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab"));
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(slow_body.read_all(), "");
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 4s);
}

// Slow clients hold sockets, not threads: with many half-sent headers open (more than
// the workers), other clients are served.
TEST_F(HttpListenerTest, SlowClientsDoNotStallOthers) {
  start();
  std::vector<std::unique_ptr<Socket>> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<Socket>(port_));
    ASSERT_TRUE(slow.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"));
  }
  for (int i = 0; i < 100; ++i) {
    slow.push_back(std::make_unique<Socket>(port_));
    ASSERT_TRUE(slow.back()->send("GET /health HTTP/1.1\r\nHo"));
  }
  Socket s(port_);
  ASSERT_TRUE(s.send(get("/ok", "Connection: close\r\n")));
  EXPECT_NE(s.read_all().find("GET /ok "), std::string::npos);
  EXPECT_GE(listener_->connections(), 300);
}

TEST_F(HttpListenerTest, ConnectionsBeyondTheLimitAreRefused) {
  HttpListenerOptions o;
  o.max_connections = 3;
  start(o);
  std::vector<std::unique_ptr<Socket>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<Socket>(port_));
  for (int i = 0; i < 100 && listener_->connections() < 3; ++i) std::this_thread::sleep_for(10ms);
  Socket extra(port_);
  const std::string out = extra.read_all();
  EXPECT_TRUE(out.starts_with("HTTP/1.1 503")) << out;
  EXPECT_NE(out.find("too many connections"), std::string::npos) << out;
  held.clear();  // room again
  for (int i = 0; i < 100 && listener_->connections() > 0; ++i) std::this_thread::sleep_for(10ms);
  Socket later(port_);
  ASSERT_TRUE(later.send(get("/again", "Connection: close\r\n")));
  EXPECT_NE(later.read_all().find("GET /again "), std::string::npos);
}

TEST_F(HttpListenerTest, StreamsAreChunkedOrClosedForHttp10) {
  start();
  Socket s(port_);
  ASSERT_TRUE(s.send(get("/stream")));
  const std::string chunked = s.read_until("0\r\n\r\n");
  EXPECT_NE(chunked.find("Transfer-Encoding: chunked"), std::string::npos) << chunked;
  EXPECT_NE(chunked.find("5\r\npart;\r\n5\r\npart;\r\n5\r\npart;\r\n0\r\n\r\n"), std::string::npos) << chunked;
  Socket old(port_);
  ASSERT_TRUE(old.send("GET /stream HTTP/1.0\r\n\r\n"));
  const std::string plain = old.read_all();
  EXPECT_EQ(plain.find("chunked"), std::string::npos) << plain;
  EXPECT_TRUE(plain.ends_with("\r\n\r\npart;part;part;")) << plain;
  for (int i = 0; i < 100 && handler_.streams_ok < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(handler_.streams_ok, 2);
}

TEST_F(HttpListenerTest, ExpectContinueIsAnswered) {
  start();
  Socket s(port_);
  ASSERT_TRUE(s.send("POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_TRUE(s.read_until("\r\n\r\n").starts_with("HTTP/1.1 100 Continue"));
  ASSERT_TRUE(s.send("body"));
  EXPECT_NE(s.read_until("POST /c body").find("POST /c body"), std::string::npos);
}

// An early answer leaves the body unread, so the connection closes after it.
TEST_F(HttpListenerTest, EarlyAnswerClosesAConnectionWithAnUnreadBody) {
  start();
  Socket s(port_);
  ASSERT_TRUE(s.send("POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"));
  const std::string out = s.read_all();
  EXPECT_TRUE(out.starts_with("HTTP/1.1 200")) << out;
  EXPECT_NE(out.find("Connection: close"), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("early"));
}

TEST_F(HttpListenerTest, MalformedOrOversizedRequestsAreRefused) {
  HttpListenerOptions o;
  o.limits.max_header_bytes = 1024;
  o.limits.max_body_bytes = 10;
  start(o);
  Socket garbage(port_);
  ASSERT_TRUE(garbage.send("NOT HTTP AT ALL\r\n\r\n"));
  EXPECT_TRUE(garbage.read_all().starts_with("HTTP/1.1 400")) << "malformed";
  Socket big_header(port_);
  ASSERT_TRUE(big_header.send(get("/h", "X-Big: " + std::string(2000, 'a') + "\r\n")));
  EXPECT_TRUE(big_header.read_all().starts_with("HTTP/1.1 431"));
  Socket big_body(port_);
  ASSERT_TRUE(big_body.send("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"));
  EXPECT_TRUE(big_body.read_all().starts_with("HTTP/1.1 413"));
}

TEST_F(HttpListenerTest, StopClosesOpenConnections) {
  start();
  Socket s(port_);
  ASSERT_TRUE(s.send("GET /x HTTP/1.1\r\nHo"));
  for (int i = 0; i < 100 && listener_->connections() < 1; ++i) std::this_thread::sleep_for(10ms);
  const auto t0 = std::chrono::steady_clock::now();
  listener_->stop();
  EXPECT_EQ(s.read_all(), "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);  // closed by stop(), not the client's timeout
}

// stop() during a stream: its writes fail, the provider ends, its releaser hears it.
TEST_F(HttpListenerTest, StopEndsAStreamInProgress) {
  start();
  Socket s(port_);
  ASSERT_TRUE(s.send(get("/forever")));
  EXPECT_NE(s.read_until("tick;", 3).find("tick;"), std::string::npos);
  listener_->stop();
  EXPECT_EQ(handler_.streams_failed, 1);
}

TEST(HttpListenerBind, BusyPortIsRefusedWithTheAddress) {
  EchoHandler handler;
  HttpListener first(handler, {});
  const int port = first.bind("127.0.0.1", 0);
  HttpListener second(handler, {});
  try {
    second.bind("127.0.0.1", port);
    FAIL() << "bound a busy port";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on 127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tsr::server
