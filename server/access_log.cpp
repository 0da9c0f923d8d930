#include "server/access_log.h"

#include <spdlog/spdlog.h>

namespace tsr::server {

namespace {
thread_local std::shared_ptr<AccessRecord> t_record;
}  // namespace

void access_record_begin() { t_record = std::make_shared<AccessRecord>(); }

std::shared_ptr<AccessRecord> access_record_current() { return t_record; }

void access_log_write(const std::string& remote, const std::string& method, const std::string& path, int status) {
  const std::shared_ptr<AccessRecord> r = std::move(t_record);
  if (!r) {  // refused before routing began (a malformed request line)
    spdlog::info("{} \"{} {}\" {}", remote, method, path, status);
    return;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r->start).count();
  spdlog::info("{} \"{} {}\" {} prompt={} cached={} generated={} {:.1f} ms", remote, method, path, status,
               r->prompt_tokens.load(), r->cached_tokens.load(), r->generated_tokens.load(), ms);
}

}  // namespace tsr::server
