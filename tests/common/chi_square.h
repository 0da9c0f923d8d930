// Chi-square homogeneity test of two samples of categorical counts, for tests that
// compare distributions (speculative decoding, samplers).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>

namespace tsr {

// Regularized upper incomplete gamma Q(a, x) (Numerical Recipes' series / continued
// fraction), the survival function of chi-square: P(X > x) = Q(k/2, x/2).
inline double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double gln = std::lgamma(a);
  if (x < a + 1) {  // series for P, then Q = 1 - P
    double sum = 1.0 / a, term = sum;
    for (int n = 1; n < 1000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::abs(term) < std::abs(sum) * 1e-15) break;
    }
    return 1.0 - sum * std::exp(-x + a * std::log(x) - gln);
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;  // Lentz's continued fraction
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::abs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::abs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    h *= d * c;
    if (std::abs(d * c - 1) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - gln) * h;
}

// p-value that two count vectors come from one distribution. Categories with fewer than
// 5 expected observations are pooled so the chi-square approximation holds.
inline double chi_square_homogeneity_p(const std::map<int32_t, int64_t>& a,
                                       const std::map<int32_t, int64_t>& b) {
  double na = 0, nb = 0;
  std::map<int32_t, std::pair<double, double>> cells;
  for (const auto& [k, v] : a) { cells[k].first += v; na += v; }
  for (const auto& [k, v] : b) { cells[k].second += v; nb += v; }
  if (na == 0 || nb == 0) return 1.0;
  const double n = na + nb;
  double stat = 0, pooled_a = 0, pooled_b = 0;
  int dof = -1;
  auto add = [&](double oa, double ob) {
    const double total = oa + ob;
    const double ea = total * na / n, eb = total * nb / n;
    stat += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
    ++dof;
  };
  for (const auto& [k, ab] : cells) {
    if ((ab.first + ab.second) * std::min(na, nb) / n < 5) {
      pooled_a += ab.first;
      pooled_b += ab.second;
    } else {
      add(ab.first, ab.second);
    }
  }
  if (pooled_a + pooled_b > 0) add(pooled_a, pooled_b);
  if (dof <= 0) return 1.0;
  return gamma_q(dof / 2.0, stat / 2.0);
}

}  // namespace tsr
