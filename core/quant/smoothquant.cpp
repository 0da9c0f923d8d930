#include "core/quant/smoothquant.h"

#include <algorithm>
#include <cmath>

namespace tsr::quant {

std::vector<float> smooth_scales(const std::vector<const FloatTensor*>& weights, const InputStats& stats,
                                 double alpha) {
  std::vector<float> w_max(size_t(stats.cols), 0.0f);
  for (const FloatTensor* w : weights) {
    for (int64_t r = 0; r < w->rows; ++r) {
      for (int64_t c = 0; c < w->cols; ++c) w_max[size_t(c)] = std::max(w_max[size_t(c)], std::fabs(w->data[size_t(r * w->cols + c)]));
    }
  }
  std::vector<float> s(size_t(stats.cols));
  for (size_t j = 0; j < s.size(); ++j) {
    // A channel no token or no weight uses keeps its scale (1): nothing to migrate.
    const bool unused = stats.abs_max[j] <= 0.0f || w_max[j] <= 0.0f;
    s[j] = unused ? 1.0f
                  : std::max(float(std::pow(double(stats.abs_max[j]), alpha) / std::pow(double(w_max[j]), 1.0 - alpha)), 1e-5f);
  }
  return s;
}

std::vector<SmoothGroup> smooth_apply(FloatTensors& t, const CalibrationStats& stats, int n_layer, double alpha) {
  std::vector<SmoothGroup> out;
  for (int l = 0; l < n_layer; ++l) {
    for (ScaleGroup& g : scale_groups(t, l, /*matrices=*/false)) {
      const auto st = stats.find(g.weights[0]);
      if (st == stats.end() || !scale_group_fits(g, t, st->second->cols)) continue;
      std::vector<const FloatTensor*> w;
      for (const std::string& name : g.weights) w.push_back(&t.at(name));
      std::vector<float> s = smooth_scales(w, *st->second, alpha);
      scale_group_apply(g, t, s);
      out.push_back({std::move(g), std::move(s)});
    }
  }
  return out;
}

}  // namespace tsr::quant
