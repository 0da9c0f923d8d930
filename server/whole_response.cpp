#include "server/whole_response.h"

#include "server/http_message.h"

#include <algorithm>
#include <chrono>

#include "server/api_error.h"

namespace tsr::server {

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kPollInterval = 250ms;  // how often a waiting handler checks for shutdown
constexpr auto kFirstAnswer = 1s;      // answered in full (with its real status) if done by then
constexpr auto kHeartbeat = 1s;        // then a space this often, to notice a departed client

class WholeResponse {
 public:
  WholeResponse(std::shared_ptr<GenerationJob> job, ResponseMeta meta, int32_t n,
                std::vector<std::string> echo, const Tokenizer& tokenizer, const std::atomic<bool>& stopping)
      : job_(std::move(job)), meta_(std::move(meta)), n_(n), echo_(std::move(echo)),
        tokenizer_(tokenizer), stopping_(stopping), totals_(size_t(job_->num_choices())) {}

  // Collects increments for up to `timeout`; true when every choice has finished.
  bool collect(std::chrono::milliseconds timeout) {
    if (stopping_) job_->cancel();
    for (ChoiceDelta& d : job_->next(timeout)) accumulate(totals_[size_t(d.index)], std::move(d));
    return job_->done();
  }

  // The final body; throws ApiError(500) when a choice failed.
  std::string body() {
    std::vector<RequestStats> all;
    for (const ChoiceDelta& c : totals_) {
      if (c.finish_reason == TSR_FINISH_ERROR) throw ApiError(500, "generation failed: " + c.error, "server_error");
      all.push_back(c.stats);
    }
    std::vector<ChoiceDelta> choices = meta_.best_of > 0 ? best_choices() : std::move(totals_);
    for (ChoiceDelta& c : choices) {
      if (!echo_.empty()) c.text = echo_[size_t(c.index / n_)] + c.text;
      split_reply(c, meta_);
    }
    json out = response_json(meta_, choices, n_, tokenizer_);
    if (meta_.best_of > 0) out["usage"] = usage_json(all, meta_.best_of);  // every sample's tokens, as OpenAI bills
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
  }

  // One round of the chunked body: waits, then writes the answer or a space.
  bool pump(DataSink& sink) {
    if (!collect(std::chrono::duration_cast<std::chrono::milliseconds>(kHeartbeat))) {
      if (sink.write(" ", 1)) return true;
      job_->cancel();
      return false;
    }
    std::string out;
    try {
      out = body();
    } catch (const ApiError& e) {
      out = e.to_json().dump();
    }
    if (!sink.write(out.data(), out.size())) return false;
    sink.done();
    return true;
  }

  void cancel() { job_->cancel(); }

 private:
  // Of each prompt's best_of samples, the n of highest cumulative logprob (ties: the
  // earlier sample), renumbered as that prompt's choices.
  std::vector<ChoiceDelta> best_choices() {
    const auto samples = size_t(meta_.best_of);
    const auto cumulative = [](const ChoiceDelta& c) {
      double sum = 0;
      for (const TokenLogprob& t : c.logprobs) sum += t.logprob;
      return sum;
    };
    std::vector<ChoiceDelta> out;
    for (size_t first = 0; first < totals_.size(); first += samples) {
      auto begin = totals_.begin() + std::ptrdiff_t(first);
      std::stable_sort(begin, begin + std::ptrdiff_t(samples),
                       [&](const ChoiceDelta& a, const ChoiceDelta& b) { return cumulative(a) > cumulative(b); });
      for (int32_t j = 0; j < n_; ++j) {
        ChoiceDelta c = std::move(*(begin + j));
        c.index = int32_t(first / samples) * n_ + j;
        out.push_back(std::move(c));
      }
    }
    return out;
  }


  std::shared_ptr<GenerationJob> job_;
  ResponseMeta meta_;
  int32_t n_;
  std::vector<std::string> echo_;  // per prompt, completions with echo only
  const Tokenizer& tokenizer_;
  const std::atomic<bool>& stopping_;
  std::vector<ChoiceDelta> totals_;
};

}  // namespace

void respond_whole(HttpResponse& res, std::shared_ptr<GenerationJob> job, ResponseMeta meta,
                   int32_t n, std::vector<std::string> echo, const Tokenizer& tokenizer,
                   const std::atomic<bool>& stopping, std::shared_ptr<void> in_flight) {
  auto whole = std::make_shared<WholeResponse>(std::move(job), std::move(meta), n, std::move(echo),
                                               tokenizer, stopping);
  const auto until = std::chrono::steady_clock::now() + kFirstAnswer;
  while (std::chrono::steady_clock::now() < until) {
    if (whole->collect(kPollInterval)) return res.set_content(whole->body(), "application/json");
  }
  res.set_chunked_content_provider(
      "application/json; charset=utf-8", [whole](DataSink& sink) { return whole->pump(sink); },
      [whole, in_flight](bool success) {
        if (!success) whole->cancel();
      });
}

}  // namespace tsr::server
