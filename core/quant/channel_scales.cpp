#include "core/quant/channel_scales.h"

#include <cstring>

namespace tsr::quant {

std::vector<ScaleGroup> scale_groups(const FloatTensors& t, int layer, bool matrices) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  auto has = [&](const std::string& n) { return t.count(p + n) != 0; };
  std::vector<ScaleGroup> g;
  if (has("attn_qkv.weight")) {
    g.push_back({p + "attn_norm.weight", "", {p + "attn_qkv.weight"}});
  } else if (has("attn_q.weight") && has("attn_k.weight") && has("attn_v.weight")) {
    g.push_back({p + "attn_norm.weight", "", {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}});
  }
  const bool gated = has("ffn_gate.weight");
  if (gated) {
    g.push_back({p + "ffn_norm.weight", "", {p + "ffn_gate.weight", p + "ffn_up.weight"}});
  } else if (has("ffn_up.weight")) {  // Phi-3's fused gate-up
    g.push_back({p + "ffn_norm.weight", "", {p + "ffn_up.weight"}});
  }
  if (!matrices) return g;
  if (gated && has("ffn_down.weight")) g.push_back({p + "ffn_up.weight", p + "ffn_up.bias", {p + "ffn_down.weight"}});
  if (has("attn_v.weight") && has("attn_output.weight") &&
      t.at(p + "attn_v.weight").rows == t.at(p + "attn_output.weight").cols) {
    g.push_back({p + "attn_v.weight", p + "attn_v.bias", {p + "attn_output.weight"}});
  }
  return g;
}

bool scale_group_fits(const ScaleGroup& g, const FloatTensors& t, int64_t cols) {
  const auto d = t.find(g.down);
  if (d == t.end()) return false;
  for (const std::string& w : g.weights) {
    const auto it = t.find(w);
    if (it == t.end() || it->second.cols != cols) return false;
  }
  return d->second.rows == 1 ? d->second.cols == cols : d->second.rows == cols;
}

void scale_group_apply(const ScaleGroup& g, FloatTensors& t, const std::vector<float>& s) {
  for (const std::string& name : g.weights) {
    FloatTensor& w = t.at(name);
    for (int64_t r = 0; r < w.rows; ++r) {
      for (int64_t c = 0; c < w.cols; ++c) w.data[size_t(r * w.cols + c)] *= s[size_t(c)];
    }
  }
  FloatTensor& d = t.at(g.down);
  if (d.rows == 1) {
    for (int64_t c = 0; c < d.cols; ++c) d.data[size_t(c)] /= s[size_t(c)];
    return;
  }
  for (int64_t r = 0; r < d.rows; ++r) {
    for (int64_t c = 0; c < d.cols; ++c) d.data[size_t(r * d.cols + c)] /= s[size_t(r)];
  }
  if (const auto b = t.find(g.bias); !g.bias.empty() && b != t.end()) {
    for (int64_t r = 0; r < b->second.cols; ++r) b->second.data[size_t(r)] /= s[size_t(r)];
  }
}

bool scale_group_tensor(const std::string& name) {
  static const char* const kSuffixes[] = {
      "attn_norm.weight", "ffn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
      "attn_qkv.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
      "attn_v.bias", "ffn_up.bias"};
  if (name.rfind("blk.", 0) != 0) return false;
  for (const char* s : kSuffixes) {
    const size_t n = std::strlen(s);
    if (name.size() > n && name.compare(name.size() - n, n, s) == 0) return true;
  }
  return false;
}

}  // namespace tsr::quant
