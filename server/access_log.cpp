#include "server/access_log.h"

#include <spdlog/spdlog.h>

namespace tsr::server {

namespace {
thread_local std::shared_ptr<AccessRecord> t_record;
}  // namespace

void access_record_begin(std::shared_ptr<AccessRecord> record) { t_record = std::move(record); }

std::shared_ptr<AccessRecord> access_record_current() { return t_record; }

void access_record_end() { t_record.reset(); }

void access_log_write(const AccessRecord* r, const std::string& remote, const std::string& method,
                      const std::string& path, int status) {
  if (!r) {
    spdlog::info("{} \"{} {}\" {}", remote, method, path, status);
    return;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r->start).count();
  spdlog::info("{} \"{} {}\" {} prompt={} cached={} generated={} {:.1f} ms", remote, method, path, status,
               r->prompt_tokens.load(), r->cached_tokens.load(), r->generated_tokens.load(), ms);
}

}  // namespace tsr::server
