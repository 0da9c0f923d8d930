#include "core/request/reasoning_budget.h"

#include <utility>

namespace tsr {

ReasoningBudget::ReasoningBudget(ReasoningBudgetParams params)
    : params_(std::move(params)), state_(params_.opened_by_prompt ? State::INSIDE : State::BEFORE) {}

std::vector<int32_t> ReasoningBudget::on_token(std::string_view piece) {
  if (state_ == State::DONE) return {};
  window_ += piece;
  const std::string& marker = state_ == State::BEFORE ? params_.open : params_.close;
  if (window_.find(marker) != std::string::npos) {
    window_.clear();
    state_ = state_ == State::BEFORE ? State::INSIDE : State::DONE;
    return {};
  }
  if (window_.size() > marker.size()) window_.erase(0, window_.size() - marker.size());
  if (state_ != State::INSIDE || ++inside_ < params_.max_tokens) return {};
  state_ = State::CLOSING;  // the forced marker's own tokens end it (DONE)
  return params_.close_tokens;
}

}  // namespace tsr
