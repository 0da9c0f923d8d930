#include "apps/tessera/chat_repl.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>

#include "base/error.h"

namespace tsr::app {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void on_interrupt(int) { g_interrupted = 1; }

// SIGINT sets a flag instead of ending the process, and interrupts a blocking read (no
// SA_RESTART), so that both the step loop and the prompt see it. The old action returns
// when the session ends.
class InterruptGuard {
 public:
  InterruptGuard() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_);
  }
  ~InterruptGuard() { sigaction(SIGINT, &old_, nullptr); }

 private:
  struct sigaction old_ {};
};

// One turn's input: a line, or lines joined while they end in "\". nullopt at the end of
// input or on Ctrl-C.
std::optional<std::string> read_turn() {
  std::string text, line;
  std::fputs("> ", stdout);
  std::fflush(stdout);
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.back() != '\\') return text + line;
    text += line.substr(0, line.size() - 1) + "\n";
  }
  return std::nullopt;
}

class Conversation {
 public:
  Conversation(Engine& engine, const ConversationOptions& o) : engine_(engine), options_(o) { clear(); }

  void clear() {
    messages_.clear();
    if (!options_.system_prompt.empty()) messages_.push_back({"system", options_.system_prompt});
  }

  // Streams the reply to `user` and keeps both in the history.
  void turn(const std::string& user) {
    messages_.push_back({"user", user});
    std::vector<int32_t> prompt;
    try {
      prompt = engine_.chat_prompt(messages_);
      if (static_cast<int32_t>(prompt.size()) >= engine_.context_length()) {
        throw Error("the conversation has " + std::to_string(prompt.size()) + " tokens and the context holds " +
                    std::to_string(engine_.context_length()) + ": /clear starts a new one");
      }
    } catch (const Error& e) {
      messages_.pop_back();
      spdlog::error("{}", e.what());
      return;
    }
    try {
      messages_.push_back({"assistant", generate(std::move(prompt))});
    } catch (const Error& e) {  // the engine refused the request (e.g. -n 0)
      messages_.pop_back();
      spdlog::error("{}", e.what());
    }
  }

 private:
  std::string generate(std::vector<int32_t> prompt) {
    std::string reply;
    RequestStats stats;
    const RequestId id = engine_.submit(options_.request(std::move(prompt), turns_++), [&](const RequestOutput& out) {
      std::fwrite(out.text.data(), 1, out.text.size(), stdout);
      std::fflush(stdout);
      reply += out.text;
      if (out.finished) stats = out.stats;
      if (out.finish_reason == TSR_FINISH_ERROR) spdlog::error("{}", out.error);
    });
    g_interrupted = 0;
    while (engine_.step()) {
      if (g_interrupted) engine_.cancel(id);  // the reply ends at the next step
    }
    g_interrupted = 0;
    std::fputc('\n', stdout);
    spdlog::debug("turn {}: prompt {} tokens ({} cached), reply {} tokens", turns_, stats.prompt_tokens,
                  stats.cached_tokens, stats.completion_tokens);
    return reply;
  }

  Engine& engine_;
  const ConversationOptions& options_;
  std::vector<ChatMessage> messages_;
  size_t turns_ = 0;
};

}  // namespace

int run_conversation(Engine& engine, const ConversationOptions& options) {
  InterruptGuard guard;
  Conversation conversation(engine, options);
  spdlog::info("conversation mode: /exit or Ctrl-D ends it, /clear starts again, Ctrl-C stops a reply");
  while (true) {
    g_interrupted = 0;
    const std::optional<std::string> input = read_turn();
    if (!input || *input == "/exit" || *input == "/quit") break;
    if (*input == "/clear") {
      conversation.clear();
      continue;
    }
    if (input->find_first_not_of(" \t\n") == std::string::npos) continue;
    conversation.turn(*input);
  }
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace tsr::app
