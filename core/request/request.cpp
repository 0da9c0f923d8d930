#include "core/request/request.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "base/error.h"
#include "core/kv/block_hash.h"
#include "core/model/step_batch.h"
#include "core/request/draft_tree.h"

namespace tsr {

namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

uint64_t seed_of(const RequestParams& p) {
  return p.seed ? *p.seed : std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
}

}  // namespace

const char* request_state_name(RequestState s) {
  switch (s) {
    case RequestState::WAITING: return "waiting";
    case RequestState::RUNNING: return "running";
    case RequestState::PREEMPTED: return "preempted";
    case RequestState::FINISHED: return "finished";
  }
  return "unknown";
}

const char* finish_reason_name(tsr_finish_reason r) {
  switch (r) {
    case TSR_FINISH_STOP: return "stop";
    case TSR_FINISH_LENGTH: return "length";
    case TSR_FINISH_ABORT: return "abort";
    case TSR_FINISH_ERROR: return "error";
    default: return "none";
  }
}

Request::Request(RequestId id, RequestParams params, const Tokenizer& tokenizer,
                 Clock::time_point now)
    : id_(id),
      call_(id),
      params_(std::move(params)),
      tokenizer_(tokenizer),
      tokens_(params_.prompt),
      num_prompt_(static_cast<int32_t>(params_.prompt.size())),
      cache_key_(block_hash_extra(params_.cache_salt)),
      chain_(params_.sampling),
      seed_(seed_of(params_)),
      detok_(tokenizer),
      stop_(params_.stop),
      arrival_(now) {
  if (params_.embed) pool_.emplace(*params_.embed, num_prompt_);
  if (params_.reasoning_budget) budget_.emplace(*params_.reasoning_budget);
}

void Request::on_scheduled(Clock::time_point now, int32_t cached_tokens) {
  state_ = RequestState::RUNNING;
  if (scheduled_once_) return;
  scheduled_once_ = true;
  first_scheduled_ = now;
  cached_tokens_ = cached_tokens;
}

void Request::on_preempted() {
  state_ = RequestState::PREEMPTED;
  num_computed_ = recompute_ = 0;
  if (pool_) pool_->reset();
  ++preemptions_;
}

std::pair<int32_t, int32_t> Request::pooled_rows(int32_t start, int32_t n) const {
  return pool_ ? pool_->rows(start, n) : std::pair{0, 0};
}

void Request::pool_states(std::span<const float> states, int32_t count, Clock::time_point now) {
  if (!pool_) throw Error("states pooled for a request that does not embed", TSR_STATUS_INTERNAL);
  if (count > 0) pool_->add(states, count);
  if (num_computed_ < num_prompt_) return;
  embedding_ = pool_->normalized();
  finish(TSR_FINISH_STOP, now);
}

void Request::release_text(std::string_view piece) {
  if (num_output_tokens() < params_.min_tokens) {  // stop strings do not end it yet (vLLM's rule)
    out_text_ += piece;
    return;
  }
  const StopMatcher::Result r = stop_.push(piece);
  out_text_ += r.text;
  if (r.stopped && !finished()) {
    state_ = RequestState::FINISHED;
    finish_reason_ = TSR_FINISH_STOP;
  }
}

Distribution Request::distribution(std::span<const float> logits) const {
  const std::span<const int32_t> all = tokens_;
  return chain_.apply(logits, all.first(num_prompt_), all.subspan(num_prompt_));
}

void Request::set_drafts(std::vector<int32_t> drafts, std::vector<int32_t> parents) {
  drafts_ = std::move(drafts);
  draft_parents_ = std::move(parents);
}

void Request::truncate_drafts(size_t n) {
  drafts_.resize(std::min(n, drafts_.size()));
  if (draft_parents_.size() > drafts_.size()) draft_parents_.resize(drafts_.size());
}

int32_t Request::draft_depth() const {
  if (draft_parents_.empty()) return static_cast<int32_t>(drafts_.size());
  const std::vector<int32_t> depth = draft_tree_depths(draft_parents_);
  return *std::max_element(depth.begin(), depth.end());
}

int32_t Request::draft_child(int32_t node, int32_t token) const {
  for (auto d = static_cast<size_t>(node + 1); d < drafts_.size(); ++d) {
    const int32_t parent = draft_parents_.empty() ? int32_t(d) - 1 : draft_parents_[d];
    if (parent == node && drafts_[d] == token) return int32_t(d);
  }
  return -1;
}

bool Request::describe_draws(int32_t n, std::vector<double>& uniforms, tsr_draft_sampling& out) const {
  const SamplingParams& p = chain_.params();
  if (p.temperature <= 0.0f) return false;
  uniforms.resize(size_t(std::max(n, 0)));
  for (int32_t d = 0; d < n; ++d) uniforms[size_t(d)] = position_uniform(seed_, uint64_t(num_output_tokens() + d));
  out = {sizeof(tsr_draft_sampling), uniforms.data(), n, p.temperature, p.top_k, p.top_p, p.min_p, 0};
  return true;
}

int32_t Request::append_verified(std::span<const float> logits, int32_t n_vocab, int32_t n_ctx,
                                 Clock::time_point now) {
  const auto k = static_cast<int32_t>(drafts_.size());
  const int32_t before = num_tokens();
  accepted_path_.clear();
  for (int32_t node = -1; !finished();) {  // node: the draft whose row is read (-1: the last token)
    std::span<const float> row = logits_rows(logits, n_vocab, size_t(node + 1), 1);
    if (matcher_) {
      row = constrain(row);
      if (row.empty()) {
        finish(TSR_FINISH_ERROR, now, "the constraint allows no token after " +
                                          std::to_string(num_output_tokens()) + " generated tokens");
        break;
      }
    }
    if (num_output_tokens() < params_.min_tokens && !params_.ignore_eos) row = hold_eog(row);
    if (params_.on_logits) params_.on_logits(row);
    const Distribution p = distribution(row);
    const double u = position_uniform(seed_, uint64_t(num_output_tokens()));
    int32_t child = -1;  // a forced token takes the draw's place and rejects the drafts
    int32_t token = 0;
    if (!forced_.empty()) {
      token = forced_.front();
      forced_.pop_front();
    } else {
      token = sample_from(p, u);  // the draw without drafts: a draft is accepted iff it proposed it
      child = draft_child(node, token);
    }
    append_token(token, n_ctx, now);
    if (child < 0) break;
    accepted_path_.push_back(node = child);
  }
  const auto accepted = static_cast<int32_t>(accepted_path_.size());
  int32_t in_place = 0;  // accepted drafts whose KV rows are their positions'
  while (in_place < accepted && accepted_path_[size_t(in_place)] == in_place) ++in_place;
  drafted_ += k;
  accepted_ += accepted;
  verifications_ += k > 0;
  drafts_.clear();
  draft_parents_.clear();
  num_computed_ = before + in_place;
  recompute_ = accepted - in_place;
  return accepted;
}

std::span<const float> Request::constrain(std::span<const float> row) {
  mask_.resize(matcher_->mask_words());
  matcher_->fill_mask(mask_);
  masked_.assign(row.begin(), row.end());
  bool any = false;
  for (size_t i = 0; i < masked_.size(); ++i) {
    const bool allowed = (mask_[i / 32] >> (i % 32)) & 1u;
    if (!allowed) masked_[i] = -std::numeric_limits<float>::infinity();
    any |= allowed;
  }
  return any ? std::span<const float>(masked_) : std::span<const float>();
}

std::span<const float> Request::hold_eog(std::span<const float> row) {
  if (row.data() != masked_.data()) masked_.assign(row.begin(), row.end());
  for (const int32_t id : tokenizer_.vocab().eog_ids) {
    if (id >= 0 && size_t(id) < masked_.size()) masked_[size_t(id)] = -std::numeric_limits<float>::infinity();
  }
  return masked_;
}

void Request::trim_drafts_to_constraint() {
  if (!matcher_) return;
  size_t n = 0;
  while (n < draft_parents_.size() && draft_parents_[n] == int32_t(n) - 1) ++n;  // a tree keeps its first chain
  if (!draft_parents_.empty()) truncate_drafts(n);
  draft_parents_.clear();
  n = 0;
  while (n < drafts_.size() && matcher_->accept(drafts_[n])) ++n;
  matcher_->rollback(n);
  drafts_.resize(n);
}

void Request::set_matcher(std::unique_ptr<ConstraintMatcher> matcher) {
  (params_.constraint_trigger.empty() ? matcher_ : lazy_matcher_) = std::move(matcher);
}

// Keeps the output's last bytes (as many as the trigger has, less one, between tokens) and
// starts the lazy constraint once they spell the trigger. What the triggering token holds
// after the trigger must be white space, which the tool-call grammars begin with; anything
// else cannot be replayed into the matcher (it takes whole tokens), so the output stays free.
void Request::watch_trigger(int32_t token) {
  const std::string& trigger = params_.constraint_trigger;
  trigger_window_ += tokenizer_.token_to_piece(token, true);
  const size_t at = trigger_window_.find(trigger);
  if (at == std::string::npos) {
    if (trigger_window_.size() >= trigger.size()) trigger_window_.erase(0, trigger_window_.size() - trigger.size() + 1);
    return;
  }
  if (trigger_window_.find_first_not_of(" \t\r\n", at + trigger.size()) == std::string::npos) matcher_ = std::move(lazy_matcher_);
  lazy_matcher_.reset();
  trigger_window_.clear();
}

void Request::append_token(int32_t token, int32_t n_ctx, Clock::time_point now) {
  if (num_output_tokens() == 0) first_token_ = now;
  tokens_.push_back(token);
  out_tokens_.push_back(token);
  if (budget_) {
    for (const int32_t t : budget_->on_token(tokenizer_.token_to_piece(token, true))) forced_.push_back(t);
  }
  if (lazy_matcher_) {
    watch_trigger(token);
  } else if (matcher_ && !matcher_->accept(token)) {
    // Only a faulty plugin gets here (the token came from its own mask); never fail open.
    finish(TSR_FINISH_ERROR, now, "the constraint refused token " + std::to_string(token) +
                                      " that its mask allowed");
    return;
  }
  if ((!params_.ignore_eos && tokenizer_.is_eog(token)) || (matcher_ && matcher_->is_terminated())) {
    finish(TSR_FINISH_STOP, now);
    return;
  }
  release_text(detok_.push(token));
  if (finished()) {
    finished_at_ = now;  // a stop string matched
  } else if (num_output_tokens() >= params_.max_tokens || num_tokens() >= n_ctx) {
    finish(TSR_FINISH_LENGTH, now);
  }
}

void Request::finish(tsr_finish_reason reason, Clock::time_point now, std::string error) {
  if (finished()) return;
  // Text held back for a possible stop string or an unfinished character is final now.
  release_text(detok_.flush());
  if (finished()) {  // the flushed text completed a stop string: that is the reason
    finished_at_ = now;
    return;
  }
  out_text_ += stop_.flush();
  state_ = RequestState::FINISHED;
  finish_reason_ = reason;
  error_ = std::move(error);
  finished_at_ = now;
}

bool Request::past_deadline(Clock::time_point now) const {
  return params_.timeout_ms && ms_between(arrival_, now) > *params_.timeout_ms;
}

RequestOutput Request::take_output() {
  RequestOutput out;
  out.id = id_;
  out.tokens = std::exchange(out_tokens_, {});
  out.text = std::exchange(out_text_, {});
  out.finished = finished();
  out.finish_reason = finish_reason_;
  out.error = error_;
  if (finished()) out.embedding = std::exchange(embedding_, {});
  out.stats = stats();
  return out;
}

RequestStats Request::stats() const {
  RequestStats s;
  s.prompt_tokens = num_prompt_;
  s.completion_tokens = num_output_tokens();
  s.cached_tokens = cached_tokens_;
  s.preemptions = preemptions_;
  s.draft_tokens = drafted_;
  s.accepted_tokens = accepted_;
  s.verifications = verifications_;
  if (scheduled_once_) s.queue_ms = ms_between(arrival_, first_scheduled_);
  if (s.completion_tokens > 0) s.ttft_ms = ms_between(arrival_, first_token_);
  if (finished()) {
    s.e2e_ms = ms_between(arrival_, finished_at_);
    if (s.completion_tokens > 1) {
      s.tpot_ms = ms_between(first_token_, finished_at_) / (s.completion_tokens - 1);
    }
  }
  return s;
}

}  // namespace tsr
