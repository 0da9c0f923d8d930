#include "server/generation_job.h"

#include <condition_variable>
#include <deque>
#include <mutex>

#include "base/error.h"
#include "server/api_error.h"

namespace tsr::server {

struct GenerationJob::Shared {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<ChoiceDelta> pending;
  int32_t unfinished = 0;   // choices whose final output has not arrived
};

GenerationJob::GenerationJob(Engine& engine, std::vector<RequestParams> choices, std::optional<int32_t> logprobs,
                             FinishHook on_finished, std::function<void(int32_t)> on_refused)
    : engine_(engine), shared_(std::make_shared<Shared>()) {
  const auto n = static_cast<int32_t>(choices.size());
  std::vector<OutputCallback> callbacks;
  for (int32_t i = 0; i < n; ++i) {
    std::shared_ptr<LogprobCollector> collector;
    if (logprobs) {
      collector = std::make_shared<LogprobCollector>(*logprobs);
      choices[size_t(i)].on_logits = [collector](std::span<const float> row) { collector->on_logits(row); };
    }
    callbacks.push_back(choice_callback(shared_, i, collector, on_finished));
  }
  shared_->unfinished = n;
  try {
    // All at once: one step admits them, so the choices of a prompt group fork its prompt.
    ids_ = engine.submit_all(std::move(choices), std::move(callbacks));
  } catch (const Error& e) {
    shared_->unfinished = 0;
    on_refused(n);
    if (e.status() == TSR_STATUS_DEVICE_ERROR) throw ApiError(500, e.what(), "server_error", "", "engine_failed");
    throw ApiError(400, e.what(), "invalid_request_error");
  }
}

GenerationJob::~GenerationJob() {
  if (!done()) cancel();
}

void GenerationJob::cancel() {
  for (RequestId id : ids_) engine_.cancel(id);
}

bool GenerationJob::done() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->unfinished == 0 && shared_->pending.empty();
}

std::vector<ChoiceDelta> GenerationJob::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(shared_->mutex);
  shared_->cv.wait_for(lock, timeout, [&] { return !shared_->pending.empty(); });
  std::vector<ChoiceDelta> out(std::make_move_iterator(shared_->pending.begin()),
                               std::make_move_iterator(shared_->pending.end()));
  shared_->pending.clear();
  return out;
}

OutputCallback GenerationJob::choice_callback(std::shared_ptr<Shared> shared, int32_t index,
                                             std::shared_ptr<LogprobCollector> collector, FinishHook on_finished) {
  return [shared, index, collector, on_finished](const RequestOutput& out) {
    ChoiceDelta d{index, out.text, out.tokens, {}, out.finished, out.finish_reason, out.error, out.embedding, out.stats, {}, {}};
    if (collector) d.logprobs = collector->take(out.tokens);
    if (out.finished && on_finished) on_finished(out);
    {
      std::lock_guard lock(shared->mutex);
      shared->pending.push_back(std::move(d));
      if (out.finished) --shared->unfinished;
    }
    shared->cv.notify_all();
  };
}

}  // namespace tsr::server
