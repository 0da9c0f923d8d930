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

// What AWQ scales in one layer, by GGUF name: `down` is divided (a norm's weights, or the
// rows of a matrix and its `bias`), `weights` multiplied column-wise.
struct GroupSpec {
  std::string down, bias;
  std::vector<std::string> weights;
};

std::vector<GroupSpec> layer_groups(const FloatTensors& t, const std::string& p) {
  auto has = [&](const std::string& n) { return t.count(p + n) != 0; };
  std::vector<GroupSpec> g;
  if (has("attn_qkv.weight")) {
    g.push_back({p + "attn_norm.weight", "", {p + "attn_qkv.weight"}});
  } else if (has("attn_q.weight") && has("attn_k.weight") && has("attn_v.weight")) {
    g.push_back({p + "attn_norm.weight", "", {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}});
  }
  const bool gated = has("ffn_gate.weight");
  if (gated) {
    g.push_back({p + "ffn_norm.weight", "", {p + "ffn_gate.weight", p + "ffn_up.weight"}});
    // down reads act(gate) * up, linear in up: up's rows carry the scale.
    g.push_back({p + "ffn_up.weight", p + "ffn_up.bias", {p + "ffn_down.weight"}});
  } else if (has("ffn_up.weight")) {  // Phi-3's fused gate-up
    g.push_back({p + "ffn_norm.weight", "", {p + "ffn_up.weight"}});
  }
  // The output projection reads the heads' mix of V's rows, one to one only without GQA.
  if (has("attn_v.weight") && has("attn_output.weight") && t.at(p + "attn_v.weight").rows == t.at(p + "attn_output.weight").cols) {
    g.push_back({p + "attn_v.weight", p + "attn_v.bias", {p + "attn_output.weight"}});
  }
  return g;
}

bool group_applies(const GroupSpec& g, const FloatTensors& t, const CalibrationStats& stats,
                   const RoundTripFor& round_trip_for) {
  const auto st = stats.find(g.weights[0]);
  if (st == stats.end() || t.count(g.down) == 0) return false;
  const int64_t cols = st->second->cols;
  for (const std::string& w : g.weights) {
    if (t.count(w) == 0 || t.at(w).cols != cols || !round_trip_for(w)) return false;
  }
  const FloatTensor& d = t.at(g.down);
  const bool norm = d.rows == 1;
  return norm ? d.cols == cols : d.rows == cols;
}

void apply_scales(const GroupSpec& g, FloatTensors& t, const std::vector<float>& s) {
  for (const std::string& name : g.weights) {
    FloatTensor& w = t.at(name);
    for (int64_t r = 0; r < w.rows; ++r) {
      for (int64_t c = 0; c < w.cols; ++c) w.data[size_t(r * w.cols + c)] *= s[size_t(c)];
    }
  }
  FloatTensor& d = t.at(g.down);
  if (d.rows == 1) {
    for (int64_t c = 0; c < d.cols; ++c) d.data[size_t(c)] /= s[size_t(c)];
  } else {
    for (int64_t r = 0; r < d.rows; ++r) {
      for (int64_t c = 0; c < d.cols; ++c) d.data[size_t(r * d.cols + c)] /= s[size_t(r)];
    }
    if (const auto b = t.find(g.bias); !g.bias.empty() && b != t.end()) {
      for (int64_t r = 0; r < b->second.cols; ++r) b->second.data[size_t(r)] /= s[size_t(r)];
    }
  }
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
    for (const GroupSpec& g : layer_groups(t, "blk." + std::to_string(l) + ".")) {
      if (!group_applies(g, t, stats, round_trip_for)) continue;
      std::vector<AwqWeight> w;
      for (const std::string& name : g.weights) w.push_back({t.at(name).data, t.at(name).rows, round_trip_for(name)});
      AwqSearch s = awq_search(w, *stats.at(g.weights[0]), grid);
      apply_scales(g, t, s.scales);
      out.push_back({g.down, g.weights, std::move(s)});
    }
    if (done) done(l + 1, n_layer);
  }
  return out;
}

}  // namespace tsr::quant
