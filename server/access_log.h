// One access-log line per HTTP request at info, as vLLM's and llama-server's print:
//   127.0.0.1 "POST /v1/completions" 200 prompt=12 cached=0 generated=16 48.2 ms
//
// A handler runs on one worker thread, so the record of the request it serves is that
// thread's while it runs (the finish hooks of the request's choices take it from there);
// the transport keeps it until the response is written, then writes the line. The token
// counts arrive from the engine's step thread, hence the shared, atomic record.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace tsr::server {

struct AccessRecord {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::atomic<int64_t> prompt_tokens{0}, cached_tokens{0}, generated_tokens{0};
};

// `record` is the request this thread now serves.
void access_record_begin(std::shared_ptr<AccessRecord> record);
// The record of the request this thread serves; NULL outside one.
std::shared_ptr<AccessRecord> access_record_current();
// The thread no longer serves the request.
void access_record_end();
// Writes the line; `record` can be NULL (a request refused before a handler saw it).
void access_log_write(const AccessRecord* record, const std::string& remote, const std::string& method,
                      const std::string& path, int status);

}  // namespace tsr::server
