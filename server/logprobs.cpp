#include "server/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tsr::server {

namespace {

double log_sum_exp(std::span<const float> row) {
  const float max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float x : row) sum += std::exp(double(x) - max);
  return max + std::log(sum);
}

TokenLogprob reduce(std::span<const float> row, int32_t token, int32_t top_n) {
  const double lse = log_sum_exp(row);
  TokenLogprob t{token, float(row[size_t(token)] - lse), {}};
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto n = std::min<size_t>(size_t(top_n), ids.size());
  // Ties go to the lower id, so the list does not depend on the sort implementation.
  std::partial_sort(ids.begin(), ids.begin() + long(n), ids.end(), [&](int32_t a, int32_t b) {
    return row[size_t(a)] != row[size_t(b)] ? row[size_t(a)] > row[size_t(b)] : a < b;
  });
  for (size_t i = 0; i < n; ++i) t.top.push_back({ids[i], float(row[size_t(ids[i])] - lse)});
  return t;
}

}  // namespace

std::vector<TokenLogprob> LogprobCollector::take(std::span<const int32_t> tokens) {
  std::vector<TokenLogprob> out;
  for (int32_t token : tokens) {
    if (rows_.empty()) break;  // cannot happen: every appended token had its row first
    out.push_back(reduce(rows_.front(), token, top_n_));
    rows_.pop_front();
  }
  return out;
}

}  // namespace tsr::server
