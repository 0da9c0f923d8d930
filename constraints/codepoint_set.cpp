#include "constraints/codepoint_set.h"

#include <algorithm>

namespace tsr::constraints {

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.push_back({lo, hi});
  std::sort(ranges_.begin(), ranges_.end(),
            [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (const CodepointRange& r : ranges_) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

void CodepointSet::add(const CodepointSet& other) {
  for (const CodepointRange& r : other.ranges_) add(r.lo, r.hi);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet out;
  uint32_t next = 0;
  for (const CodepointRange& r : ranges_) {
    if (r.lo > next) out.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.add(next, kMaxCodepoint);
  return out;
}

CodepointSet CodepointSet::minus(const CodepointSet& other) const {
  CodepointSet keep = other.complement();
  CodepointSet out;
  for (const CodepointRange& a : ranges_) {
    for (const CodepointRange& b : keep.ranges_) {
      uint32_t lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
      if (lo <= hi) out.add(lo, hi);
    }
  }
  return out;
}

bool CodepointSet::contains(uint32_t c) const {
  for (const CodepointRange& r : ranges_) {
    if (c >= r.lo && c <= r.hi) return true;
  }
  return false;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t decode_utf8(const std::string& s, size_t& pos) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  uint8_t b0 = byte(pos);
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
  if (len <= 1 || pos + len > s.size()) {
    ++pos;
    return b0;
  }
  uint32_t cp = b0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    if ((byte(pos + k) & 0xC0) != 0x80) {  // not a continuation byte
      ++pos;
      return b0;
    }
    cp = (cp << 6) | (byte(pos + k) & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid too.
  static constexpr uint32_t kMinOfLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinOfLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++pos;
    return b0;
  }
  pos += len;
  return cp;
}

namespace {

// Splits [lo, hi] until both ends share every leading byte but the varying ones, the
// classic construction (as in RE2 and Rust's regex-syntax).
void split_utf8(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // surrogates have no UTF-8 encoding
    if (lo < 0xD800) split_utf8(lo, 0xD7FF, out);
    if (hi > 0xDFFF) split_utf8(0xE000, hi, out);
    return;
  }
  for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= boundary && boundary < hi) {
      split_utf8(lo, boundary, out);
      split_utf8(boundary + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  for (int i = 1; i < 4; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8(lo, lo | m, out);
        split_utf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_utf8(lo, (hi & ~m) - 1, out);
        split_utf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  ByteRangeSeq seq;
  for (size_t k = 0; k < a.size(); ++k) {
    seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  }
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<ByteRangeSeq> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<ByteRangeSeq> out;
  split_utf8(lo, std::min(hi, kMaxCodepoint), out);
  return out;
}

}  // namespace tsr::constraints
