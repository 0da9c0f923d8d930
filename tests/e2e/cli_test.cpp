// The `tessera` command line as a llama.cpp user meets it: -c is the context and --config
// the TOML file, -ngl chooses the backend, -hf is refused, unknown flags and subcommands
// get a did-you-mean, serve --alias names the model; and the -cnv chat REPL under a
// pseudo-terminal (turns, the prefix cache between them, Ctrl-C, /exit).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/model/gguf_writer.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/shared_data.h"
#include "tests/common/subprocess.h"

namespace tsr {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kStories = "models/stories260K.gguf";

const std::string& bin() {
  static const std::string path = std::string(TESSERA_BIN_DIR) + "/tessera";
  return path;
}

const fs::path& work_dir() {
  static const testing::ScratchDir dir("tessera_cli_test");
  return dir.path();
}

struct Outcome {
  int status = -1;
  std::string out;  // stdout and stderr together
};

// Runs tessera; `out` has its stdout, and its stderr too unless `stderr_too` is false.
Outcome run(const std::string& args, bool stderr_too = true) {
  const testing::CommandResult r = testing::run_command(bin() + " " + args + (stderr_too ? " 2>&1" : " 2>/dev/null"));
  return {r.status, r.out};
}

std::string model() { return testing::shared_path(kStories); }

// ---- flags -------------------------------------------------------------------------

TEST(CliFlags, UnknownFlagsAndCommandsSuggestAndFail) {
  const struct {
    const char* args;
    const char* says;
  } cases[] = {
      {"run --tmep 0 -p x", "unknown flag '--tmep' for tessera run; did you mean '--temp'?"},
      {"rnu -p x", "unknown command 'rnu'; did you mean 'run'?"},
      {"serve --prot 8080", "did you mean '--port'?"},
      // Letters after a one-letter flag are no value of it: -ctk is not "-c tk".
      {"run -ctk q9_0 -p x", "unknown value 'q9_0' (expected one of: f32, f16, bf16, q8_0, q4_0, fp8_e4m3); did you mean 'q8_0'?"},
      {"run -ctx 5 -p x", "unknown flag '-ctx'"},
  };
  for (const auto& c : cases) {
    const Outcome o = run(c.args);
    EXPECT_NE(o.status, 0) << c.args;
    EXPECT_NE(o.out.find(c.says), std::string::npos) << c.args << " -> " << o.out;
    EXPECT_EQ(o.out.find("Could not convert"), std::string::npos) << o.out;
  }
}

TEST(CliFlags, HfIsRefusedWithTheReason) {
  for (const char* args : {"run -hf org/model -p x", "run --hf-repo org/model -p x", "serve -hf org/model"}) {
    const Outcome o = run(args);
    EXPECT_EQ(o.status, 1) << args;
    EXPECT_NE(o.out.find("models are not downloaded"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("pass -m FILE"), std::string::npos) << o.out;
  }
}

// Flags are refused where the config refuses the keys they stand for, naming the flag and
// the range; input files that are directories or never end are refused, not read forever.
TEST(CliFlags, ValuesTheConfigRefusesAreRefused) {
  TSR_REQUIRE_SHARED(kStories);
  const fs::path dir = work_dir() / "a_directory";
  fs::create_directories(dir);
  const std::string base = "run -m " + model() + " -p x ";
  const struct {
    std::string args;
    const char* says;
  } cases[] = {
      {base + "--top-p 0", "--top-p:2:9: sampling.top_p: value 0 is out of range: must be in (0, 1]"},
      {base + "-t 1025", "backend.threads: value 1025 is out of range: must be in [0, 1024]"},
      {base + "-s -2", "-s -2: must be -1 (random) or a seed >= 0"},
      {base + "-n -2", "-n -2: must be -1 (until the context is full), 0 or more"},
      {base + "--temp -1", "sampling.temperature: value -1 is out of range"},
      {"run -m " + model() + " -f " + dir.string(), "is a directory"},
      {"run -m " + model() + " -f /dev/zero", "is larger than 64 MiB"},
      {"run -m " + model() + " -p x --grammar-file " + dir.string(), "is a directory"},
  };
  for (const auto& c : cases) {
    const Outcome o = run(c.args);
    EXPECT_EQ(o.status, 1) << c.args << " -> " << o.out;
    EXPECT_NE(o.out.find(c.says), std::string::npos) << c.args << " -> " << o.out;
  }
}

TEST(CliFlags, CtxSizeCapsTheContext) {
  TSR_REQUIRE_SHARED(kStories);
  const std::string base = "run -m " + model() + " -t 1 --temp 0 --json ";
  // A prompt past -c tokens is refused with the context named.
  const Outcome small = run(base + "-c 8 -p 'Once upon a time there was a little girl named Lily'");
  EXPECT_NE(small.out.find("the context holds 8"), std::string::npos) << small.out;
  // -c 64: generation stops at the context's end, "length".
  const Outcome capped = run(base + "-c 64 -n -1 --ignore-eos -p 'Once upon a time'", false);
  ASSERT_EQ(capped.status, 0) << capped.out;
  const nlohmann::json j = nlohmann::json::parse(capped.out);
  EXPECT_EQ(j["prompt_tokens"].get<int>() + j["completion_tokens"].get<int>(), 64) << j;
  EXPECT_EQ(j["finish_reason"], "length");
  // A context [cache] memory cannot hold is refused naming both; without -c the context
  // shrinks to what the memory holds, saying how to change it.
  std::ofstream(work_dir() / "small-cache.toml") << "[cache]\nmemory = \"64KiB\"\n";
  const std::string cfg = "--config " + (work_dir() / "small-cache.toml").string() + " ";
  const Outcome too_big = run(base + cfg + "-c 512 -p Once");
  EXPECT_EQ(too_big.status, 1);
  EXPECT_NE(too_big.out.find("raise [cache] memory or lower -c"), std::string::npos) << too_big.out;
  const Outcome fitted = run(base + cfg + "-n 4 -p Once");
  EXPECT_EQ(fitted.status, 0) << fitted.out;
  EXPECT_TRUE(std::regex_search(fitted.out, std::regex("context: \\d+ tokens, of the 512 the model was trained for")))
      << fitted.out;
  EXPECT_NE(fitted.out.find("-c N"), std::string::npos) << fitted.out;
}

// -ctk / -ctv (llama.cpp's --cache-type-k / -v) choose the KV dtypes; a dtype the model's
// heads cannot take is refused naming both. fp8_e4m3 (a scale per head, no blocks) takes
// stories260K's heads of 8.
TEST(CliFlags, CtkCtvChooseTheKvDtypes) {
  TSR_REQUIRE_SHARED(kStories);
  const std::string base = "run -m " + model() + " -t 1 --temp 0 -n 4 -p Once ";
  const Outcome mixed = run(base + "-ctk bf16 --cache-type-v f32");
  EXPECT_EQ(mixed.status, 0) << mixed.out;
  EXPECT_NE(mixed.out.find("K bf16 / V f32"), std::string::npos) << mixed.out;
  const Outcome fp8 = run(base + "-ctk fp8_e4m3 -ctv fp8_e4m3");
  EXPECT_EQ(fp8.status, 0) << fp8.out;
  EXPECT_NE(fp8.out.find("K fp8_e4m3 / V fp8_e4m3"), std::string::npos) << fp8.out;
  const Outcome refused = run(base + "-ctk q8_0");
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.out.find("q8_0 stores blocks of 32 along the head dimension, and this model's heads have 8 elements"),
            std::string::npos)
      << refused.out;
}

// `bench --kv-tier`: the evicted prefix comes back whole from the host tier and from disk
// after a restart, and not at all without them (speed is the benchmark's business, not this test's).
TEST(CliFlags, KvTierBenchServesTheEvictedPrefixFromTheTier) {
  TSR_REQUIRE_SHARED(kStories);
  const Outcome r = run("bench --kv-tier -m " + model() + " -t 1 --prefix-len 200 --reps 1 --json", false);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.rfind('{')));
  EXPECT_EQ(j["cached_tokens_host_tier"], 192) << j;  // the prefix's 12 full blocks
  EXPECT_EQ(j["cached_tokens_disk_restart"], 192) << j;
  EXPECT_GE(j["disk_tier_blocks_loaded"].get<int>(), 12) << j;
  EXPECT_LT(j["cached_tokens_recompute"].get<int>(), 192) << j;
  EXPECT_GT(j["host_tier_blocks_restored"].get<int>(), 0) << j;
  EXPECT_GT(j["ttft_ms_recompute"].get<double>(), 0) << j;
}

TEST(CliFlags, ADiskTierWithoutAHostTierIsRefusedNamingBoth) {
  TSR_REQUIRE_SHARED(kStories);
  const fs::path cfg = work_dir() / "disk_only.toml";
  std::ofstream(cfg) << "[cache]\ndisk_path = \"" << (work_dir() / "kv").string() << "\"\n";
  const Outcome r = run("run -m " + model() + " -t 1 -n 2 -p Once --config " + cfg.string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("[cache] disk_path needs [cache] host_memory"), std::string::npos) << r.out;
}

// A model trained for 131,072 tokens starts with the default settings ([cache] memory =
// "auto"), and the log says how much memory the cache took and which context it chose.
// Heads of 32 x 256 in 8 layers: half a MiB of F32 KV per token, 64 GiB for the trained
// context, more than half of any CI machine's free memory, so the context shrinks to fit.
TEST(CliFlags, ALongContextModelStartsWithTheDefaults) {
  const std::string file = (work_dir() / "ctx-131072.gguf").string();
  ASSERT_EQ(run("synth " + file + " --preset tiny --donor bytes --dim 64 --heads 32 --kv-heads 32 --head-dim 256 "
                "--layers 8 --ffn 128 --ctx 131072 --type f16").status, 0);
  const Outcome r = run("run -m " + file + " -t 1 --temp 0 -n 4 -ctk f32 -ctv f32 -p Once");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("KV cache memory: auto"), std::string::npos) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("context: (\\d+) tokens"))) << r.out;
  EXPECT_GE(std::stoi(m[1]), 16);
  EXPECT_LE(std::stoi(m[1]), 131072);
  EXPECT_NE(r.out.find("131072"), std::string::npos) << r.out;
}

TEST(CliFlags, NglChoosesTheBackend) {
  TSR_REQUIRE_SHARED(kStories);
  const std::string base = "run -m " + model() + " -t 1 --temp 0 -n 4 -p Once ";
  const Outcome cpu = run(base + "-ngl 0");
  EXPECT_EQ(cpu.status, 0) << cpu.out;
  EXPECT_NE(cpu.out.find("backend 'cpu'"), std::string::npos) << cpu.out;
  const Outcome partial = run(base + "-ngl 2");
  EXPECT_EQ(partial.status, 1);
  EXPECT_NE(partial.out.find("the model has 5 layers"), std::string::npos) << partial.out;
  EXPECT_NE(partial.out.find("-ngl 0"), std::string::npos) << partial.out;
  // All layers: the GPU backend that loads; on a machine without a GPU, a refusal that says
  // why each one did not.
  const Outcome all = run(base + "-ngl 99");
  if (all.status == 0) {
    EXPECT_TRUE(all.out.find("backend 'cuda'") != std::string::npos || all.out.find("backend 'hip'") != std::string::npos)
        << all.out;
  } else {
    EXPECT_NE(all.out.find("no GPU backend loads"), std::string::npos) << all.out;
    EXPECT_NE(all.out.find("cuda:"), std::string::npos) << all.out;
  }
}

// `tessera serve -m stories260K --port 0 -t 1 ARGS...` in a child process (with `env`
// added to its environment), and the port it printed once it listens; -1 if it did not.
class ServeProcess {
 public:
  explicit ServeProcess(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<std::string> all{bin(), "serve", "-m", model(), "--port", "0", "-t", "1"};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (std::string& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    std::string line;
    pollfd p{out[0], POLLIN, 0};
    for (char c; line.find('\n') == std::string::npos && poll(&p, 1, 60000) > 0 && read(out[0], &c, 1) == 1;) line += c;
    close(out[0]);
    if (const size_t colon = line.rfind(':'); colon != std::string::npos) port_ = std::stoi(line.substr(colon + 1));
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends `sig` and returns the wait status.
  int stop(int sig) {
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int port_ = -1;
};

// `serve --alias NAME`: the id /v1/models lists and requests name.
TEST(CliFlags, ServeAlias) {
  TSR_REQUIRE_SHARED(kStories);
  ServeProcess serve({"--alias", "my-model"});
  ASSERT_GT(serve.port(), 0);
  httplib::Client client("127.0.0.1", serve.port());
  const httplib::Result models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(nlohmann::json::parse(models->body)["data"][0]["id"], "my-model") << models->body;
}

// The API key can stay out of the command line (--api-key-file, TESSERA_API_KEY), /metrics
// can require it ([server] metrics_auth), and SIGHUP and SIGUSR1 drain the server (exit 0)
// as SIGTERM does, instead of killing it.
TEST(CliFlags, ServeKeyOutsideTheCommandLineAndSignalsThatDrain) {
  TSR_REQUIRE_SHARED(kStories);
  const std::string key_file = (work_dir() / "api.key").string(), config = (work_dir() / "metrics_auth.toml").string();
  std::ofstream(key_file) << "file-key\n";
  std::ofstream(config) << "[server]\nmetrics_auth = true\n";
  const auto status = [](httplib::Client& c, const char* path, const std::string& key) {
    httplib::Headers h;
    if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
    const httplib::Result r = c.Get(path, h);
    return r ? r->status : -1;
  };
  {
    ServeProcess serve({"--api-key-file", key_file, "--config", config});
    ASSERT_GT(serve.port(), 0);
    httplib::Client c("127.0.0.1", serve.port());
    EXPECT_EQ(status(c, "/v1/models", ""), 401);
    EXPECT_EQ(status(c, "/v1/models", "file-key"), 200);
    EXPECT_EQ(status(c, "/metrics", ""), 401);
    EXPECT_EQ(status(c, "/metrics", "file-key"), 200);
    EXPECT_EQ(status(c, "/health", ""), 200);
    const int st = serve.stop(SIGHUP);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "wait status " << st;
  }
  {
    ServeProcess serve({}, {"TESSERA_API_KEY=env-key"});
    ASSERT_GT(serve.port(), 0);
    httplib::Client c("127.0.0.1", serve.port());
    EXPECT_EQ(status(c, "/v1/models", "env-key"), 200);
    EXPECT_EQ(status(c, "/v1/models", "file-key"), 401);
    EXPECT_EQ(status(c, "/metrics", ""), 200);  // open without metrics_auth
    const int st = serve.stop(SIGUSR1);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "wait status " << st;
  }
  std::ofstream(key_file, std::ios::trunc) << "\n";
  const Outcome empty = run("serve -m " + testing::shell_quote(model()) + " --port 0 --api-key-file " + key_file);
  EXPECT_EQ(empty.status, 1);
  EXPECT_NE(empty.out.find("the first line is empty"), std::string::npos) << empty.out;
}

// Strings from a model file reach the log escaped: an architecture name holding a newline,
// a forged record and a terminal escape stays on its own line, visibly.
TEST(CliFlags, ModelStringsCannotForgeLogLines) {
  GgufWriter w;
  w.add_string("general.architecture", "evil\n[00:00:00.000] [info] forged\x1b[31m");
  w.add_tensor("token_embd.weight", GgmlType::F32, {8, 4}, std::vector<uint8_t>(8 * 4 * 4));
  const std::string file = (work_dir() / "evil.gguf").string();
  w.write(file);
  const Outcome r = run("run -m " + testing::shell_quote(file) + " -p x -n 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("evil\\n[00:00:00.000] [info] forged\\x1b[31m"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\n[00:00:00.000] [info] forged"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
}

// A FIFO as the model is refused at once instead of waiting for a writer.
TEST(CliFlags, FifoModelIsRefused) {
  const std::string fifo = (work_dir() / "model.fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const testing::CommandResult r =
      testing::run_command("timeout 30 " + bin() + " run -m " + testing::shell_quote(fifo) + " -p x 2>&1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("not a regular file"), std::string::npos) << r.out;
}

// ---- the chat REPL under a pseudo-terminal --------------------------------------------

// A child process on a pseudo-terminal: what it prints is read as a screen would show it.
class Pty {
 public:
  explicit Pty(const std::vector<std::string>& args) {
    pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Pty() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  void type(const std::string& keys) { ASSERT_EQ(write(fd_, keys.data(), keys.size()), ssize_t(keys.size())); }
  // Reads until `pattern` appears after `from` in the screen; false after `timeout`.
  bool wait_for(const std::string& pattern, size_t from, std::chrono::seconds timeout = 60s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (screen_.find(pattern, from) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, int(left.count())) <= 0) return false;
      char buf[4096];
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) return false;
      screen_.append(buf, size_t(n));
    }
    return true;
  }
  // The exit status, waiting up to `timeout`; -1 if it is still running.
  int wait_exit(std::chrono::seconds timeout = 30s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      char buf[4096];
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) > 0 && read(fd_, buf, sizeof buf) > 0) continue;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
    }
    return -1;
  }
  const std::string& screen() const { return screen_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool exited_ = false;
  std::string screen_;
};

// The screen offset just past the last "\n> " prompt at or after `from`, waiting for one.
size_t next_prompt(Pty& pty, size_t from) {
  if (!pty.wait_for("\n> ", from) && !pty.wait_for("> ", from)) return std::string::npos;
  const size_t at = pty.screen().find("> ", from);
  return at + 2;
}

TEST(ChatRepl, TurnsReuseThePrefixAndExitEnds) {
  TSR_REQUIRE_SHARED(kStories);
  Pty pty({bin(), "run", "-cnv", "-m", model(), "-t", "1", "--temp", "0", "-n", "12", "-v", "-sys",
           "You tell stories."});
  size_t at = next_prompt(pty, 0);
  ASSERT_NE(at, std::string::npos) << pty.screen();
  pty.type("Once upon a time\r");
  ASSERT_TRUE(pty.wait_for("turn 1: prompt", at)) << pty.screen();
  at = next_prompt(pty, pty.screen().find("turn 1: prompt", at));
  ASSERT_NE(at, std::string::npos) << pty.screen();
  pty.type("Tell me more\r");
  ASSERT_TRUE(pty.wait_for("turn 2: prompt", at)) << pty.screen();
  ASSERT_TRUE(pty.wait_for("reply", pty.screen().find("turn 2: prompt", at))) << pty.screen();
  // The second turn's prompt holds the first conversation: its blocks come from the cache.
  std::smatch m;
  const std::string screen = pty.screen();
  ASSERT_TRUE(std::regex_search(screen, m, std::regex("turn 2: prompt (\\d+) tokens \\((\\d+) cached\\)"))) << screen;
  EXPECT_GT(std::stoi(m[2]), 0) << screen;
  EXPECT_GE(std::stoi(m[2]), 16) << screen;  // at least one whole block
  at = next_prompt(pty, pty.screen().find("turn 2: prompt"));
  ASSERT_NE(at, std::string::npos);
  pty.type("/exit\r");
  EXPECT_EQ(pty.wait_exit(), 0) << pty.screen();
}

TEST(ChatRepl, CtrlCStopsAReplyNotTheSession) {
  TSR_REQUIRE_SHARED("models/llama-2-tiny-random.gguf");
  // A model with a long context, so that an unbounded reply lasts seconds.
  const std::string long_ctx = (work_dir() / "long-ctx.gguf").string();
  ASSERT_EQ(run("synth " + long_ctx + " --preset tiny --ctx 65536 --donor " +
                testing::shared_path("models/llama-2-tiny-random.gguf")).status, 0);
  Pty pty({bin(), "run", "-cnv", "-m", long_ctx, "-t", "1", "--temp", "0", "--ignore-eos", "-v"});
  size_t at = next_prompt(pty, 0);
  ASSERT_NE(at, std::string::npos) << pty.screen();
  pty.type("hello\r");
  ASSERT_TRUE(pty.wait_for("\n", at + 6));  // the reply has begun streaming
  std::this_thread::sleep_for(300ms);
  pty.type("\x03");  // the terminal's interrupt character: SIGINT to the foreground
  ASSERT_TRUE(pty.wait_for("turn 1: prompt", at, 30s)) << pty.screen().substr(0, 2000);
  const size_t after = pty.screen().find("turn 1: prompt", at);
  std::smatch m;
  const std::string tail = pty.screen().substr(after);
  ASSERT_TRUE(std::regex_search(tail, m, std::regex("reply (\\d+) tokens"))) << tail;
  EXPECT_LT(std::stoi(m[1]), 60000);  // stopped long before the context's end
  at = next_prompt(pty, after);
  ASSERT_NE(at, std::string::npos) << tail;
  pty.type("/exit\r");
  EXPECT_EQ(pty.wait_exit(), 0) << pty.screen().substr(pty.screen().size() > 2000 ? pty.screen().size() - 2000 : 0);
}

}  // namespace
}  // namespace tsr
