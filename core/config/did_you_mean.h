// "Did you mean ...?" for misspelled names: config keys and values, command-line flags and
// subcommands, plugin names.
#pragma once

#include <span>
#include <string_view>

namespace tsr {

// The closest candidate, or "" when none is close enough to be a plausible typo: at most
// one edit per three letters (at least one), or one name a prefix of the other ("warning"
// for "warn", "q8" for "q8_0"). Case is ignored so "FCFS" suggests "fcfs".
std::string_view closest_name(std::string_view word, std::span<const std::string_view> candidates);

}  // namespace tsr
