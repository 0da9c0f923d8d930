// A streamed response: server-sent events "data: {chunk}\n\n", one per choice increment,
// then (with include_usage) a usage chunk and "data: [DONE]\n\n".
//
// A peer that has gone shows only when a write fails (a half-closed client still reads
// its answer, so the end of its input says nothing), so a stream waiting for tokens
// writes an SSE comment every second: a write that fails means the client left, and
// the job is cancelled so that its KV blocks go back to the pool.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "server/generation_job.h"
#include "server/openai_format.h"
#include "core/chat/reasoning.h"
#include "server/tool_choice.h"

#include "server/http_message.h"

namespace tsr::server {

class EventStream {
 public:
  EventStream(std::shared_ptr<GenerationJob> job, ResponseMeta meta, int32_t n, bool include_usage,
              std::vector<std::string> echo, const Tokenizer& tokenizer, const std::atomic<bool>& stopping);

  // One round of the content provider: waits for increments and writes them. Returns
  // false when the client is gone (the job is cancelled).
  bool pump(DataSink& sink);
  void cancel() { job_->cancel(); }

 private:
  bool write_event(DataSink& sink, const std::string& data);
  bool write_delta(DataSink& sink, ChoiceDelta& d);
  bool finish(DataSink& sink);

  std::shared_ptr<GenerationJob> job_;
  ResponseMeta meta_;
  int32_t n_;
  bool include_usage_;
  std::vector<std::string> echo_;  // per prompt, completions with echo only
  const Tokenizer& tokenizer_;
  const std::atomic<bool>& stopping_;
  std::vector<bool> started_;
  std::vector<size_t> text_offsets_;
  std::vector<RequestStats> finals_;
  std::vector<ToolReplyStream> tool_replies_;  // per choice, chat with tools only
  std::vector<ReasoningStream> reasonings_;    // per choice, chat with a reasoning template only
};

// Makes `res` a chunked text/event-stream fed by `stream`; `in_flight` is held until the
// response is written.
void start_event_stream(HttpResponse& res, std::shared_ptr<EventStream> stream, std::shared_ptr<void> in_flight);

}  // namespace tsr::server
