// The `tessera` command line as a llama.cpp user meets it: -c is the context and --config
// the TOML file, -ngl chooses the backend, -hf is refused, unknown flags and subcommands
// get a did-you-mean, serve --alias names the model; and the -cnv chat REPL under a
// pseudo-terminal (turns, the prefix cache between them, Ctrl-C, /exit).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
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
      {"run -ctk q8_0 -p x", "-ctk: the KV cache is F32 for now"},
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

// `serve --alias NAME`: the id /v1/models lists and requests name.
TEST(CliFlags, ServeAlias) {
  TSR_REQUIRE_SHARED(kStories);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    const std::string m = model();
    execl(bin().c_str(), "tessera", "serve", "-m", m.c_str(), "--port", "0", "-t", "1", "--alias", "my-model",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string line;
  pollfd p{out[0], POLLIN, 0};
  for (char c; line.find('\n') == std::string::npos && poll(&p, 1, 60000) > 0 && read(out[0], &c, 1) == 1;) line += c;
  const size_t colon = line.rfind(':');
  ASSERT_NE(colon, std::string::npos) << line;
  httplib::Client client("127.0.0.1", std::stoi(line.substr(colon + 1)));
  const httplib::Result models = client.Get("/v1/models");
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  close(out[0]);
  ASSERT_TRUE(models);
  EXPECT_EQ(nlohmann::json::parse(models->body)["data"][0]["id"], "my-model") << models->body;
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
