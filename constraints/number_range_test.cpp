#include "constraints/internal/number_range.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "constraints/gbnf_match.h"

namespace tsr::constraints {
namespace {

// Every positional spelling of k / 100 for k in [-n, n] (and some with exponents),
// checked against the exact rational comparison.
void check_range(std::optional<NumberBound> lo, std::optional<NumberBound> hi, double l, double h) {
  GbnfMatcher m(number_range_gbnf(lo, hi));
  auto in = [&](double v) {
    bool ok = true;
    if (lo) ok &= lo->exclusive ? v > l : v >= l;
    if (hi) ok &= hi->exclusive ? v < h : v <= h;
    return ok;
  };
  for (int k = -1200; k <= 1200; ++k) {
    char buf[32];
    const double v = k / 100.0;
    std::snprintf(buf, sizeof buf, "%.2f", v);
    std::string two = buf;
    if (two == "-0.00") continue;
    ASSERT_EQ(m.matches(two), in(v)) << two;
    if (k % 100 == 0) {
      std::string integral = std::to_string(k / 100);
      ASSERT_EQ(m.matches(integral), in(v)) << integral;
    }
    if (k % 10 == 0) {
      std::snprintf(buf, sizeof buf, "%.1f", v);
      if (std::string(buf) != "-0.0") ASSERT_EQ(m.matches(buf), in(v)) << buf;
    }
  }
  EXPECT_FALSE(m.matches("1.")) << "JSON needs a digit after the point";
  EXPECT_FALSE(m.matches("01"));
}

TEST(NumberRange, DecimalBoundsAreExact) {
  check_range(NumberBound{"0.5"}, NumberBound{"3.25"}, 0.5, 3.25);
  check_range(NumberBound{"-2.5", true}, NumberBound{"-0.05", true}, -2.5, -0.05);
  check_range(NumberBound{"-1"}, std::nullopt, -1, 0);
  check_range(std::nullopt, NumberBound{"7.1", true}, 0, 7.1);
  check_range(NumberBound{"0", true}, NumberBound{"1"}, 0, 1);
  check_range(NumberBound{"1e-01"}, NumberBound{"1.5e+00"}, 0.1, 1.5);
  check_range(NumberBound{"-3.3"}, NumberBound{"-3.3"}, -3.3, -3.3);
}

TEST(NumberRange, ExponentsOnlyWhereBoundsCannotDependOnThem) {
  GbnfMatcher nonneg(number_range_gbnf(NumberBound{"0"}, std::nullopt));
  EXPECT_TRUE(nonneg.matches("1e-05"));
  EXPECT_TRUE(nonneg.matches("0"));
  EXPECT_FALSE(nonneg.matches("-1e-05"));
  GbnfMatcher positive(number_range_gbnf(NumberBound{"0", true}, std::nullopt));
  EXPECT_TRUE(positive.matches("2.5E+30"));
  EXPECT_FALSE(positive.matches("0.0e5"));
  EXPECT_FALSE(positive.matches("0"));
  GbnfMatcher bounded(number_range_gbnf(NumberBound{"0"}, NumberBound{"1"}));
  EXPECT_FALSE(bounded.matches("1e-05"));  // refused, not misjudged
  EXPECT_THROW(number_range_gbnf(NumberBound{"2"}, NumberBound{"1"}), std::exception);
}

}  // namespace
}  // namespace tsr::constraints
