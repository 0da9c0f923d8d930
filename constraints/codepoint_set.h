// Sets of Unicode code points as sorted disjoint ranges, and their UTF-8 encodings as
// sequences of byte ranges (so a byte-level automaton can match a character class).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tsr::constraints {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct CodepointRange {
  uint32_t lo, hi;
};

class CodepointSet {
 public:
  CodepointSet() = default;
  CodepointSet(uint32_t lo, uint32_t hi) { add(lo, hi); }

  void add(uint32_t lo, uint32_t hi);
  void add(const CodepointSet& other);
  // Every scalar value (surrogates excluded) not in this set.
  CodepointSet complement() const;
  CodepointSet minus(const CodepointSet& other) const;
  bool contains(uint32_t c) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<CodepointRange>& ranges() const { return ranges_; }

 private:
  std::vector<CodepointRange> ranges_;  // sorted, disjoint, non-adjacent
};

// One UTF-8 encoding shape: byte k of the character lies in [first, second] of element k.
using ByteRangeSeq = std::vector<std::pair<uint8_t, uint8_t>>;

// The UTF-8 encodings of all scalar values in [lo, hi], as disjoint byte-range sequences.
std::vector<ByteRangeSeq> utf8_sequences(uint32_t lo, uint32_t hi);

void append_utf8(std::string& out, uint32_t cp);

// Decodes one code point at `pos` (advancing it); invalid UTF-8 (a bad lead or
// continuation byte, an overlong form, a surrogate, a value past U+10FFFF) yields its
// first byte as the code point of that value (U+0080..U+00FF), advancing by one.
uint32_t decode_utf8(const std::string& s, size_t& pos);

}  // namespace tsr::constraints
