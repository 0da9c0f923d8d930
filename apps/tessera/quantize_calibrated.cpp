#include "apps/tessera/quantize_calibrated.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <thread>

#include "apps/tessera/progress_bar.h"
#include "apps/tessera/text_file.h"
#include "base/error.h"
#include "core/model/llama_model.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/quant/awq.h"
#include "core/quant/awq_clip.h"
#include "core/quant/calibration.h"
#include "core/quant/gptq.h"
#include "core/quant/layer_error.h"
#include "core/quant/smoothquant.h"
#include "core/quant/quant.h"
#include "core/tokenizer/tokenizer.h"
#include "quant_formats/int4_g128.h"

namespace tsr::app {

namespace {

using quant::CalibrationStats;

bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

}  // namespace

CalibrationStats calibration_stats(const GgufFile& in, const CalibratedFlags& f, bool hessian, int32_t* chunk_tokens) {
  std::shared_ptr<const GgufFile> gguf = GgufFile::open(in.path());
  const int32_t threads = f.threads > 0 ? f.threads : int32_t(std::max(1u, std::thread::hardware_concurrency()));
  auto backend = Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, "cpu", plugin_search_dirs("")), 0, threads);
  const auto model = LlamaModel::load(gguf, *backend, {}, nullptr, /*pack_weights=*/false);
  const auto tokenizer = Tokenizer::create(vocab_from_gguf(*gguf));
  const std::vector<int32_t> tokens = tokenizer->encode(read_text_file(f.calib, "--calib"), false, false);
  const int32_t ctx = std::min(f.ctx, model->hparams().n_ctx_train);
  if (chunk_tokens) *chunk_tokens = ctx;
  spdlog::info("calibration: {} tokens of {} in chunks of {}", tokens.size(), f.calib, ctx);
  ProgressBar bar(1, "calibration");
  quant::CalibrationStats stats = quant::calibrate(
      *gguf, *model, *backend, tokens, tokenizer->vocab().bos_id, {ctx, f.chunks, hessian},
      [&bar](int64_t done, int64_t total) { bar.update(uint64_t(done * 100 / total)); });
  bar.update(100);
  spdlog::info("calibration: statistics of {} weights' inputs", stats.size());
  return stats;
}

namespace {

std::vector<float> floats(const GgufFile& in, const GgufTensorInfo& t) {
  return quant::dequantize(t.type, {in.tensor_data(t), t.nbytes}, t.nelements);
}

// "blk.12.attn_q.weight" -> 12; -1 for tensors outside the layers.
int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

void int4_g128_round_trip(std::span<const float> w, int64_t rows, int64_t cols, std::span<float> out) {
  std::vector<quant::GroupInt4> g(size_t(cols / quant::kGroupInt4));
  for (int64_t r = 0; r < rows; ++r) {
    quant::quantize_row_int4_g128(w.data() + r * cols, g.data(), cols);
    quant::dequantize_row_int4_g128(g.data(), out.data() + r * cols, cols);
  }
}

// GPTQ's grid and output type for tensor i, or nullopt where it rounds to nearest.
struct GptqTarget {
  quant::BlockGrid grid;
  GgmlType out;
};
std::optional<GptqTarget> gptq_target(const GgufTensorInfo& t, GgmlType planned, bool int4_g128) {
  if (t.ne.size() != 2) return std::nullopt;
  // int4_g128 has no GGUF type: the values, on its grid, go out in a float type for the
  // load-time scheme to quantize again (and recover GPTQ's codes).
  if (int4_g128) {
    if (t.ne[0] % quant::kGroupInt4 != 0) return std::nullopt;
    return GptqTarget{quant::BlockGrid::int4_g128(), is_float(t.type) ? t.type : GgmlType::F16};
  }
  if (planned == t.type) return std::nullopt;
  const std::optional<quant::BlockGrid> grid = quant::BlockGrid::of(planned);
  if (!grid) return std::nullopt;  // the plan's planned fallbacks: round to nearest
  return GptqTarget{*grid, planned};
}

std::map<std::string, CalibratedTensor> run_gptq(const GgufFile& in, const std::vector<GgmlType>& types,
                                                 const CalibrationStats& stats, const CalibratedFlags& f, bool int4_g128) {
  std::map<std::string, CalibratedTensor> out;
  // Q, K and V share one factor; a layer's are dropped when the next layer starts (each as
  // large as its input's Hessian).
  std::map<const quant::InputStats*, quant::GptqFactor> factors;
  double err_gptq = 0, err_rtn = 0, layer_gptq = 0, layer_rtn = 0;
  int layer = -1;
  auto end_layer = [&]() {
    if (layer < 0 || layer_rtn == 0) return;
    spdlog::info("gptq: blk.{}: output error {:.3g} of round-to-nearest's", layer, layer_gptq / layer_rtn);
    layer_gptq = layer_rtn = 0;
  };
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const GgufTensorInfo& t = in.tensors()[i];
    const auto st = stats.find(t.name);
    const std::optional<GptqTarget> target = st == stats.end() ? std::nullopt : gptq_target(t, types[i], int4_g128);
    if (!target) continue;
    if (layer_of(t.name) != layer) {
      end_layer();
      layer = layer_of(t.name);
      factors.clear();
    }
    const quant::InputStats& s = *st->second;
    auto fit = factors.find(&s);
    if (fit == factors.end()) fit = factors.emplace(&s, quant::gptq_factor(s.hessian, s.cols, f.damp, f.act_order)).first;
    const std::vector<float> w = floats(in, t);
    std::vector<float> q;
    std::vector<uint8_t> bytes = quant::gptq_quantize(target->grid, w, t.ne[1], t.ne[0], fit->second, &q);
    std::vector<float> rtn(w.size());
    if (int4_g128) {
      int4_g128_round_trip(w, t.ne[1], t.ne[0], rtn);
      bytes = quant::quantize(target->out, q);
    } else {
      rtn = quant::dequantize(types[i], quant::quantize(types[i], w), t.nelements);
    }
    const double e = quant::layer_output_error(w, q, t.ne[1], t.ne[0], s.hessian);
    const double r = quant::layer_output_error(w, rtn, t.ne[1], t.ne[0], s.hessian);
    err_gptq += e, err_rtn += r, layer_gptq += e, layer_rtn += r;
    out[t.name] = {target->out, std::move(bytes)};
  }
  end_layer();
  if (err_rtn > 0) {
    spdlog::info("gptq: {} weights; output error on the calibration text {:.3g} of round-to-nearest's", out.size(),
                 err_gptq / err_rtn);
  }
  return out;
}

quant::RoundTrip ggml_round_trip(GgmlType type) {
  return [type](std::span<const float> w, int64_t rows, int64_t cols, std::span<float> out) {
    quant::dequantize(type, quant::quantize(type, w), out.first(size_t(rows * cols)));
  };
}


// The tensors a channel scaling reads or scales (channel_scales.h), as f32, and each one's
// index in the file; `n_layer` gets the layer count they span.
quant::FloatTensors scalable_tensors(const GgufFile& in, std::map<std::string, size_t>& index, int& n_layer) {
  quant::FloatTensors t;
  n_layer = 0;
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const GgufTensorInfo& info = in.tensors()[i];
    if (!quant::scale_group_tensor(info.name) || !quant::is_supported(info.type) || info.ne.size() > 2) continue;
    t[info.name] = {info.ne.size() == 2 ? info.ne[1] : 1, info.ne[0], floats(in, info)};
    index[info.name] = i;
    n_layer = std::max(n_layer, layer_of(info.name) + 1);
  }
  return t;
}

// A tensor in the plan's type (the stored one where a scaling only rescales it).
void write_tensor(const std::string& name, const quant::FloatTensors& t, const std::map<std::string, size_t>& index,
                  const std::vector<GgmlType>& types, std::map<std::string, CalibratedTensor>& out) {
  const GgmlType to = types[index.at(name)];
  out[name] = {to, quant::quantize(to, t.at(name).data)};
}

// The tensors a scaling changed; a matrix's bias goes with its rows.
void write_scaled(const quant::ScaleGroup& g, const quant::FloatTensors& t, const std::map<std::string, size_t>& index,
                  const std::vector<GgmlType>& types, std::map<std::string, CalibratedTensor>& out) {
  std::vector<std::string> changed = g.weights;
  changed.push_back(g.down);
  if (!g.bias.empty() && t.count(g.bias)) changed.push_back(g.bias);
  for (const std::string& name : changed) write_tensor(name, t, index, types, out);
}

// The block a format fits its grid to, for clipping: 0 where clipping does not apply (the
// K-quants' 256-blocks fit their sub-block scales by a weighted search of their own, and a
// 256-wide block's Hessian per candidate costs too much).
int64_t clip_block(const GgufTensorInfo& info, GgmlType to, bool int4_g128) {
  if (int4_g128) return info.ne[0] % quant::kGroupInt4 == 0 ? quant::kGroupInt4 : 0;
  if (to == info.type || to == GgmlType::F32 || to == GgmlType::F16 || to == GgmlType::BF16) return 0;
  const int64_t block = ggml_type_traits(uint32_t(to))->block_elems;
  return block <= 128 && info.ne[0] % block == 0 ? block : 0;
}

// AWQ's clipping of every calibrated matrix but the attention's queries and keys (whose
// errors the softmax amplifies; the reference implementation skips them too), after the
// scales: returns the names it changed.
std::vector<std::string> awq_clip_all(const GgufFile& in, quant::FloatTensors& t, const std::map<std::string, size_t>& index,
                                      const std::vector<GgmlType>& types, const CalibrationStats& stats,
                                      const std::vector<quant::AwqGroup>& groups, bool int4_g128,
                                      const std::function<quant::RoundTrip(const std::string&)>& round_trip_for) {
  std::map<std::string, const std::vector<float>*> scales;
  for (const quant::AwqGroup& g : groups) {
    for (const std::string& w : g.group.weights) scales[w] = &g.search.scales;
  }
  std::vector<std::string> changed;
  double err = 0, rtn = 0;
  int64_t clipped = 0;
  for (auto& [name, ft] : t) {
    const auto st = stats.find(name);
    if (st == stats.end() || ft.rows <= 1 || name.find("attn_q") != std::string::npos ||
        name.find("attn_k") != std::string::npos) {
      continue;
    }
    const size_t i = index.at(name);
    const int64_t block = clip_block(in.tensors()[i], types[i], int4_g128);
    const quant::RoundTrip rt = block > 0 ? round_trip_for(name) : nullptr;
    if (!rt || st->second->cols != ft.cols) continue;
    const auto s = scales.find(name);
    const quant::ClipResult r = quant::awq_clip(ft.data, ft.rows, ft.cols, rt, st->second->hessian,
                                                s == scales.end() ? std::span<const float>{} : std::span<const float>(*s->second),
                                                {block, 20, 0.5});
    err += r.error, rtn += r.rtn_error, clipped += r.clipped;
    if (r.clipped > 0) changed.push_back(name);
  }
  spdlog::info("awq: clipping: {} blocks of {} matrices clamped; their output error {:.3g} of unclipped", clipped,
               changed.size(), rtn > 0 ? err / rtn : 1.0);
  return changed;
}

std::map<std::string, CalibratedTensor> run_awq(const GgufFile& in, const std::vector<GgmlType>& types,
                                                const CalibrationStats& stats, const CalibratedFlags& f,
                                                bool int4_g128) {
  std::map<std::string, size_t> index;
  int n_layer = 0;
  quant::FloatTensors t = scalable_tensors(in, index, n_layer);
  auto round_trip_for = [&](const std::string& name) -> quant::RoundTrip {
    const size_t i = index.at(name);
    const GgufTensorInfo& info = in.tensors()[i];
    if (int4_g128) return info.ne[0] % quant::kGroupInt4 == 0 ? quant::RoundTrip(int4_g128_round_trip) : nullptr;
    return types[i] != info.type ? ggml_round_trip(types[i]) : nullptr;
  };
  ProgressBar bar(uint64_t(std::max(n_layer, 1)), "awq");
  const std::vector<quant::AwqGroup> groups =
      quant::awq_apply(t, stats, n_layer, round_trip_for, f.awq_grid, [&bar](int done, int) { bar.update(uint64_t(done)); });
  double err = 0, rtn = 0;
  std::map<std::string, CalibratedTensor> out;
  for (const quant::AwqGroup& g : groups) {
    err += g.search.error, rtn += g.search.rtn_error;
    spdlog::debug("awq: {} -> {}: alpha {:.2f}, output error {:.3g} of round-to-nearest's", g.group.down,
                  fmt::join(g.group.weights, ", "), g.search.alpha, g.search.rtn_error > 0 ? g.search.error / g.search.rtn_error : 1.0);
  }
  spdlog::info("awq: {} groups scaled; output error on the calibration text {:.3g} of round-to-nearest's", groups.size(),
               rtn > 0 ? err / rtn : 1.0);
  const std::vector<std::string> clipped =
      f.awq_clip ? awq_clip_all(in, t, index, types, stats, groups, int4_g128, round_trip_for) : std::vector<std::string>{};
  for (const quant::AwqGroup& g : groups) write_scaled(g.group, t, index, types, out);
  for (const std::string& name : clipped) write_tensor(name, t, index, types, out);
  return out;
}

std::map<std::string, CalibratedTensor> run_smoothquant(const GgufFile& in, const std::vector<GgmlType>& types,
                                                        const CalibrationStats& stats, const CalibratedFlags& f) {
  std::map<std::string, size_t> index;
  int n_layer = 0;
  quant::FloatTensors t = scalable_tensors(in, index, n_layer);
  const std::vector<quant::SmoothGroup> groups = quant::smooth_apply(t, stats, n_layer, f.smooth_alpha);
  std::map<std::string, CalibratedTensor> out;
  for (const quant::SmoothGroup& g : groups) write_scaled(g.group, t, index, types, out);
  spdlog::info("smoothquant: {} inputs smoothed (alpha {}); run the model with [quant] scheme = \"w8a8_smooth\"",
               groups.size(), f.smooth_alpha);
  return out;
}

}  // namespace

std::map<std::string, CalibratedTensor> quantize_calibrated(const GgufFile& in, const std::vector<GgmlType>& types,
                                                            const CalibratedFlags& f, bool int4_g128) {
  if (f.method != "gptq" && f.method != "awq" && f.method != "smoothquant") {
    throw Error("--method must be rtn, gptq, awq or smoothquant, not '" + f.method + "'");
  }
  if (f.calib.empty()) throw Error("--method " + f.method + " needs a calibration text: --calib FILE");
  if (f.method == "gptq" && !int4_g128) {
    for (size_t i = 0; i < types.size(); ++i) {
      const GgmlType to = types[i];
      if (to != in.tensors()[i].type && !is_float(to) && !quant::BlockGrid::of(to)) {
        throw Error(fmt::format("--method gptq writes q4_0, q4_1, q5_0, q5_1 or q8_0; {} would be {}", in.tensors()[i].name,
                                ggml_type_traits(uint32_t(to))->name));
      }
    }
  }
  const CalibrationStats stats = calibration_stats(in, f, /*hessian=*/f.method != "smoothquant");
  if (f.method == "smoothquant") return run_smoothquant(in, types, stats, f);
  return f.method == "gptq" ? run_gptq(in, types, stats, f, int4_g128) : run_awq(in, types, stats, f, int4_g128);
}

}  // namespace tsr::app
