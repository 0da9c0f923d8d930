// `tessera quantize IN OUT TYPE`: a tensor type converts every weight matrix (and MoE expert
// stack) whose rows fill whole blocks of TYPE (like `llama-quantize --pure`: one type for all
// of them) and keeps the rest as stored; a mix (q4_k_m, q5_k_m, q6_k) gives each tensor the
// type llama-quantize's file type would (core/quant/quant_mix.h). Copies the metadata and says what it converted.
// `--method gptq|awq --calib TEXT` calibrates on a text first (quantize_calibrated.h), as
// TYPE w8a8_smooth (SmoothQuant) does. `--imatrix FILE` quantizes each weight under its
// importance matrix entry (llama.cpp's file, core/quant/imatrix.h), as llama-quantize does.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>

#include "apps/tessera/commands.h"
#include "apps/tessera/progress_bar.h"
#include "apps/tessera/quantize_calibrated.h"
#include "base/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"
#include "core/quant/imatrix.h"
#include "core/quant/quant.h"
#include "core/quant/quant_mix.h"

namespace tsr::app {

namespace {

struct QuantizeFlags {
  std::string in, out, type, imatrix;
  bool allow_requantize = false;
  CalibratedFlags calibrated;
};

std::string type_name(GgmlType t) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(t));
  return traits ? traits->name : fmt::format("type {}", static_cast<uint32_t>(t));
}

// Empty when `t` converts to `to`, else why it keeps its type. The tensors converted are
// those llama-quantize --pure converts: weight matrices and MoE expert stacks, not norms,
// routers or position embeddings.
std::string keep_reason(const GgufTensorInfo& t, GgmlType to) {
  if (t.ne.size() != 2 && t.ne.size() != 3) return fmt::format("{}-D, not a weight matrix", t.ne.size());
  if (!quant::mix_allows(t)) return "a norm, router or position table, which llama-quantize keeps";
  if (t.type == to) return "already " + type_name(to);
  if (!quant::is_supported(t.type)) return type_name(t.type) + " cannot be read";
  if (!quant::row_fits(to, t.ne[0])) {
    return fmt::format("rows of {} do not fill {} blocks", t.ne[0], type_name(to));
  }
  return {};
}

bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

// As llama-quantize: quantizing a tensor that is already quantized compounds two rounding
// errors (a Q4_0 made from a Q8_0 is worse than one made from the F16 original), so it takes
// --allow-requantize. Dequantizing (to F32, F16, BF16) needs no flag.
void check_requantize(const GgufFile& in, const std::vector<GgmlType>& to, bool allowed) {
  if (allowed) return;
  for (size_t i = 0; i < to.size(); ++i) {
    const GgufTensorInfo& t = in.tensors()[i];
    if (!is_float(t.type) && !is_float(to[i]) && to[i] != t.type) {
      throw Error(fmt::format("{} is already quantized ({} is {}); converting it to {} compounds the rounding: "
                              "quantize the F32/F16/BF16 original, or pass --allow-requantize",
                              in.path(), t.name, type_name(t.type), type_name(to[i])));
    }
  }
}

// What each tensor becomes: `to` where it fits (keep_reason), or the mix's choice.
struct Plan {
  std::string name;  // as the user spelled it, for the log
  std::vector<GgmlType> types;
  std::vector<std::string> kept;  // "name (type: why)" of the tensors a type leaves as stored
  std::vector<std::string> fallbacks;
  uint32_t file_type = 0;
};

// Every tensor in its stored type: for the load-time int4_g128 scheme AWQ rescales weights
// and norms and GPTQ moves weights onto the scheme's grid, and SmoothQuant for w8a8_smooth
// rescales them, but rounding is left to the scheme.
Plan stored_plan(const GgufFile& in, const std::string& scheme) {
  const GgufValue* ft = in.find("general.file_type");
  Plan plan{scheme, {}, {}, {}, ft ? static_cast<uint32_t>(ft->u64) : 0};
  for (const GgufTensorInfo& t : in.tensors()) plan.types.push_back(t.type);
  return plan;
}

Plan plan_for(const GgufFile& in, const std::string& type) {
  Plan plan{type, {}, {}, {}, 0};
  if (const std::optional<quant::QuantMix> mix = quant::quant_mix_parse(type)) {
    plan.types = quant::quant_mix_types(in, *mix, &plan.fallbacks);
    plan.file_type = mix->file_type;
    return plan;
  }
  const std::optional<GgmlType> to = quant::parse_type(type);
  if (!to) {
    throw Error("unknown type '" + type +
                "' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs; mixes q4_k_m, q5_k_m, q6_k)");
  }
  for (const GgufTensorInfo& t : in.tensors()) {
    const std::string why = keep_reason(t, *to);
    plan.types.push_back(why.empty() ? *to : t.type);
    if (!why.empty()) plan.kept.push_back(fmt::format("{} ({}: {})", t.name, type_name(t.type), why));
  }
  plan.file_type = quant::llama_file_type(*to);
  return plan;
}

// Re-encodes chunks of rows on every core (rows are independent, so the bytes do not depend
// on the thread count), so only the output tensor is held whole. `imatrix` (can be NULL)
// holds ne[0] importances per expert (ne[2] of them). Errors (a NaN) are rethrown after the
// loop: none may leave an OpenMP region.
std::vector<uint8_t> convert(const GgufFile& in, const GgufTensorInfo& t, GgmlType to, const float* imatrix) {
  const int64_t row = t.ne[0], rows = t.nelements / row;
  const int64_t rows_per_expert = t.ne.size() > 1 ? t.ne[1] : rows;
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{1} << 18) / row);
  const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  const uint8_t* src = in.tensor_data(t);
  std::vector<uint8_t> out(quant::byte_size(to, t.nelements));
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < chunks; ++c) {
    try {
      // A chunk splits where an expert ends: each expert's rows take that expert's importances.
      for (int64_t r = c * chunk_rows, end = std::min(rows, r + chunk_rows); r < end;) {
        const int64_t expert = r / rows_per_expert;
        const int64_t n = (std::min(end, (expert + 1) * rows_per_expert) - r) * row;
        std::vector<float> x(static_cast<size_t>(n));
        quant::dequantize(t.type, {src + quant::byte_size(t.type, r * row), quant::byte_size(t.type, n)}, x);
        quant::quantize_rows(to, x, row, imatrix ? imatrix + expert * row : nullptr,
                             std::span(out).subspan(quant::byte_size(to, r * row), quant::byte_size(to, n)));
        r += n / row;
      }
    } catch (...) {
#pragma omp critical
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return out;
}

// The importances of each weight, by name (empty without --imatrix).
using Importances = std::map<std::string, std::vector<float>>;

Importances load_importances(const std::string& path) {
  if (path.empty()) return {};
  const quant::Imatrix m = quant::imatrix_read(path);
  spdlog::info("imatrix: {} entries from {} ({} format, {} chunks{}{})", m.entries.size(), path,
               m.legacy ? "legacy" : "GGUF", m.chunk_count, m.datasets.empty() ? "" : " of ", fmt::join(m.datasets, ", "));
  return quant::imatrix_importances(m);
}

// Tensor t's importances, as llama-quantize finds them: none when the matrix has no entry
// (it says so), an error when the entry's size is not ne[0] per expert, except for the token
// embedding (a lookup, which no matrix describes, and which llama-quantize skips).
const float* importances_for(const Importances& imp, const GgufTensorInfo& t) {
  if (imp.empty()) return nullptr;
  const auto it = imp.find(t.name);
  if (it == imp.end()) {
    spdlog::info("imatrix: no entry for {}: quantized without", t.name);
    return nullptr;
  }
  const int64_t expected = t.ne[0] * (t.ne.size() > 2 ? t.ne[2] : 1);
  if (int64_t(it->second.size()) == expected) return it->second.data();
  const std::string what = fmt::format("imatrix: the entry for {} has {} values, the tensor {} ({} columns x {} experts)",
                                       t.name, it->second.size(), expected, t.ne[0], expected / t.ne[0]);
  if (t.name == "token_embd.weight") {
    spdlog::warn("{}: quantized without", what);
    return nullptr;
  }
  throw Error(what);
}

// All metadata in order, general.file_type set to `to`'s; the alignment goes through
// set_alignment(), which owns that key.
void copy_metadata(const GgufFile& in, GgufWriter& w, const Plan& plan) {
  w.set_alignment(static_cast<uint32_t>(in.alignment()));
  bool file_type = false;
  for (const GgufKv& kv : in.metadata()) {
    if (kv.key == "general.alignment") continue;
    if (kv.key == "general.file_type") {
      w.add_u32(kv.key, plan.file_type);
      file_type = true;
      continue;
    }
    w.add(kv.key, kv.value);
  }
  if (!file_type) w.add_u32("general.file_type", plan.file_type);
  const bool quantized = std::any_of(plan.types.begin(), plan.types.end(), [](GgmlType t) { return !is_float(t); });
  if (quantized && in.find("general.quantization_version") == nullptr) {
    w.add_u32("general.quantization_version", 2);
  }
}

void report(const std::map<std::string, std::vector<std::string>>& converted, const Plan& plan) {
  for (const auto& [type, names] : converted) {
    spdlog::info("converted {} tensors to {}: {}", names.size(), type, fmt::join(names, ", "));
  }
  for (const std::string& f : plan.fallbacks) spdlog::info("fallback (rows do not fill a block): {}", f);
  spdlog::info("kept {} tensors as stored{}", plan.kept.size(), plan.kept.empty() ? "" : ":");
  for (const std::string& k : plan.kept) spdlog::info("  {}", k);
}

bool iequals(const std::string& a, const char* b) {
  return std::equal(a.begin(), a.end(), b, b + std::strlen(b), [](char x, char y) { return std::tolower(x) == y; });
}

// TYPE w8a8_smooth is SmoothQuant's (the method implied); --method smoothquant takes no other.
std::string method_for(const QuantizeFlags& f) {
  const std::string& m = f.calibrated.method;
  if (!iequals(f.type, "w8a8_smooth")) {
    if (m == "smoothquant") throw Error("--method smoothquant writes a model for the w8a8_smooth scheme: TYPE w8a8_smooth");
    return m;
  }
  if (m != "rtn" && m != "smoothquant") throw Error("w8a8_smooth is SmoothQuant's: --method " + m + " does not write it");
  return "smoothquant";
}

int quantize_file(QuantizeFlags f) {
  const auto in = GgufFile::open(f.in);
  const std::string method = f.calibrated.method = method_for(f);
  const bool int4 = iequals(f.type, "int4_g128");
  if (int4 && method != "awq" && method != "gptq") {
    throw Error("int4_g128 is a load-time scheme ([quant] scheme = \"int4_g128\"), not a GGUF tensor type: "
                "--method awq writes a model scaled for it and --method gptq one on its grid; rtn writes GGUF types "
                "(q4_0, q4_1, ...)");
  }
  if (method != "rtn" && method != "gptq" && method != "awq" && method != "smoothquant") {
    throw Error("--method must be rtn, gptq, awq or smoothquant, not '" + method + "'");
  }
  if (method == "rtn" && !f.calibrated.calib.empty()) throw Error("--calib is for --method gptq, awq or smoothquant");
  if (method != "rtn" && !f.imatrix.empty()) {
    throw Error("--imatrix weights round-to-nearest's quantizers (--method rtn); " + method + " calibrates with --calib");
  }
  const Importances importances = load_importances(f.imatrix);
  const Plan plan = int4 || method == "smoothquant" ? stored_plan(*in, f.type) : plan_for(*in, f.type);
  check_requantize(*in, plan.types, f.allow_requantize);
  const std::map<std::string, CalibratedTensor> calibrated =
      method == "rtn" ? std::map<std::string, CalibratedTensor>{} : quantize_calibrated(*in, plan.types, f.calibrated, int4);
  GgufWriter w;
  copy_metadata(*in, w, plan);
  uint64_t total = 0, done = 0;
  for (const GgufTensorInfo& t : in->tensors()) total += t.nbytes;
  ProgressBar bar(total);
  std::map<std::string, std::vector<std::string>> converted;
  for (size_t i = 0; i < in->tensors().size(); ++i) {
    const GgufTensorInfo& t = in->tensors()[i];
    const GgmlType to = plan.types[i];
    if (const auto c = calibrated.find(t.name); c != calibrated.end()) {
      w.add_tensor(t.name, c->second.type, t.ne, c->second.bytes);
      converted[c->second.type == t.type ? "their type, scaled by " + method : type_name(to) + " by " + method].push_back(t.name);
    } else if (to != t.type) {
      const float* imatrix = is_float(to) ? nullptr : importances_for(importances, t);
      w.add_tensor(t.name, to, t.ne, convert(*in, t, to, imatrix));
      converted[type_name(to) + (imatrix ? " with the importance matrix" : "")].push_back(t.name);
    } else {
      w.add_tensor(t.name, t.type, t.ne, {in->tensor_data(t), t.nbytes});
    }
    bar.update(done += t.nbytes);
  }
  w.write(f.out);
  report(converted, plan);
  spdlog::info("wrote {}: {} -> {} bytes", f.out, in->file_size(), std::filesystem::file_size(f.out));
  return 0;
}

}  // namespace

std::function<int()> register_quantize(CLI::App& app) {
  auto f = std::make_shared<QuantizeFlags>();
  app.add_option("in", f->in, "GGUF file to read")->required();
  app.add_option("out", f->out, "GGUF file to write")->required();
  app.add_option("type", f->type,
                 "a tensor type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs) "
                 "or a llama.cpp mix (q4_k_m, q5_k_m, q6_k)")->required();
  app.add_flag("--allow-requantize", f->allow_requantize, "convert tensors that are already quantized too");
  CalibratedFlags& c = f->calibrated;
  app.add_option("--method", c.method,
                 "rtn (round to nearest), gptq (error compensation; q4_0, q4_1, q5_0, q5_1, q8_0, or int4_g128 for the "
                 "load-time scheme) or awq "
                 "(activation-aware scales, then round to nearest; any type, or int4_g128 for the load-time scheme); "
                 "TYPE w8a8_smooth is smoothquant's")
      ->capture_default_str();
  app.add_option("--imatrix", f->imatrix,
                 "importance matrix (llama.cpp's GGUF or legacy .dat file; `tessera imatrix` writes one) weighting "
                 "round-to-nearest's errors");
  app.add_option("--calib", c.calib, "calibration text for gptq and awq");
  app.add_option("--calib-ctx", c.ctx, "tokens per calibration chunk (each opens with BOS)")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  app.add_option("--calib-chunks", c.chunks, "calibration chunks to run; 0: all the text fills")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  app.add_option("--damp", c.damp, "gptq: damping added to the Hessian's diagonal, as a fraction of its mean")->capture_default_str()->check(CLI::Range(1e-6, 1.0));
  app.add_flag("--act-order", c.act_order,
               "gptq: quantize columns by decreasing input energy (desc_act; the blocks' grids fitted before any "
               "update); the bytes stay in column order");
  app.add_option("--awq-grid", c.awq_grid, "awq: scale exponents tried per group")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_flag("--awq-clip,!--no-awq-clip", c.awq_clip,
               "awq: clamp each block's largest weights where that lowers the output error (formats with blocks of "
               "up to 128: q4_0 q4_1 q5_0 q5_1 q8_0 iq4_nl int4_g128)")->capture_default_str();
  app.add_option("--smooth-alpha", c.smooth_alpha, "smoothquant: how much of the activations' range moves into the weights")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  app.add_option("-t,--threads", c.threads, "threads for calibration; 0: every core")->capture_default_str()->check(CLI::Range(0, 1024));
  return [f]() -> int {
    try {
      return quantize_file(*f);
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      return 1;
    }
  };
}

}  // namespace tsr::app
