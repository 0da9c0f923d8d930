// Running a command line from a test: shell quoting and its captured output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace tsr::testing {

// `s` as one single-quoted shell word.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct CommandResult {
  int status = -1;  // the exit status; -1 when it did not start or did not exit
  std::string out;  // its standard output
};

// Runs `command` under /bin/sh and reads its standard output to the end.
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return r;
  std::array<char, 1 << 16> buf;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), pipe.get())) > 0;) r.out.append(buf.data(), n);
  const int status = pclose(pipe.release());
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace tsr::testing
