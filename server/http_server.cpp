#include "server/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include <sys/socket.h>

#include "core/engine/engine.h"
#include "base/error.h"
#include "server/access_log.h"
#include "server/admission.h"
#include "server/api_error.h"
#include "server/cors.h"
#include "server/metrics.h"
#include "server/embeddings_api.h"
#include "server/openai_api.h"
#include "server/responses_api.h"
#include "server/tokenize_api.h"

namespace tsr::server {

namespace {

using httplib::Request;
using httplib::Response;

void send_error(Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
  if (status == 503) res.set_header("Retry-After", "1");
}

// Handlers throw; this turns what they threw into OpenAI's error shape.
void on_exception(const Request& req, Response& res, std::exception_ptr ep) {
  try {
    std::rethrow_exception(ep);
  } catch (const ApiError& e) {
    send_error(res, e.status(), e.to_json());
  } catch (const Error& e) {
    send_error(res, 400, ApiError(400, e.what(), "invalid_request_error").to_json());
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", req.method, req.path, e.what());
    send_error(res, 500, error_body(500, std::string("internal error: ") + e.what()));
  }
}

// Error statuses that httplib produces itself (unknown route, oversized body) get a body.
httplib::Server::HandlerResponse on_error_status(const Request& req, Response& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
  const std::string message = res.status == 404   ? "no route " + req.method + " " + req.path
                              : res.status == 413 ? "the request body is too large"
                                                  : "request failed";
  send_error(res, res.status, error_body(res.status, message));
  return httplib::Server::HandlerResponse::Handled;
}

bool authorized(const Request& req, const std::string& api_key) {
  return api_key.empty() || req.get_header_value("Authorization") == "Bearer " + api_key;
}

// cpp-httplib enforces the body limit through Content-Length only: a chunked body, one
// read until the connection closes, or a compressed one (inflated without bound) would
// grow in memory unchecked. Checked before the body is read.
std::optional<ApiError> refuse_unbounded_body(const Request& req) {
  if (req.method != "POST") return std::nullopt;
  const std::string encoding = req.get_header_value("Content-Encoding");
  if (!encoding.empty() && encoding != "identity") {
    return ApiError(415, "compressed request bodies (Content-Encoding: " + encoding + ") are not accepted",
                    "invalid_request_error");
  }
  const std::string transfer = req.get_header_value("Transfer-Encoding");
  if ((!transfer.empty() && transfer != "identity") || !req.has_header("Content-Length")) {
    return ApiError(411, "the request body needs a Content-Length (chunked bodies are not accepted)",
                    "invalid_request_error");
  }
  return std::nullopt;
}

}  // namespace

std::string model_id_from_path(const std::string& path) { return std::filesystem::path(path).stem().string(); }

struct HttpServer::Impl {
  Engine& engine;
  ServerOptions options;
  std::atomic<bool> stopping{false};
  std::shared_ptr<Metrics> metrics = std::make_shared<Metrics>();
  std::shared_ptr<Admission> admission;
  ApiContext ctx;
  ResponseStore responses{kResponseStoreEntries, kResponseStoreBytes, kResponseStoreTtl};  // /v1/responses
  Cors cors;
  httplib::Server http;
  std::thread thread;
  int listen_fd = -1;  // the listening socket, seen by the socket-options hook

  Impl(Engine& e, ServerOptions o)
      : engine(e),
        options(std::move(o)),
        admission(std::make_shared<Admission>(options.max_queue)),
        ctx{e, options.model_id, options.model_path, metrics, admission, options.max_choices, stopping,
            std::make_shared<std::atomic<int32_t>>(0)},
        cors(options.cors_origins) {}

  void configure();
  void routes();
};

void HttpServer::Impl::configure() {
  // Every streaming client holds a thread for its whole response: size the pool for a
  // full batch plus a full queue, and a few threads to answer everyone else.
  // Capped: beyond it, connections wait in httplib's queue for a thread.
  const size_t threads = std::min<size_t>(size_t(engine.config().scheduler.max_seqs) + size_t(options.max_queue) + 8, 2048);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(options.max_body_bytes);
  // SO_REUSEADDR alone: a restarted server binds past TIME_WAIT, but a second server on a
  // busy port fails with EADDRINUSE. httplib's default also sets SO_REUSEPORT, under which
  // the second one binds too and the kernel splits the connections between the two.
  http.set_socket_options([this](socket_t fd) {
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = fd;
  });
  http.set_exception_handler(on_exception);
  http.set_error_handler(httplib::Server::HandlerWithResponse(on_error_status));
  http.set_pre_routing_handler([this](const Request& req, Response& res) {
    access_record_begin();
    if (req.method == "OPTIONS") {  // preflights carry no credentials
      cors.preflight(req, res);
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool protected_path = req.path.starts_with("/v1/") || req.path == "/tokenize" || req.path == "/detokenize" ||
                                (options.metrics_auth && req.path == "/metrics");
    if (protected_path && !authorized(req, options.api_key)) {
      send_error(res, 401, ApiError(401, "invalid or missing API key (Authorization: Bearer ...)",
                                    "invalid_request_error", "", "invalid_api_key").to_json());
      return httplib::Server::HandlerResponse::Handled;
    }
    if (const auto refused = refuse_unbounded_body(req)) {
      send_error(res, refused->status(), refused->to_json());
      res.set_header("Connection", "close");  // the unread body must not be taken for a request
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_post_routing_handler([this](const Request& req, Response& res) { cors.decorate(req, res); });
  http.set_logger([this](const Request& req, const Response& res) {
    metrics->on_response(res.status);
    access_log_write(req.remote_addr, req.method, req.path, res.status);
  });
  routes();
}

void HttpServer::Impl::routes() {
  // 500 once the engine has failed (its device is lost), as vLLM's: orchestrators restart it.
  http.Get("/health", [this](const Request&, Response& res) {
    if (const std::optional<std::string> failure = engine.failure()) {
      res.status = 500;
      res.set_content(nlohmann::json{{"status", "error"}, {"error", *failure}}.dump(), "application/json");
      return;
    }
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http.Get("/metrics", [this](const Request&, Response& res) {
    res.set_content(metrics->render(engine.stats()), "text/plain; version=0.0.4");
  });
  http.Get("/v1/models", [this](const Request& q, Response& r) { handle_models(ctx, q, r); });
  http.Get(R"(/v1/models/(.+))", [this](const Request& q, Response& r) { handle_model(ctx, q, r); });
  http.Post("/v1/completions", [this](const Request& q, Response& r) { handle_completions(ctx, q, r); });
  http.Post("/v1/chat/completions", [this](const Request& q, Response& r) { handle_chat_completions(ctx, q, r); });
  http.Post("/v1/responses", [this](const Request& q, Response& r) { handle_responses(ctx, responses, q, r); });
  http.Post("/v1/embeddings", [this](const Request& q, Response& r) { handle_embeddings(ctx, q, r); });
  http.Post("/tokenize", [this](const Request& q, Response& r) { handle_tokenize(ctx, q, r); });
  http.Post("/detokenize", [this](const Request& q, Response& r) { handle_detokenize(ctx, q, r); });
}

HttpServer::HttpServer(Engine& engine, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {
  impl_->configure();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::start() {
  Impl& m = *impl_;
  errno = 0;
  const int port = m.options.port == 0 ? m.http.bind_to_any_port(m.options.host)
                                       : (m.http.bind_to_port(m.options.host, m.options.port) ? m.options.port : -1);
  if (port < 0) {
    // httplib closes the socket after the failed bind(), which leaves errno as bind set it.
    const int err = errno;
    throw Error("cannot listen on " + m.options.host + ":" + std::to_string(m.options.port) + ": " +
                    (err ? std::strerror(err) : "the address does not resolve or cannot be bound"),
                TSR_STATUS_IO_ERROR);
  }
  // Debian's compiled cpp-httplib listens with a backlog of 5: a burst of clients would
  // then see dropped SYNs and reconnect a second later. Listening again resizes it.
  if (m.listen_fd >= 0) ::listen(m.listen_fd, SOMAXCONN);
  m.engine.start();
  m.thread = std::thread([&m] { m.http.listen_after_bind(); });
  // stop() does nothing to a server that has not begun listening; a signal that came during
  // the model load asks for it right after this returns.
  for (int i = 0; i < 5000 && !m.http.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  spdlog::info("serving {} on http://{}:{} (queue {}{})", m.options.model_id, m.options.host, port,
               m.options.max_queue, m.options.api_key.empty() ? "" : ", API key required");
  return port;
}

void HttpServer::stop() {
  Impl& m = *impl_;
  if (!m.thread.joinable()) return;
  // Responses in flight see `stopping`, cancel their requests and end properly (a stream
  // with its finish reason and [DONE]); httplib's stop() would cut them off mid-body.
  m.stopping = true;
  for (int i = 0; i < 1000 && *m.ctx.in_flight > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  m.http.stop();
  m.thread.join();
}

}  // namespace tsr::server
