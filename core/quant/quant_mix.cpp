#include "core/quant/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>

#include <fmt/format.h>

#include "core/quant/quant.h"

namespace tsr::quant {

namespace {

enum class Category { output, token_embd, attn_v, attn_k, attn_q, attn_output, ffn_up, ffn_gate, ffn_down, other };

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// llama-quant.cpp's tensor_get_category, in its order: attn_qkv and attn_kv_b count as
// value projections, as llama.cpp's category_is_attn_v.
Category category_of(const std::string& name) {
  if (name == "output.weight") return Category::output;
  if (name == "token_embd.weight") return Category::token_embd;
  if (has(name, "attn_qkv.weight") || has(name, "attn_kv_b.weight") || has(name, "attn_v.weight")) return Category::attn_v;
  if (has(name, "attn_k.weight")) return Category::attn_k;
  if (has(name, "attn_q.weight")) return Category::attn_q;
  if (has(name, "attn_output.weight")) return Category::attn_output;
  if (has(name, "ffn_up")) return Category::ffn_up;
  if (has(name, "ffn_gate")) return Category::ffn_gate;
  if (has(name, "ffn_down")) return Category::ffn_down;
  return Category::other;
}

int layer_of(const std::string& name) {
  int layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  return layer;
}

// The layers llama.cpp gives more bits: the first and last eighths and every third between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

struct Counters {
  int attention_wv = 0;
  int ffn_down = 0;
};

GgmlType output_type(const QuantMix& mix, int64_t ncols) {
  if (ncols % kQK_K != 0) return GgmlType::Q8_0;
  return mix.base == GgmlType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
}

GgmlType attn_v_type(const QuantMix& mix, const MixModel& m, int i) {
  GgmlType t = mix.base;
  if (mix.kind != MixKind::q6_k && use_more_bits(i, m.n_attention_wv)) t = GgmlType::Q6_K;
  if (m.is_70b && t == GgmlType::Q4_K) t = GgmlType::Q5_K;
  if (m.n_expert == 8) t = GgmlType::Q8_0;  // 8-expert models: ~128 MB for much better V
  return t;
}

GgmlType ffn_down_type(const QuantMix& mix, const MixModel& m, const std::string& name, int counter) {
  const int i = m.n_expert > 1 ? layer_of(name) : counter;
  if (mix.kind != MixKind::q6_k && use_more_bits(i, m.n_layer)) return GgmlType::Q6_K;
  return mix.base;
}

// llama_tensor_get_type_impl for the K-quant mixes, before the fallback.
GgmlType rule_type(const QuantMix& mix, const MixModel& m, const GgufTensorInfo& t, Counters& n) {
  switch (category_of(t.name)) {
    case Category::output: return output_type(mix, t.ne[0]);
    case Category::token_embd: return m.has_output ? mix.base : output_type(mix, t.ne[0]);
    case Category::attn_v: return attn_v_type(mix, m, n.attention_wv++);
    case Category::attn_k: return m.n_expert == 8 ? GgmlType::Q8_0 : mix.base;
    case Category::attn_output:
      return m.n_expert == 8 && mix.kind == MixKind::q4_k_m ? GgmlType::Q5_K : mix.base;
    case Category::ffn_down: return ffn_down_type(mix, m, t.name, n.ffn_down++);
    default: return mix.base;
  }
}

// llama.cpp's tensor order while it counts: by layer (non-layer tensors first), then name.
std::vector<size_t> count_order(const std::vector<GgufTensorInfo>& tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  return order;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string name_of(GgmlType t) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(t));
  return traits ? lower(traits->name) : "?";
}

}  // namespace

std::optional<QuantMix> quant_mix_parse(std::string name) {
  name = lower(std::move(name));
  if (name == "q4_k_m") return QuantMix{MixKind::q4_k_m, GgmlType::Q4_K, 15};
  if (name == "q5_k_m") return QuantMix{MixKind::q5_k_m, GgmlType::Q5_K, 17};
  if (name == "q6_k") return QuantMix{MixKind::q6_k, GgmlType::Q6_K, 18};
  return std::nullopt;
}

MixModel MixModel::of(const GgufFile& file) {
  MixModel m;
  m.arch = file.get_string("general.architecture").value_or("");
  m.n_layer = static_cast<int32_t>(file.get_int(m.arch + ".block_count").value_or(0));
  m.n_expert = static_cast<int32_t>(file.get_int(m.arch + ".expert_count").value_or(0));
  const int64_t heads = file.get_int(m.arch + ".attention.head_count").value_or(0);
  const int64_t kv_heads = file.get_int(m.arch + ".attention.head_count_kv").value_or(heads);
  m.is_70b = (m.arch == "llama" || m.arch == "qwen2") && m.n_layer == 80 && heads != kv_heads;
  for (const GgufTensorInfo& t : file.tensors()) {
    m.has_output = m.has_output || t.name == "output.weight";
    m.n_attention_wv += category_of(t.name) == Category::attn_v;
  }
  return m;
}

bool mix_allows(const GgufTensorInfo& t) {
  const std::string& n = t.name;
  const bool weight = n.size() >= 6 && n.compare(n.size() - 6, 6, "weight") == 0;
  return (t.ne.size() == 2 || t.ne.size() == 3) && weight && !has(n, "_norm.weight") &&
         !has(n, "ffn_gate_inp.weight") && n != "position_embd.weight" && n != "token_types.weight";
}

GgmlType quant_fallback_type(GgmlType type, int64_t ncols) {
  GgmlType to = type;
  switch (type) {
    case GgmlType::Q2_K: case GgmlType::Q3_K: to = GgmlType::Q4_0; break;
    case GgmlType::Q6_K: to = GgmlType::Q8_0; break;
    case GgmlType::IQ4_XS: to = GgmlType::IQ4_NL; break;
    case GgmlType::Q4_K: to = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: to = GgmlType::Q5_1; break;
    default: break;
  }
  return row_fits(to, ncols) ? to : GgmlType::F16;  // llama.cpp's "unusual shape" case
}

std::vector<GgmlType> quant_mix_types(const GgufFile& file, const QuantMix& mix, std::vector<std::string>* fallbacks) {
  const MixModel m = MixModel::of(file);
  const std::vector<GgufTensorInfo>& tensors = file.tensors();
  std::vector<GgmlType> types(tensors.size());
  Counters counters;
  for (const size_t i : count_order(tensors)) {
    const GgufTensorInfo& t = tensors[i];
    types[i] = t.type;
    if (!mix_allows(t)) continue;
    const GgmlType wanted = rule_type(mix, m, t, counters);
    types[i] = wanted;
    if (row_fits(wanted, t.ne[0])) continue;
    types[i] = quant_fallback_type(wanted, t.ne[0]);
    if (fallbacks != nullptr) fallbacks->push_back(fmt::format("{}: {} -> {}", t.name, name_of(wanted), name_of(types[i])));
  }
  return types;
}

}  // namespace tsr::quant
