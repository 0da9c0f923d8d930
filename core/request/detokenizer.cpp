#include "core/request/detokenizer.h"

namespace tsr {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// What a lead byte allows (Unicode 15, table 3-7): the sequence length and the range of
// the second byte, which is narrower after E0, ED, F0 and F4 to rule out overlong forms,
// surrogates and values above U+10FFFF. Later bytes are always 80..BF.
struct Lead {
  size_t length;  // 0: the byte never starts a character
  uint8_t second_lo = 0x80, second_hi = 0xBF;
};

Lead lead_of(uint8_t b) {
  if (b < 0x80) return {1};
  if (b < 0xC2) return {0};  // continuation bytes, and C0/C1 which are only overlong
  if (b < 0xE0) return {2};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0};
}

// How the sequence starting at bytes[0] turns out.
struct Match {
  size_t length;   // bytes of the character, or of the maximal ill-formed subpart (>= 1)
  bool valid;      // a whole well-formed character
  bool cut_short;  // well-formed so far but the input ends: later bytes may complete it
};

Match match_at(std::string_view bytes) {
  const Lead lead = lead_of(static_cast<uint8_t>(bytes[0]));
  if (lead.length == 0) return {1, false, false};
  size_t n = 1;
  for (; n < lead.length && n < bytes.size(); ++n) {
    const auto b = static_cast<uint8_t>(bytes[n]);
    const uint8_t lo = n == 1 ? lead.second_lo : 0x80;
    const uint8_t hi = n == 1 ? lead.second_hi : 0xBF;
    if (b < lo || b > hi) break;
  }
  return {n, n == lead.length, n < lead.length && n == bytes.size()};
}

}  // namespace

size_t utf8_complete_prefix(std::string_view bytes) {
  // A character is at most 4 bytes, so only a start among the last 3 can be incomplete.
  // Such a start is a lead byte, which no earlier sequence can include, so decoding the
  // prefix alone gives what decoding the whole would give for it.
  const size_t first = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t start = first; start < bytes.size(); ++start) {
    if (match_at(bytes.substr(start)).cut_short) return start;
  }
  return bytes.size();
}

std::string utf8_replace_invalid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    const Match m = match_at(bytes);
    out += m.valid ? bytes.substr(0, m.length) : kReplacement;
    bytes.remove_prefix(m.length);
  }
  return out;
}

std::string IncrementalDetokenizer::push(int32_t token) {
  pending_ += tokenizer_.token_to_piece(token);
  const size_t complete = utf8_complete_prefix(pending_);
  std::string out = utf8_replace_invalid(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out = utf8_replace_invalid(pending_);
  pending_.clear();
  return out;
}

}  // namespace tsr
