// `tessera serve`: the OpenAI-compatible HTTP server (server/) over one engine.
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "apps/tessera/app_config.h"
#include "apps/tessera/commands.h"
#include "core/config/config.h"
#include "core/engine/engine.h"
#include "base/error.h"
#include "server/http_server.h"

namespace tsr::app {

namespace {

struct ServeFlags {
  EngineFlags engine;
  std::string host, api_key, api_key_file, alias;
  std::optional<int32_t> port, max_queue;
  std::optional<uint64_t> max_body;
};

// The first line of an API key file (a key file is small: 4 KiB at most).
std::string read_api_key_file(const std::string& path) {
  constexpr size_t kMax = 4096;
  if (!std::filesystem::is_regular_file(path)) throw Error("--api-key-file " + path + " is not a regular file");
  std::ifstream in(path);
  std::string key;
  if (!in || std::filesystem::file_size(path) > kMax || !std::getline(in, key)) {
    throw Error("--api-key-file " + path + ": cannot read a key (one line, at most 4 KiB)");
  }
  if (!key.empty() && key.back() == '\r') key.pop_back();
  if (key.empty()) throw Error("--api-key-file " + path + ": the first line is empty");
  return key;
}

// The API key, from the first of: --api-key (visible to every local user in
// /proc/PID/cmdline, hence the warning), --api-key-file, TESSERA_API_KEY, [server] api_key.
std::string api_key(const ServeFlags& f, const std::string& configured) {
  if (!f.api_key.empty()) {
    spdlog::warn("--api-key is visible in the process list; TESSERA_API_KEY or --api-key-file keep it out");
    return f.api_key;
  }
  if (!f.api_key_file.empty()) return read_api_key_file(f.api_key_file);
  if (const char* env = std::getenv("TESSERA_API_KEY"); env != nullptr && *env != '\0') return env;
  return configured;
}

// Flags override the config file; the config's [server] section supplies the rest.
Config load_config(const ServeFlags& f) {
  Config c = load_app_config(f.engine);
  if (!f.alias.empty()) c.server.alias = f.alias;
  if (!f.host.empty()) c.server.host = f.host;
  if (f.port) c.server.port = *f.port;
  if (f.max_queue) c.server.max_queue = *f.max_queue;
  c.server.api_key = api_key(f, c.server.api_key);
  return c;
}

server::ServerOptions server_options(const Config& c, const ServeFlags& f) {
  server::ServerOptions o;
  o.host = c.server.host;
  o.port = c.server.port;
  o.max_queue = c.server.max_queue;
  o.api_key = c.server.api_key;
  o.metrics_auth = c.server.metrics_auth;
  o.max_choices = c.server.max_choices;
  o.max_queue_tokens = c.server.max_queue_tokens;
  o.max_connections = c.server.max_connections;
  const auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
  o.header_timeout = ms(c.server.header_timeout_s);
  o.body_timeout = ms(c.server.body_timeout_s);
  o.write_timeout = ms(c.server.write_timeout_s);
  if (f.max_body) o.max_body_bytes = *f.max_body;
  o.model_id = c.server.alias.empty() ? server::model_id_from_path(c.model.path) : c.server.alias;
  o.model_path = c.model.path;
  o.cors_origins = c.server.cors_origins;
  return o;
}

// Signals whose default action ends the process, blocked before any thread starts (threads
// inherit the mask) so that only this thread receives them, synchronously: each drains
// the server (streams finish, then it exits 0) instead of killing it mid-response. SIGHUP
// too, as a closed terminal or a supervisor's reload would otherwise kill it.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int serve(const ServeFlags& f) {
  const sigset_t signals = block_stop_signals();
  const Config config = load_config(f);
  auto engine = Engine::create(config);
  server::HttpServer http(*engine, server_options(config, f));
  const int port = http.start();
  // The bound port on stdout lets scripts that ask for port 0 find the server.
  std::printf("listening on %s:%d\n", config.server.host.c_str(), port);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {} ({}): shutting down, draining the running requests", sig, sigabbrev_np(sig));
  http.stop();
  engine->stop();
  return 0;
}

}  // namespace

std::function<int()> register_serve(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  add_engine_flags(app, f->engine, {.ctx_size = true, .chat_template = true});
  app.add_option("--alias", f->alias, "the model id clients request and /v1/models lists (default: the file name)");
  app.add_option("--host", f->host, "address to listen on (default 127.0.0.1)");
  app.add_option("--port", f->port, "port (default 8080; 0: any free port, printed on stdout)")->check(CLI::Range(0, 65535));
  app.add_option("--api-key", f->api_key,
                 "require Authorization: Bearer KEY on /v1/ endpoints (visible in the process list: prefer "
                 "TESSERA_API_KEY or --api-key-file)");
  app.add_option("--api-key-file", f->api_key_file, "read the API key from the first line of FILE");
  app.add_option("--max-queue", f->max_queue, "requests that may wait for the running batch before 503 (default 256)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-body", f->max_body, "largest request body in bytes (default 16 MiB)")->check(CLI::PositiveNumber);
  return [f]() -> int {
    try {
      return serve(*f);
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      return 1;
    }
  };
}

}  // namespace tsr::app
