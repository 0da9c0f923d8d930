#include "constraints/internal/integer_range.h"

#include <vector>

#include "constraints/errors.h"

namespace tsr::constraints {
namespace {

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(size_t n) {
  return n == 0 ? "" : " [0-9]{" + std::to_string(n) + "}";
}

// Equal-length digit strings lo <= hi: every string between them.
std::string same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "\"\"";
  size_t rest = lo.size() - 1;
  if (lo[0] == hi[0]) {
    if (rest == 0) return digit_class(lo[0], hi[0]);
    return digit_class(lo[0], lo[0]) + " " + same_length(lo.substr(1), hi.substr(1));
  }
  if (lo.substr(1) == std::string(rest, '0') && hi.substr(1) == std::string(rest, '9')) {
    return digit_class(lo[0], hi[0]) + any_digits(rest);
  }
  std::vector<std::string> alts;
  alts.push_back(digit_class(lo[0], lo[0]) +
                 (rest ? " " + same_length(lo.substr(1), std::string(rest, '9')) : ""));
  if (lo[0] + 1 <= hi[0] - 1) alts.push_back(digit_class(lo[0] + 1, hi[0] - 1) + any_digits(rest));
  alts.push_back(digit_class(hi[0], hi[0]) +
                 (rest ? " " + same_length(std::string(rest, '0'), hi.substr(1)) : ""));
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return "( " + out + " )";
}

}  // namespace

std::string magnitude_range_gbnf(const std::string& lo, const std::optional<std::string>& hi) {
  std::vector<std::string> alts;
  size_t last = hi ? hi->size() : lo.size();
  for (size_t len = lo.size(); len <= last; ++len) {
    std::string first = lo;
    if (len > lo.size()) first.assign(len, '0').front() = '1';
    std::string end = hi && len == hi->size() ? *hi : std::string(len, '9');
    if (first <= end) alts.push_back(same_length(first, end));
  }
  if (!hi) alts.push_back("[1-9] [0-9]{" + std::to_string(lo.size()) + ",}");
  std::string out;
  for (const std::string& alt : alts) out += (out.empty() ? "" : " | ") + alt;
  return out.empty() ? "[]" : "( " + out + " )";
}

namespace {

uint64_t magnitude_of(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) {
    throw CompileError("empty integer range [" + std::to_string(*lo) + ", " + std::to_string(*hi) + "]");
  }
  std::vector<std::string> alts;
  if (!hi || *hi >= 0) {
    uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<std::string> b;
    if (hi) b = std::to_string(*hi);
    alts.push_back(magnitude_range_gbnf(std::to_string(a), b));
  }
  if (!lo || *lo < 0) {
    uint64_t a = hi && *hi < 0 ? magnitude_of(*hi) : 1;
    std::optional<std::string> b;
    if (lo) b = std::to_string(magnitude_of(*lo));
    alts.push_back("\"-\" " + magnitude_range_gbnf(std::to_string(a), b));
  }
  std::string out;
  for (const std::string& alt : alts) out += (out.empty() ? "" : " | ") + alt;
  return "( " + out + " )";
}

}  // namespace tsr::constraints
