#include "constraints/internal/number_range.h"

#include <vector>

#include "constraints/errors.h"
#include "constraints/internal/integer_range.h"

namespace tsr::constraints {
namespace {

constexpr size_t kMaxDigits = 64;
constexpr const char* kFreeFraction = "( \".\" [0-9]+ )?";
constexpr const char* kExponent = "( [eE] [-+]? [0-9]+ )?";

// |value| as an integer part (no leading zeros, "0" for none) and fraction digits (no
// trailing zeros).
struct Magnitude {
  std::string int_digits = "0", frac_digits;
  bool exclusive = false;

  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
};

struct Decimal {
  bool negative = false;
  Magnitude m;
};

Decimal parse_decimal(const std::string& text) {
  Decimal d;
  size_t pos = 0;
  if (pos < text.size() && text[pos] == '-') d.negative = true, ++pos;
  std::string digits;
  long point = -1, exp = 0;
  for (; pos < text.size() && text[pos] != 'e' && text[pos] != 'E'; ++pos) {
    if (text[pos] == '.') {
      point = static_cast<long>(digits.size());
    } else {
      digits += text[pos];
    }
  }
  if (pos < text.size()) exp = std::stol(text.substr(pos + 1));
  if (point < 0) point = static_cast<long>(digits.size());
  point += exp;
  if (point > static_cast<long>(kMaxDigits) || point < -static_cast<long>(kMaxDigits) ||
      digits.size() > kMaxDigits) {
    throw CompileError("unsupported JSON Schema number bound " + text + " (more than " +
                       std::to_string(kMaxDigits) + " digits)");
  }
  if (point < 0) digits.insert(0, static_cast<size_t>(-point), '0'), point = 0;
  if (point > static_cast<long>(digits.size())) digits.append(static_cast<size_t>(point) - digits.size(), '0');
  std::string int_part = digits.substr(0, static_cast<size_t>(point));
  std::string frac = digits.substr(static_cast<size_t>(point));
  int_part.erase(0, std::min(int_part.find_first_not_of('0'), int_part.size()));
  frac.erase(frac.find_last_not_of('0') + 1);
  d.m.int_digits = int_part.empty() ? "0" : int_part;
  d.m.frac_digits = frac;
  if (d.m.is_zero()) d.negative = false;
  return d;
}

// a < b, a == b, a > b as -1, 0, 1.
int compare(const Magnitude& a, const Magnitude& b) {
  if (a.int_digits.size() != b.int_digits.size()) return a.int_digits.size() < b.int_digits.size() ? -1 : 1;
  if (int c = a.int_digits.compare(b.int_digits)) return c < 0 ? -1 : 1;
  size_t n = std::max(a.frac_digits.size(), b.frac_digits.size());
  std::string fa = a.frac_digits + std::string(n - a.frac_digits.size(), '0');
  std::string fb = b.frac_digits + std::string(n - b.frac_digits.size(), '0');
  int c = fa.compare(fb);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

std::string plus_one(std::string s) {
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '9') {
      ++s[i];
      return s;
    }
    s[i] = '0';
  }
  return "1" + s;
}

std::string minus_one(std::string s) {  // s > 0
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] != '0') {
      --s[i];
      break;
    }
    s[i] = '9';
  }
  s.erase(0, std::min(s.find_first_not_of('0'), s.size() - 1));
  return s;
}

// Fraction digit strings r (after the prefix already read) with lower <= 0.prefix r
// <= upper, as alternatives that each read at least one digit, plus whether r may be
// empty. `lower`/`upper` are the bounds' fraction digits; tight_* whether the prefix
// still equals the bound's prefix.
struct DigitsExpr {
  bool may_end = false;
  std::vector<std::string> alts;
};

class FractionRange {
 public:
  FractionRange(const Magnitude* lo, const Magnitude* hi) : lo_(lo), hi_(hi) {}

  DigitsExpr at(size_t i, bool tight_lo, bool tight_hi) const {
    if (tight_lo && rest_zero(lo_, i) && !lo_->exclusive) tight_lo = false;  // already >= lower
    if (tight_hi && rest_zero(hi_, i)) {
      if (hi_->exclusive || tight_lo) return {};
      return {true, {"\"0\"+"}};
    }
    if (!tight_lo && !tight_hi) return {true, {"[0-9]+"}};
    if (!tight_hi && rest_zero(lo_, i)) return {false, {"\"0\"* [1-9] [0-9]*"}};  // strictly above
    DigitsExpr out;
    out.may_end = !tight_lo;  // ending here: equal to the upper prefix padded (below it)
    char lo_d = tight_lo ? digit(lo_, i) : '0', hi_d = tight_hi ? digit(hi_, i) : '9';
    if (lo_d > hi_d) return {};
    if (tight_lo && tight_hi && lo_d == hi_d) {
      add(out, lo_d, lo_d, at(i + 1, true, true));
      return out;
    }
    char mid_lo = tight_lo ? lo_d + 1 : lo_d, mid_hi = tight_hi ? hi_d - 1 : hi_d;
    if (tight_lo) add(out, lo_d, lo_d, at(i + 1, true, false));
    if (mid_lo <= mid_hi) add(out, mid_lo, mid_hi, {true, {"[0-9]+"}});
    if (tight_hi) add(out, hi_d, hi_d, at(i + 1, false, true));
    return out;
  }

 private:
  static char digit(const Magnitude* m, size_t i) { return i < m->frac_digits.size() ? m->frac_digits[i] : '0'; }
  static bool rest_zero(const Magnitude* m, size_t i) { return i >= m->frac_digits.size(); }

  static void add(DigitsExpr& out, char lo, char hi, const DigitsExpr& rest) {
    std::string head = lo == hi ? std::string("\"") + lo + "\"" : std::string("[") + lo + "-" + hi + "]";
    std::string tail;
    for (const std::string& a : rest.alts) tail += (tail.empty() ? "" : " | ") + a;
    if (tail.empty()) {
      if (rest.may_end) out.alts.push_back(head);
      return;
    }
    out.alts.push_back(head + " ( " + tail + " )" + (rest.may_end ? "?" : ""));
  }

  const Magnitude* lo_;
  const Magnitude* hi_;
};

// The optional "." fraction of a number whose integer part equals the bounds' (each
// bound may be absent: no constraint from it).
std::string fraction(const Magnitude* lo, const Magnitude* hi) {
  if (!lo && !hi) return kFreeFraction;
  static const Magnitude zero;
  DigitsExpr d = FractionRange(lo ? lo : &zero, hi).at(0, lo != nullptr, hi != nullptr);
  std::string alts;
  for (const std::string& a : d.alts) alts += (alts.empty() ? "" : " | ") + a;
  if (alts.empty()) return d.may_end ? "\"\"" : "[]";
  return "( \".\" ( " + alts + " ) )" + (d.may_end ? "?" : "");
}

// Positional magnitudes m with lo <= m <= hi (strictness per bound); hi absent: above.
std::string magnitudes(const Magnitude& lo, const std::optional<Magnitude>& hi) {
  std::vector<std::string> alts;
  auto add = [&](const std::string& int_part, const std::string& frac) {
    if (frac != "[]" && int_part != "[]") alts.push_back(int_part + " " + frac);
  };
  const std::string& a = lo.int_digits;
  if (hi && a == hi->int_digits) {
    add("\"" + a + "\"", fraction(&lo, &*hi));
  } else {
    add("\"" + a + "\"", fraction(&lo, nullptr));
    const std::string above = plus_one(a);
    std::optional<std::string> below;
    if (hi) below = minus_one(hi->int_digits);
    const bool between = !below || above.size() < below->size() || (above.size() == below->size() && above <= *below);
    if (between) add(magnitude_range_gbnf(above, below), kFreeFraction);
    if (hi) add("\"" + hi->int_digits + "\"", fraction(nullptr, &*hi));
  }
  std::string out;
  for (const std::string& alt : alts) out += (out.empty() ? "" : " | ") + alt;
  return out.empty() ? "[]" : "( " + out + " )";
}

// Magnitudes in the range, with exponents where the range is every (nonzero) magnitude.
std::string magnitude_range(const Magnitude& lo, const std::optional<Magnitude>& hi) {
  if (hi && (compare(lo, *hi) > 0 || (compare(lo, *hi) == 0 && (lo.exclusive || hi->exclusive)))) return "[]";
  if (!hi && lo.is_zero()) {
    if (!lo.exclusive) return std::string("( \"0\" | [1-9] [0-9]* ) ") + kFreeFraction + " " + kExponent;
    return std::string("( [1-9] [0-9]* ") + kFreeFraction + " | \"0.\" \"0\"* [1-9] [0-9]* ) " + kExponent;
  }
  return magnitudes(lo, hi);
}

}  // namespace

std::string number_range_gbnf(const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi) {
  std::optional<Decimal> l, h;
  if (lo) l = parse_decimal(lo->value), l->m.exclusive = lo->exclusive;
  if (hi) h = parse_decimal(hi->value), h->m.exclusive = hi->exclusive;
  std::vector<std::string> alts;
  Magnitude zero;
  if (!h || !h->negative) {  // x >= 0: magnitudes from max(lo, 0) to hi
    Magnitude from = l && !l->negative ? l->m : zero;
    std::optional<Magnitude> to;
    if (h) to = h->m;
    std::string e = magnitude_range(from, to);
    if (e != "[]") alts.push_back(e);
  }
  if (!l || l->negative) {  // x < 0: "-" and magnitudes from max(-hi, 0 exclusive) to -lo
    Magnitude from = zero;
    from.exclusive = true;
    if (h && h->negative) from = h->m;
    std::optional<Magnitude> to;
    if (l) to = l->m;
    std::string e = magnitude_range(from, to);
    if (e != "[]") alts.push_back("\"-\" " + e);
  }
  if (alts.empty()) throw CompileError("empty number range");
  std::string out;
  for (const std::string& alt : alts) out += (out.empty() ? "" : " | ") + alt;
  return "( " + out + " )";
}

}  // namespace tsr::constraints
