// `tessera quantize IN OUT TYPE`: converts every 2-D weight whose rows fill whole blocks of
// TYPE (like `llama-quantize --pure`: one type for all of them), keeps the rest as stored,
// copies the metadata and says which tensors it converted.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "apps/tessera/commands.h"
#include "base/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"
#include "core/quant/quant.h"

namespace tsr::app {

namespace {

struct QuantizeFlags {
  std::string in, out, type;
  bool allow_requantize = false;
};

std::string type_name(GgmlType t) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(t));
  return traits ? traits->name : fmt::format("type {}", static_cast<uint32_t>(t));
}

// Empty when `t` converts to `to`, else why it keeps its type.
std::string keep_reason(const GgufTensorInfo& t, GgmlType to) {
  if (t.ne.size() != 2) return fmt::format("{}-D, not a weight matrix", t.ne.size());
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
void check_requantize(const GgufFile& in, GgmlType to, bool allowed) {
  if (allowed || is_float(to)) return;
  for (const GgufTensorInfo& t : in.tensors()) {
    if (!is_float(t.type) && keep_reason(t, to).empty()) {
      throw Error(fmt::format("{} is already quantized ({} is {}); converting it to {} compounds the rounding: "
                              "quantize the F32/F16/BF16 original, or pass --allow-requantize",
                              in.path(), t.name, type_name(t.type), type_name(to)));
    }
  }
}

// Re-encodes a chunk of rows at a time, so only the output tensor is held whole.
std::vector<uint8_t> convert(const GgufFile& in, const GgufTensorInfo& t, GgmlType to) {
  const int64_t row = t.ne[0], rows = t.ne[1];
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{1} << 20) / row);
  const uint8_t* src = in.tensor_data(t);
  std::vector<uint8_t> out(quant::byte_size(to, t.nelements));
  std::vector<float> x;
  for (int64_t r = 0; r < rows; r += chunk_rows) {
    const int64_t n = std::min(chunk_rows, rows - r) * row;
    x.resize(static_cast<size_t>(n));
    quant::dequantize(t.type, {src + quant::byte_size(t.type, r * row), quant::byte_size(t.type, n)}, x);
    quant::quantize(to, x, std::span(out).subspan(quant::byte_size(to, r * row), quant::byte_size(to, n)));
  }
  return out;
}

// All metadata in order, general.file_type set to `to`'s; the alignment goes through
// set_alignment(), which owns that key.
void copy_metadata(const GgufFile& in, GgufWriter& w, GgmlType to) {
  w.set_alignment(static_cast<uint32_t>(in.alignment()));
  bool file_type = false;
  for (const GgufKv& kv : in.metadata()) {
    if (kv.key == "general.alignment") continue;
    if (kv.key == "general.file_type") {
      w.add_u32(kv.key, quant::llama_file_type(to));
      file_type = true;
      continue;
    }
    w.add(kv.key, kv.value);
  }
  if (!file_type) w.add_u32("general.file_type", quant::llama_file_type(to));
  const bool quantized = to == GgmlType::Q8_0 || to == GgmlType::Q4_0;
  if (quantized && in.find("general.quantization_version") == nullptr) {
    w.add_u32("general.quantization_version", 2);
  }
}

// A bar on stderr, redrawn in place on a terminal and printed at each 10% elsewhere.
class ProgressBar {
 public:
  explicit ProgressBar(uint64_t total) : total_(std::max<uint64_t>(total, 1)), tty_(isatty(STDERR_FILENO) != 0) {}
  void update(uint64_t done) {
    const int percent = static_cast<int>(done * 100 / total_);
    if (percent == shown_ || (!tty_ && percent / 10 == shown_ / 10)) return;
    shown_ = percent;
    const std::string bar(static_cast<size_t>(percent / 2), '#');
    std::fprintf(stderr, "%s[%-50s] %3d%%%s", tty_ ? "\r" : "", bar.c_str(), percent, tty_ ? "" : "\n");
    if (tty_ && percent == 100) std::fputc('\n', stderr);
  }

 private:
  uint64_t total_;
  bool tty_;
  int shown_ = -1;
};

void report(const std::vector<std::string>& converted, const std::vector<std::string>& kept, GgmlType to) {
  spdlog::info("converted {} tensors to {}: {}", converted.size(), type_name(to), fmt::join(converted, ", "));
  spdlog::info("kept {} tensors as stored{}", kept.size(), kept.empty() ? "" : ":");
  for (const std::string& k : kept) spdlog::info("  {}", k);
}

int quantize_file(const QuantizeFlags& f) {
  const std::optional<GgmlType> to = quant::parse_type(f.type);
  if (!to) throw Error("unknown type '" + f.type + "' (f32, f16, bf16, q8_0, q4_0)");
  const auto in = GgufFile::open(f.in);
  check_requantize(*in, *to, f.allow_requantize);
  GgufWriter w;
  copy_metadata(*in, w, *to);
  uint64_t total = 0, done = 0;
  for (const GgufTensorInfo& t : in->tensors()) total += t.nbytes;
  ProgressBar bar(total);
  std::vector<std::string> converted, kept;
  for (const GgufTensorInfo& t : in->tensors()) {
    const std::string why = keep_reason(t, *to);
    if (why.empty()) {
      w.add_tensor(t.name, *to, t.ne, convert(*in, t, *to));
      converted.push_back(t.name);
    } else {
      w.add_tensor(t.name, t.type, t.ne, {in->tensor_data(t), t.nbytes});
      kept.push_back(fmt::format("{} ({}: {})", t.name, type_name(t.type), why));
    }
    bar.update(done += t.nbytes);
  }
  w.write(f.out);
  report(converted, kept, *to);
  spdlog::info("wrote {}: {} -> {} bytes", f.out, in->file_size(), std::filesystem::file_size(f.out));
  return 0;
}

}  // namespace

std::function<int()> register_quantize(CLI::App& app) {
  auto f = std::make_shared<QuantizeFlags>();
  app.add_option("in", f->in, "GGUF file to read")->required();
  app.add_option("out", f->out, "GGUF file to write")->required();
  app.add_option("type", f->type, "f32, f16, bf16, q8_0 or q4_0")->required();
  app.add_flag("--allow-requantize", f->allow_requantize, "convert tensors that are already quantized too");
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
