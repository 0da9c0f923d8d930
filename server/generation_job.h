// The engine requests behind one API call (n choices per prompt), seen by an HTTP
// handler thread as a stream of increments.
//
// Engine callbacks run on the engine's step thread and may outlive the handler (a
// cancelled request still delivers its final "abort" output), so everything they touch
// is shared-owned.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/chat/tool_calls.h"
#include "core/engine/engine.h"
#include "server/logprobs.h"

namespace tsr::server {

struct ChoiceDelta {
  int32_t index = 0;
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;  // one per token when requested
  bool finished = false;
  tsr_finish_reason finish_reason = TSR_FINISH_NONE;
  std::string error;
  std::vector<float> embedding;  // an embedding request's, with its final increment
  RequestStats stats;
  // Chat with tools, with the final increment: the calls parsed from the reply (its
  // content is then `text`, the rest).
  std::vector<ToolCall> tool_calls;
  std::string reasoning;  // chat with a reasoning template: the reply's reasoning_content
};

// Called on the step thread with each choice's final output (metrics, admission).
using FinishHook = std::function<void(const RequestOutput&)>;

class GenerationJob {
 public:
  // Submits every choice at once (Engine::submit_all). When the engine refuses one, none
  // is submitted, `on_refused(n)` runs, and the engine's reason is thrown as a 400 ApiError
  // (500 once the engine has failed); else `on_finished` runs for each as it finishes.
  GenerationJob(Engine& engine, std::vector<RequestParams> choices, std::optional<int32_t> logprobs,
                FinishHook on_finished, std::function<void(int32_t)> on_refused);
  ~GenerationJob();  // cancels unfinished choices: nobody waits for them any more

  GenerationJob(const GenerationJob&) = delete;
  GenerationJob& operator=(const GenerationJob&) = delete;

  // The increments that arrived, waiting up to `timeout` for the first one.
  std::vector<ChoiceDelta> next(std::chrono::milliseconds timeout);
  bool done() const;  // every choice finished and its final increment taken
  void cancel();
  int32_t num_choices() const { return static_cast<int32_t>(ids_.size()); }

 private:
  struct Shared;
  // The engine's callback for one choice (runs on the step thread).
  static OutputCallback choice_callback(std::shared_ptr<Shared> shared, int32_t index,
                                        std::shared_ptr<LogprobCollector> collector, FinishHook on_finished);

  Engine& engine_;
  std::shared_ptr<Shared> shared_;
  std::vector<RequestId> ids_;
};

}  // namespace tsr::server
