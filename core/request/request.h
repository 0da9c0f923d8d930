// One generation request through its lifecycle:
//   waiting -> running <-> preempted -> finished (stop | length | abort | error).
// Owned and mutated by the engine's step thread only; submission and cancellation from
// other threads go through the engine's inbox.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/constraint/constraint_plugin.h"
#include "core/request/detokenizer.h"
#include "core/request/embedding_pool.h"
#include "core/request/reasoning_budget.h"
#include "core/request/stop_matcher.h"
#include "samplers/token_draw.h"
#include "tessera/draft.h"
#include "tessera/engine.h"

namespace tsr {

using RequestId = uint64_t;
using Clock = std::chrono::steady_clock;

struct RequestParams {
  std::vector<int32_t> prompt;       // token ids, BOS included where the model wants it
  int32_t max_tokens = 128;
  SamplingParams sampling;           // temperature 0 = greedy
  std::optional<uint64_t> seed;      // absent: random
  bool ignore_eos = false;
  // Tokens generated before an end-of-generation token may be sampled or a stop string
  // can end the request (vLLM's min_tokens).
  int32_t min_tokens = 0;
  std::vector<std::string> stop;     // stop strings, excluded from the text
  int32_t priority = 0;              // policy "priority": lower runs first
  std::optional<double> timeout_ms;  // deadline from arrival; finishes as "length"
  std::string cache_salt;            // requests share cached prefixes only with equal salts
  // Choices of one prompt (OpenAI's n): equal non-zero groups with equal prompts compute
  // the prompt once and fork its KV (core/sched/prompt_groups.h); 0: none.
  uint64_t prompt_group = 0;
  // Structured output: every token is allowed by the constraint, EOS only where it can
  // end. A constraint that does not compile fails the request.
  std::optional<ConstraintSpec> constraint;
  // A lazy constraint (tool calls under tool_choice "auto"): with this text non-empty, the
  // constraint starts from the token after the output first spells it (special tokens
  // rendered), if nothing but white space follows it in that token; before, the output is free.
  std::string constraint_trigger;
  // An embedding request: the prompt's output-norm states pooled so (LAST, MEAN or CLS;
  // Engine::pooling() is the model's), normalized, and nothing generated.
  std::optional<Pooling> embed;
  // A thinking budget (core/request/reasoning_budget.h): the reasoning block is closed by
  // force once it holds that many tokens.
  std::optional<ReasoningBudgetParams> reasoning_budget;
  // C++ callers only: the logits row each generated token is sampled from.
  std::function<void(std::span<const float>)> on_logits;
};

enum class RequestState { WAITING, RUNNING, PREEMPTED, FINISHED };
const char* request_state_name(RequestState s);
const char* finish_reason_name(tsr_finish_reason r);

struct RequestStats {
  double queue_ms = 0;        // arrival -> first scheduled
  double ttft_ms = 0;         // arrival -> first token
  double tpot_ms = 0;         // mean time per output token after the first
  double e2e_ms = 0;          // arrival -> finished
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens served from the prefix cache (first schedule)
  int32_t completion_tokens = 0;
  int32_t preemptions = 0;
  int32_t draft_tokens = 0;     // proposed by speculative decoding and verified
  int32_t accepted_tokens = 0;  // of which the target accepted
  int32_t verifications = 0;    // target passes that verified drafts (EngineStats::verifications)
};

// What a step produced for one request: the increment since the last output.
struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
  tsr_finish_reason finish_reason = TSR_FINISH_NONE;
  std::string error;  // with TSR_FINISH_ERROR
  std::vector<float> embedding;  // an embedding request's, with its final output
  RequestStats stats;
};

class Request {
 public:
  Request(RequestId id, RequestParams params, const Tokenizer& tokenizer, Clock::time_point now);

  RequestId id() const { return id_; }
  // The call it came in with (Engine::submit_all): the scheduler bounds a call's share of
  // the batch. Its own id unless set.
  RequestId call() const { return call_; }
  void set_call(RequestId call) { call_ = call; }
  const RequestParams& params() const { return params_; }
  RequestState state() const { return state_; }
  tsr_finish_reason finish_reason() const { return finish_reason_; }
  bool finished() const { return state_ == RequestState::FINISHED; }

  // Prompt and generated tokens; KV exists for the first num_computed of them.
  std::span<const int32_t> tokens() const { return tokens_; }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t num_prompt_tokens() const { return num_prompt_; }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_; }
  int32_t num_computed() const { return num_computed_; }
  // The scheduler's claim of a cached prefix (or its undoing); then each step's chunk.
  void set_num_computed(int32_t n) { num_computed_ = n, recompute_ = 0; }
  void on_computed(int32_t n_new) { num_computed_ += n_new, recompute_ = 0; }
  // Whether the request may draft: every token but the last has KV, or had its states
  // computed by the last verification (accepted tree tokens off the first chain, whose KV
  // the next step recomputes).
  bool caught_up() const { return num_computed_ + recompute_ == num_tokens() - 1; }
  uint64_t cache_key() const { return cache_key_; }
  Clock::time_point arrival() const { return arrival_; }
  // How the next `n` output positions will be drawn, for a draft (ABI 2.9): the uniforms
  // into `uniforms`, the rest into `out` (pointing at them). False for a greedy request.
  bool describe_draws(int32_t n, std::vector<double>& uniforms, tsr_draft_sampling& out) const;

  void on_scheduled(Clock::time_point now, int32_t cached_tokens);
  void on_preempted();
  // Draft tokens proposed to follow tokens(); the step computes them with the last token.
  // They form a chain, or a tree (draft_parents() non-empty: draft i follows draft
  // draft_parents()[i], or the last token for -1; parents come before their children).
  std::span<const int32_t> drafts() const { return drafts_; }
  std::span<const int32_t> draft_parents() const { return draft_parents_; }
  // `parents` empty or as draft_parents() says (DraftClient checks a plugin's).
  void set_drafts(std::vector<int32_t> drafts, std::vector<int32_t> parents = {});
  void truncate_drafts(size_t n);
  // The tokens on the drafts' longest path (their number for a chain).
  int32_t draft_depth() const;
  // The drafts the last verification accepted, in order (indices into its drafts).
  std::span<const int32_t> accepted_path() const { return accepted_path_; }
  int32_t num_tokens_with_drafts() const { return num_tokens() + static_cast<int32_t>(drafts_.size()); }

  // An embedding request (params().embed): its prompt's states are pooled, nothing is sampled.
  bool embeds() const { return pool_.has_value(); }
  // Whether a prefix-cache hit may skip prompt positions: not when the pooling reads them.
  bool reads_cached_prefix() const { return !embeds() || *params_.embed == Pooling::LAST; }
  // The positions of a chunk [start, start + n) whose states the pooling reads.
  std::pair<int32_t, int32_t> pooled_rows(int32_t start, int32_t n) const;
  // The `count` states of pooled_rows of the chunk just computed (after on_computed); the
  // request finishes ("stop") with its embedding once the whole prompt is computed.
  void pool_states(std::span<const float> states, int32_t count, Clock::time_point now);

  // The constraint's matcher, at the start of its grammar; set before the first schedule.
  // A lazy constraint's (params().constraint_trigger) waits for its trigger.
  void set_matcher(std::unique_ptr<ConstraintMatcher> matcher);
  bool constrained() const { return matcher_ != nullptr; }
  // Drops the drafts from the first one the constraint forbids on; the matcher is left
  // where it was (each draft is accepted, then all are rolled back).
  void trim_drafts_to_constraint();

  // The target's sampling distribution for one logits row, given the tokens so far.
  Distribution distribution(std::span<const float> logits) const;
  // The step's output processor over rows 0..k of `logits` (n_vocab each; row 0 the last
  // token's, row i + 1 draft i's): from row 0, the constraint's mask, the sampling
  // distribution, the draw of the target's token and its append under the stop criteria;
  // the walk goes on at the draft that proposed the token (a child of the row's token) and
  // ends at the first token no draft proposed (the correction, or a leaf's bonus token).
  // Clears the drafts and counts as computed the accepted positions whose KV lies in place
  // (those on the chain of first drafts: the KV of the others is overwritten before it is
  // read). Returns how many drafts were accepted.
  int32_t append_verified(std::span<const float> logits, int32_t n_vocab, int32_t n_ctx,
                          Clock::time_point now);
  void finish(tsr_finish_reason reason, Clock::time_point now, std::string error = {});
  bool past_deadline(Clock::time_point now) const;

  // The increment since the last call (tokens, text, and the final state).
  RequestOutput take_output();
  RequestStats stats() const;

 private:
  void release_text(std::string_view piece);
  void append_token(int32_t token, int32_t n_ctx, Clock::time_point now);
  void watch_trigger(int32_t token);
  // The draft following draft `node` (-1: the last token) that proposed `token`, or -1.
  int32_t draft_child(int32_t node, int32_t token) const;
  // `row` with the tokens the constraint forbids set to -infinity (in masked_); empty when
  // it forbids every token.
  std::span<const float> constrain(std::span<const float> row);
  // `row` with the end-of-generation tokens set to -infinity (in masked_), while fewer than
  // min_tokens are generated.
  std::span<const float> hold_eog(std::span<const float> row);

  RequestId id_;
  RequestId call_;
  RequestParams params_;
  const Tokenizer& tokenizer_;
  std::vector<int32_t> tokens_;
  int32_t num_prompt_;
  int32_t num_computed_ = 0;  // KV exists for the first num_computed_ tokens
  std::vector<int32_t> drafts_;
  std::vector<int32_t> draft_parents_;  // empty: a chain
  std::vector<int32_t> accepted_path_;
  int32_t recompute_ = 0;  // accepted positions after num_computed_ whose KV the next step computes
  uint64_t cache_key_;
  SamplerChain chain_;
  uint64_t seed_;  // output position t draws position_uniform(seed_, t)
  IncrementalDetokenizer detok_;
  StopMatcher stop_;
  RequestState state_ = RequestState::WAITING;
  tsr_finish_reason finish_reason_ = TSR_FINISH_NONE;
  std::string error_;
  std::vector<int32_t> out_tokens_;  // not yet taken
  std::string out_text_;
  bool final_taken_ = false;
  Clock::time_point arrival_, first_scheduled_, first_token_, finished_at_;
  bool scheduled_once_ = false;
  int32_t cached_tokens_ = 0;
  int32_t preemptions_ = 0;
  int32_t drafted_ = 0, accepted_ = 0, verifications_ = 0;
  std::optional<EmbeddingPool> pool_;
  std::vector<float> embedding_;  // the pooled result, with the final output
  std::unique_ptr<ConstraintMatcher> matcher_;
  std::unique_ptr<ConstraintMatcher> lazy_matcher_;  // until the trigger is generated
  std::optional<ReasoningBudget> budget_;
  std::deque<int32_t> forced_;  // appended in place of the next draws (the budget's close)
  std::string trigger_window_;  // the output's last bytes, special tokens rendered
  std::vector<uint32_t> mask_;
  std::vector<float> masked_;
};

}  // namespace tsr
