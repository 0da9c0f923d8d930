// One access-log line per HTTP request at info, as vLLM's and llama-server's print:
//   127.0.0.1 "POST /v1/completions" 200 prompt=12 cached=0 generated=16 48.2 ms
//
// httplib serves a request on one thread, from the pre-routing handler through the handler
// to the logger (which runs once a streamed body is written), so the record of the request
// in service is per thread. The token counts arrive from the engine's step thread, through
// the finish hooks of the request's choices, hence the shared, atomic record.
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

// Starts the record of the request this thread now serves.
void access_record_begin();
// The record of the request this thread serves; NULL outside one.
std::shared_ptr<AccessRecord> access_record_current();
// Writes the line and ends the record.
void access_log_write(const std::string& remote, const std::string& method, const std::string& path, int status);

}  // namespace tsr::server
