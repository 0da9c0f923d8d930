#include "core/quant/awq.h"

#include <algorithm>
#include <cmath>

#include "core/quant/layer_error.h"

namespace tsr::quant {

namespace {

std::vector<float> scales_for(const std::vector<float>& mean_abs, double alpha) {
  std::vector<float> s(mean_abs.size());
  for (size_t j = 0; j < s.size(); ++j) s[j] = std::max(float(std::pow(double(mean_abs[j]), alpha)), 1e-4f);
  const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
  const float norm = std::sqrt(*lo * *hi);
  for (float& v : s) v /= norm;
  return s;
}

double scaled_error(const AwqWeight& a, const std::vector<float>& s, const InputStats& stats) {
  const int64_t cols = stats.cols, rows = a.rows;
  const std::span<const float> w = a.w;
  std::vector<float> ws(w.size()), q(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) ws[size_t(r * cols + c)] = w[size_t(r * cols + c)] * s[size_t(c)];
  }
  a.round_trip(ws, rows, cols, q);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) q[size_t(r * cols + c)] /= s[size_t(c)];
  }
  return layer_output_error(w, q, rows, cols, stats.hessian);
}

bool group_applies(const ScaleGroup& g, const FloatTensors& t, const CalibrationStats& stats,
                   const RoundTripFor& round_trip_for) {
  const auto st = stats.find(g.weights[0]);
  if (st == stats.end() || !scale_group_fits(g, t, st->second->cols)) return false;
  for (const std::string& w : g.weights) {
    if (!round_trip_for(w)) return false;
  }
  return true;
}

}  // namespace

AwqSearch awq_search(const std::vector<AwqWeight>& weights, const InputStats& stats, int grid) {
  const std::vector<float> mean_abs = stats.abs_mean();
  AwqSearch best;
  for (int a = 0; a < std::max(grid, 1); ++a) {
    const double alpha = double(a) / std::max(grid, 1);
    std::vector<float> s = a == 0 ? std::vector<float>(mean_abs.size(), 1.0f) : scales_for(mean_abs, alpha);
    double err = 0;
    for (const AwqWeight& w : weights) err += scaled_error(w, s, stats);
    if (a == 0) best.rtn_error = err;
    if (a == 0 || err < best.error) best = {std::move(s), alpha, err, best.rtn_error};
  }
  return best;
}

std::vector<AwqGroup> awq_apply(FloatTensors& t, const CalibrationStats& stats, int n_layer,
                                const RoundTripFor& round_trip_for, int grid, const std::function<void(int, int)>& done) {
  std::vector<AwqGroup> out;
  for (int l = 0; l < n_layer; ++l) {
    for (const ScaleGroup& g : scale_groups(t, l, /*matrices=*/true)) {
      if (!group_applies(g, t, stats, round_trip_for)) continue;
      std::vector<AwqWeight> w;
      for (const std::string& name : g.weights) w.push_back({t.at(name).data, t.at(name).rows, round_trip_for(name)});
      AwqSearch s = awq_search(w, *stats.at(g.weights[0]), grid);
      scale_group_apply(g, t, s.scales);
      out.push_back({g, std::move(s)});
    }
    if (done) done(l + 1, n_layer);
  }
  return out;
}

}  // namespace tsr::quant
