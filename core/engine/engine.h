// The engine behind engine.h: configuration, backend, model, tokenizer, paged KV cache,
// scheduler and requests wired together.
//
// Thread-safety: submit(), cancel(), stats() and generate() are thread-safe. step() runs
// one engine step on the calling thread (step-driven mode); start() moves stepping to a
// background thread instead, and step() is then refused. Output callbacks run on the
// thread that steps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/config/config.h"
#include "core/model/llama_model.h"
#include "core/request/request.h"
#include "core/tokenizer/tokenizer.h"

namespace tsr {

using OutputCallback = std::function<void(const RequestOutput&)>;

struct EngineStats {
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;    // referenced by running requests
  int32_t kv_blocks_cached = 0;  // holding a cached prefix (used or free)
  int32_t kv_blocks_free = 0;    // unreferenced, including cached ones
  int64_t prompt_tokens = 0;     // over all scheduled requests
  int64_t cached_prompt_tokens = 0;
  double prefix_hit_rate = 0;    // cached_prompt_tokens / prompt_tokens
  int64_t kv_host_blocks = 0;    // held by the host tier ([cache] host_memory)
  int64_t kv_host_stored = 0;    // blocks the pool evicted into the host tier
  int64_t kv_host_restored = 0;  // blocks a prefix hit took back from it
  int64_t kv_disk_blocks = 0;    // block files of the disk tier ([cache] disk_path)
  int64_t kv_disk_written = 0;
  int64_t kv_disk_loaded = 0;    // read back into the host tier, verified
  int64_t kv_disk_rejected = 0;  // truncated, malformed or corrupted files deleted
  int32_t num_waiting = 0;
  int32_t num_running = 0;
  int32_t num_unfinished = 0;  // admitted and not finished, including those compiling a constraint
  int64_t requests_finished = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  // Steps abandoned for a new call (SchedulerOutput::interruptible); counted in steps too.
  int64_t steps_interrupted = 0;
  int64_t generated_tokens = 0;
  int64_t draft_tokens = 0;     // speculative decoding: proposed and verified
  int64_t accepted_tokens = 0;  // of which accepted
  // Target passes of a request that verified drafts: each gives the accepted drafts and one
  // more token, so (accepted_tokens + verifications) / verifications is the mean number of
  // tokens per verifying pass (EAGLE's acceptance length).
  int64_t verifications = 0;
  int64_t draft_model_passes = 0;  // forward passes of draft models (one per round for a batch)
  int64_t constraint_compiles = 0;    // constraints compiled (cache misses)
  int64_t constraint_cache_hits = 0;  // requests that found theirs compiled or compiling
  int64_t graph_replays = 0;    // decode steps replayed from a recorded graph
  int32_t graphs_recorded = 0;  // decode graphs recorded (one per batch-size bucket)
};

// Everything one finished request produced, for callers that want it all at once.
struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string text;
  tsr_finish_reason finish_reason = TSR_FINISH_NONE;
  std::string error;
  std::vector<float> embedding;  // an embedding request's, normalized
  RequestStats stats;
};

class Engine {
 public:
  // Loads everything `config` names. Throws tsr::Error naming what failed.
  static std::unique_ptr<Engine> create(const Config& config);
  ~Engine();  // stops the background thread; unfinished requests are dropped

  const Config& config() const;
  const Tokenizer& tokenizer() const;
  const LlamaHParams& hparams() const;
  int32_t context_length() const;
  uint64_t kv_bytes_per_token() const;  // K and V of every layer, in the cache's dtypes
  int64_t kv_tokens() const;            // tokens the KV pool holds, over all sequences
  // The chat template (Jinja) chat prompts are rendered with: [model] chat_template, else
  // the model's own, else ChatML.
  const std::string& chat_template() const;
  uint64_t weight_bytes() const;     // bytes of all weights on the backend
  uint64_t step_read_bytes() const;  // bytes of weights one decode step reads
  const tsr_device_props& device() const;  // the backend's device

  // Queues a request; `on_output` (may be empty) receives each increment. Throws
  // tsr::Error for an empty prompt or one that leaves no room in the context, and (status
  // TSR_STATUS_DEVICE_ERROR) once the engine has failed.
  RequestId submit(RequestParams params, OutputCallback on_output);
  // Queues every request or, when one is refused (thrown as submit() throws), none; one step
  // admits them all, so that the choices of a prompt group meet before its prompt is
  // computed. `on_output` holds one callback per request.
  std::vector<RequestId> submit_all(std::vector<RequestParams> params, std::vector<OutputCallback> on_output);
  // Finishes the request as "abort" at the next step; unknown or finished ids are ignored.
  void cancel(RequestId id);

  // One step: admits submissions, schedules, runs the model, delivers outputs.
  // Returns false when no request is left.
  bool step();
  void start();  // background-thread mode
  void stop();

  EngineStats stats() const;
  // Why the engine serves no more requests: its device failed in a step and could not
  // synchronize afterwards (a lost GPU, a CUDA sticky error); every request then failed.
  // nullopt while it serves. Thread-safe.
  std::optional<std::string> failure() const;

  // How this model's embeddings pool (its GGUF pooling_type; RANK: it has none): what an
  // embedding request (RequestParams::embed) names.
  Pooling pooling() const;
  // The width of an embedding (the model's n_embd).
  int32_t embedding_width() const;

  // A request with the config's [sampling] defaults (temperature, top_k, ..., max_tokens).
  RequestParams request_defaults() const;

  // Submits and waits for the result (stepping itself unless the background thread runs);
  // `on_output` (may be empty) also sees each increment as it comes.
  GenerateResult generate(RequestParams params, OutputCallback on_output = {});
  // With BOS as the model wants; stops once the ids outnumber `max_tokens` (Tokenizer::encode).
  std::vector<int32_t> tokenize(std::string_view text, size_t max_tokens = SIZE_MAX) const;
  // `messages` rendered with chat_template() (with add_generation_prompt, the next assistant
  // turn opened) and tokenized, special tokens parsed, BOS added unless the template wrote
  // it; `tools` (OpenAI's, or null) is the template's `tools`, and `kwargs` (an object, or
  // null) more variables for it (ChatTemplateInputs::kwargs); tokenizing stops once the ids
  // outnumber `max_tokens`. Throws tsr::Error when the template rejects the messages
  // (raise_exception) or fails.
  std::vector<int32_t> chat_prompt(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                                   const nlohmann::ordered_json& tools = nullptr,
                                   const nlohmann::ordered_json& kwargs = nullptr,
                                   size_t max_tokens = SIZE_MAX) const;

  // Compiles a constraint now (waiting for the compile worker), so that a caller can
  // report a bad one before it streams anything; requests then find it cached. Throws
  // tsr::Error with the reason (naming the unsupported feature). Thread-safe.
  void compile_constraint(const ConstraintSpec& spec);

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tsr
