// The log format of the `tessera` command: one line per record on stderr, whatever the
// record holds. Messages carry strings from model files, configs and requests (an
// architecture name, a chat template, a tensor name), so their control characters are
// escaped: a file cannot end a line and forge the next record, or drive the terminal.
#pragma once

#include <string>
#include <string_view>

namespace tsr::app {

// `text` with each control character (C0, DEL) written as \n, \r or \xNN; tabs and every
// other byte (UTF-8 included) kept as they are.
std::string escape_control(std::string_view text);

// The default logger: stderr, "[time] [level] message" with the message escaped.
void install_log_format();

}  // namespace tsr::app
