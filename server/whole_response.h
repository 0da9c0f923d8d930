// A non-streamed response: every choice accumulated, then one JSON body.
//
// A request that finishes within the first second answers like any handler (status 200,
// or 500 when generation failed). A longer one switches to a chunked body led by JSON
// whitespace: a departed client shows only when a write fails (a half-closed client still
// waits for its answer, so the end of its input says nothing), so the response writes a space every second while it waits, and a failed write cancels the
// job, freeing its KV blocks, as a stream's keep-alive comments do. Its status is then
// already 200: a generation that fails afterwards answers with OpenAI's error object.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "server/generation_job.h"
#include "server/openai_format.h"

#include "server/http_message.h"

namespace tsr::server {

void respond_whole(HttpResponse& res, std::shared_ptr<GenerationJob> job, ResponseMeta meta,
                   int32_t n, std::vector<std::string> echo, const Tokenizer& tokenizer,
                   const std::atomic<bool>& stopping, std::shared_ptr<void> in_flight);

}  // namespace tsr::server
