#include "server/http_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <thread>

#include "core/engine/engine.h"
#include "base/error.h"
#include "server/access_log.h"
#include "server/admission.h"
#include "server/api_error.h"
#include "server/cors.h"
#include "server/metrics.h"
#include "server/embeddings_api.h"
#include "server/http_listener.h"
#include "server/openai_api.h"
#include "server/responses_api.h"
#include "server/tokenize_api.h"

namespace tsr::server {

namespace {

void send_error(HttpResponse& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
  if (status == 503) res.set_header("Retry-After", "1");
}

// Handlers throw; this turns what they threw into OpenAI's error shape.
void on_exception(const HttpRequest& req, HttpResponse& res, std::exception_ptr ep) {
  res = HttpResponse{};
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

bool authorized(const HttpRequest& req, const std::string& api_key) {
  return api_key.empty() || req.get_header_value("Authorization") == "Bearer " + api_key;
}

// Bodies are bounded by their Content-Length, checked against the limit before they are
// read: a chunked body, or a compressed one (inflated without bound), is refused.
std::optional<ApiError> refuse_unbounded_body(const HttpRequest& req) {
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

using Route = std::function<void(const HttpRequest&, HttpResponse&)>;

}  // namespace

std::string model_id_from_path(const std::string& path) { return std::filesystem::path(path).stem().string(); }

struct HttpServer::Impl final : HttpHandler {
  Engine& engine;
  ServerOptions options;
  std::atomic<bool> stopping{false};
  std::shared_ptr<Metrics> metrics = std::make_shared<Metrics>();
  std::shared_ptr<Admission> admission;
  ApiContext ctx;
  ResponseStore responses{kResponseStoreEntries, kResponseStoreBytes, kResponseStoreTtl};  // /v1/responses
  Cors cors;
  std::map<std::pair<std::string, std::string>, Route> routes;  // (method, path)
  Route model_route;                                            // GET /v1/models/{id}
  std::unique_ptr<HttpListener> listener;
  bool started = false;

  Impl(Engine& e, ServerOptions o)
      : engine(e),
        options(std::move(o)),
        admission(std::make_shared<Admission>(options.max_queue, options.max_queue_tokens > 0
                                                                     ? options.max_queue_tokens
                                                                     : 32 * int64_t(e.context_length()))),
        ctx{e, options.model_id, options.model_path, metrics, admission, options.max_choices, stopping,
            std::make_shared<std::atomic<int32_t>>(0)},
        cors(options.cors_origins) {
    add_routes();
    listener = std::make_unique<HttpListener>(*this, listener_options());
  }

  HttpListenerOptions listener_options() const;
  void add_routes();
  const Route* find_route(const HttpRequest& req) const;
  HttpResponse health() const;

  std::optional<HttpResponse> answer_early(HttpRequest& head) override;
  HttpResponse handle(HttpRequest& request) override;
  void on_complete(HttpRequest& request, int status) override;
  HttpResponse error_response(int status, const std::string& message) override;
};

HttpListenerOptions HttpServer::Impl::listener_options() const {
  HttpListenerOptions o;
  o.limits.max_body_bytes = options.max_body_bytes;
  o.limits.header_timeout = options.header_timeout;
  o.limits.body_timeout = options.body_timeout;
  o.limits.write_timeout = options.write_timeout;
  o.max_connections = options.max_connections;
  // Every streaming response holds a worker for its whole length: a full batch plus a
  // full queue, and a few to answer everyone else. Slow or idle sockets hold none.
  o.workers = std::min<size_t>(size_t(engine.config().scheduler.max_seqs) + size_t(options.max_queue) + 8, 2048);
  return o;
}

void HttpServer::Impl::add_routes() {
  routes[{"GET", "/v1/models"}] = [this](const HttpRequest& q, HttpResponse& r) { handle_models(ctx, q, r); };
  routes[{"POST", "/v1/completions"}] = [this](const HttpRequest& q, HttpResponse& r) { handle_completions(ctx, q, r); };
  routes[{"POST", "/v1/chat/completions"}] = [this](const HttpRequest& q, HttpResponse& r) {
    handle_chat_completions(ctx, q, r);
  };
  routes[{"POST", "/v1/responses"}] = [this](const HttpRequest& q, HttpResponse& r) {
    handle_responses(ctx, responses, q, r);
  };
  routes[{"POST", "/v1/embeddings"}] = [this](const HttpRequest& q, HttpResponse& r) { handle_embeddings(ctx, q, r); };
  routes[{"POST", "/tokenize"}] = [this](const HttpRequest& q, HttpResponse& r) { handle_tokenize(ctx, q, r); };
  routes[{"POST", "/detokenize"}] = [this](const HttpRequest& q, HttpResponse& r) { handle_detokenize(ctx, q, r); };
  model_route = [this](const HttpRequest& q, HttpResponse& r) { handle_model(ctx, q.path.substr(11), r); };
}

const Route* HttpServer::Impl::find_route(const HttpRequest& req) const {
  if (req.method == "GET" && req.path.starts_with("/v1/models/") && req.path.size() > 11) return &model_route;
  const auto it = routes.find({req.method, req.path});
  return it == routes.end() ? nullptr : &it->second;
}

// 500 once the engine has failed (its device is lost), as vLLM's: orchestrators restart it.
HttpResponse HttpServer::Impl::health() const {
  HttpResponse res;
  if (const std::optional<std::string> failure = engine.failure()) {
    res.status = 500;
    res.set_content(nlohmann::json{{"status", "error"}, {"error", *failure}}.dump(), "application/json");
    return res;
  }
  res.set_content(R"({"status":"ok"})", "application/json");
  return res;
}

// Answered on the I/O thread from the header alone, so that no queue of slow requests or
// busy workers can delay them: preflights, refusals, /health and /metrics.
std::optional<HttpResponse> HttpServer::Impl::answer_early(HttpRequest& req) {
  req.record = std::make_shared<AccessRecord>();
  HttpResponse res;
  const bool metrics_path = req.method == "GET" && req.path == "/metrics";
  const bool protected_path = req.path.starts_with("/v1/") || req.path == "/tokenize" || req.path == "/detokenize" ||
                              (options.metrics_auth && metrics_path);
  if (req.method == "OPTIONS") {  // preflights carry no credentials
    cors.preflight(req, res);
  } else if (protected_path && !authorized(req, options.api_key)) {
    send_error(res, 401, ApiError(401, "invalid or missing API key (Authorization: Bearer ...)",
                                  "invalid_request_error", "", "invalid_api_key").to_json());
  } else if (req.method == "GET" && req.path == "/health") {
    res = health();
  } else if (metrics_path) {
    res.set_content(metrics->render(engine.stats()), "text/plain; version=0.0.4");
  } else if (!find_route(req)) {
    send_error(res, 404, error_body(404, "no route " + req.method + " " + req.path.substr(0, 256)));
  } else if (const auto refused = refuse_unbounded_body(req)) {
    send_error(res, refused->status(), refused->to_json());
  } else {
    return std::nullopt;
  }
  cors.decorate(req, res);
  return res;
}

HttpResponse HttpServer::Impl::handle(HttpRequest& req) {
  access_record_begin(std::static_pointer_cast<AccessRecord>(req.record));
  HttpResponse res;
  try {
    (*find_route(req))(req, res);
  } catch (...) {
    on_exception(req, res, std::current_exception());
  }
  access_record_end();
  cors.decorate(req, res);
  return res;
}

void HttpServer::Impl::on_complete(HttpRequest& req, int status) {
  metrics->on_response(status);
  access_log_write(std::static_pointer_cast<AccessRecord>(req.record).get(), req.remote_addr, req.method, req.path,
                   status);
}

HttpResponse HttpServer::Impl::error_response(int status, const std::string& message) {
  HttpResponse res;
  send_error(res, status, error_body(status, message));
  return res;
}

HttpServer::HttpServer(Engine& engine, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::start() {
  Impl& m = *impl_;
  const int port = m.listener->bind(m.options.host, m.options.port);
  m.engine.start();
  m.listener->start();
  m.started = true;
  spdlog::info("serving {} on http://{}:{} (queue {} requests, {} prompt tokens{})", m.options.model_id,
               m.options.host, port, m.options.max_queue, m.admission->max_tokens(),
               m.options.api_key.empty() ? "" : ", API key required");
  return port;
}

void HttpServer::stop() {
  Impl& m = *impl_;
  if (!m.started) return;
  m.started = false;
  // Responses in flight see `stopping`, cancel their requests and end properly (a stream
  // with its finish reason and [DONE]) before the connections are closed.
  m.stopping = true;
  for (int i = 0; i < 1000 && *m.ctx.in_flight > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  m.listener->stop();
}

}  // namespace tsr::server
