#include "server/event_stream.h"

#include "server/http_message.h"

#include <chrono>

#include "server/api_error.h"

namespace tsr::server {

namespace {

using nlohmann::json;

constexpr auto kKeepAlive = std::chrono::seconds(1);

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

EventStream::EventStream(std::shared_ptr<GenerationJob> job, ResponseMeta meta, int32_t n, bool include_usage,
                         std::vector<std::string> echo, const Tokenizer& tokenizer, const std::atomic<bool>& stopping)
    : job_(std::move(job)),
      meta_(std::move(meta)),
      n_(n),
      include_usage_(include_usage),
      echo_(std::move(echo)),
      tokenizer_(tokenizer),
      stopping_(stopping),
      started_(size_t(job_->num_choices())),
      text_offsets_(size_t(job_->num_choices())),
      finals_(size_t(job_->num_choices())) {
  if (meta_.tool_format) tool_replies_.assign(size_t(job_->num_choices()), ToolReplyStream(*meta_.tool_format));
  if (meta_.reasoning) reasonings_.assign(size_t(job_->num_choices()), ReasoningStream(*meta_.reasoning));
}

bool EventStream::write_event(DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  return sink.write(event.data(), event.size());
}

bool EventStream::write_delta(DataSink& sink, ChoiceDelta& d) {
  const auto i = size_t(d.index);
  if (d.finished) finals_[i] = d.stats;
  if (d.finish_reason == TSR_FINISH_ERROR) {
    return write_event(sink, dump(ApiError(500, "generation failed: " + d.error, "server_error").to_json()));
  }
  if (!started_[i] && !echo_.empty()) d.text = echo_[i / size_t(n_)] + d.text;
  if (!reasonings_.empty()) {  // the reasoning block's text goes out as reasoning_content
    ReasoningSplit split = reasonings_[i].push(d.text);
    if (d.finished) {
      ReasoningSplit rest = reasonings_[i].finish();
      split.reasoning += rest.reasoning;
      split.content += rest.content;
    }
    d.reasoning = std::move(split.reasoning);
    d.text = std::move(split.content);
  }
  if (!tool_replies_.empty()) {  // text that may be a call waits for the end of the reply
    d.text = tool_replies_[i].push(d.text);
    if (d.finished) {
      ParsedReply reply = tool_replies_[i].finish();
      d.text += reply.content;
      d.tool_calls = std::move(reply.calls);
    }
  }
  // An increment with nothing in it (e.g. tokens held back for a stop string) is not sent,
  // unless it finishes the choice.
  if (started_[i] && d.text.empty() && d.tokens.empty() && !d.finished) return true;
  json chunk = chunk_json(meta_, d, !started_[i], text_offsets_[i], tokenizer_);
  if (include_usage_) chunk["usage"] = nullptr;
  started_[i] = true;
  return write_event(sink, dump(chunk));
}

bool EventStream::finish(DataSink& sink) {
  if (include_usage_ && !write_event(sink, dump(usage_chunk_json(meta_, usage_json(finals_, n_))))) return false;
  if (!write_event(sink, "[DONE]")) return false;
  sink.done();
  return true;
}

bool EventStream::pump(DataSink& sink) {
  if (stopping_) job_->cancel();
  std::vector<ChoiceDelta> deltas = job_->next(kKeepAlive);
  for (ChoiceDelta& d : deltas) {
    if (!write_delta(sink, d)) {
      job_->cancel();
      return false;
    }
  }
  if (job_->done()) return finish(sink);
  if (deltas.empty() && !sink.write(": keep-alive\n\n", 14)) {
    job_->cancel();
    return false;
  }
  return true;
}

void start_event_stream(HttpResponse& res, std::shared_ptr<EventStream> stream, std::shared_ptr<void> in_flight) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies must not buffer the stream
  res.set_chunked_content_provider(
      "text/event-stream", [stream](DataSink& sink) { return stream->pump(sink); },
      [stream, in_flight](bool success) {
        if (!success) stream->cancel();
      });
}

}  // namespace tsr::server
