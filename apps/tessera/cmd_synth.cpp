// `tessera synth`: a llama GGUF with random weights (N(0, 0.02), norms 1) of a chosen
// shape and type, with the tokenizer of a donor file, for benchmarks and tests that need a
// model of a given size without downloading one.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numbers>

#include "apps/tessera/commands.h"
#include "base/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"
#include "core/quant/quant.h"

namespace tsr::app {

namespace {

// The Llama-2 vocabulary in ../shared beside the checkout this binary was built from (an
// absolute path fixed at build time, so that synth works from any folder); an install
// without that folder needs --donor.
constexpr const char* kDefaultDonor = TESSERA_DEFAULT_DONOR;
constexpr float kWeightStd = 0.02f;

struct Shape {
  int32_t dim = 0, layers = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, ctx = 2048;
};

struct SynthFlags {
  std::string out, preset = "tiny", type = "f32", donor;  // empty donor: kDefaultDonor
  Shape overrides;  // 0: the preset's value
  uint64_t seed = 42;
};

Shape preset_shape(const std::string& name) {
  if (name == "110m") return {768, 12, 12, 12, 2048, 32000};
  if (name == "1b") return {2048, 22, 32, 4, 5632, 32000};
  if (name == "tiny") return {64, 2, 4, 2, 128, 32000};
  throw Error("unknown preset '" + name + "' (110m, 1b or tiny)");
}

Shape resolve_shape(const SynthFlags& f) {
  Shape s = preset_shape(f.preset);
  const Shape& o = f.overrides;
  for (auto [field, value] : {std::pair{&s.dim, o.dim}, {&s.layers, o.layers}, {&s.heads, o.heads},
                              {&s.kv_heads, o.kv_heads}, {&s.ffn, o.ffn}, {&s.vocab, o.vocab}}) {
    if (value > 0) *field = value;
  }
  s.ctx = o.ctx;
  // --heads alone keeps multi-head attention rather than inheriting the preset's GQA ratio.
  if (o.heads > 0 && o.kv_heads == 0) s.kv_heads = s.heads;
  if (s.dim % s.heads != 0 || s.heads % s.kv_heads != 0 || (s.dim / s.heads) % 2 != 0) {
    throw Error("--dim must split into an even head size per head, and --heads into --kv-heads groups");
  }
  return s;
}

struct TensorPlan {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the row length (input features)
};

// The tensors of a llama model, in the order llama.cpp's converter writes them.
std::vector<TensorPlan> plan_tensors(const Shape& s) {
  const int64_t kv_dim = int64_t{s.dim} / s.heads * s.kv_heads;
  std::vector<TensorPlan> plan{{"token_embd.weight", {s.dim, s.vocab}}};
  for (int32_t i = 0; i < s.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    plan.push_back({p + "attn_norm.weight", {s.dim}});
    plan.push_back({p + "attn_q.weight", {s.dim, s.dim}});
    plan.push_back({p + "attn_k.weight", {s.dim, kv_dim}});
    plan.push_back({p + "attn_v.weight", {s.dim, kv_dim}});
    plan.push_back({p + "attn_output.weight", {s.dim, s.dim}});
    plan.push_back({p + "ffn_norm.weight", {s.dim}});
    plan.push_back({p + "ffn_gate.weight", {s.dim, s.ffn}});
    plan.push_back({p + "ffn_up.weight", {s.dim, s.ffn}});
    plan.push_back({p + "ffn_down.weight", {s.ffn, s.dim}});
  }
  plan.push_back({"output_norm.weight", {s.dim}});
  plan.push_back({"output.weight", {s.dim, s.vocab}});
  return plan;
}

// splitmix64 seeding a xoshiro256** stream: fast, and the same numbers on every platform
// (std::normal_distribution is implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix(seed);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  // Box-Muller, both outputs used.
  float normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(1.0 - uniform()));
    const double phi = 2.0 * std::numbers::pi * uniform();
    spare_ = static_cast<float>(r * std::sin(phi));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(phi));
  }

 private:
  static uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t next() {
    const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0], s_[3] ^= s_[1], s_[1] ^= s_[2], s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }
  uint64_t s_[4];
  float spare_ = 0;
  bool has_spare_ = false;
};

// Norm weights are 1 and stay F32 as in llama.cpp; matrices are random and take `type`
// where their rows fill whole blocks.
GgmlType tensor_type(const TensorPlan& t, GgmlType type) {
  return t.ne.size() == 2 && quant::row_fits(type, t.ne[0]) ? type : GgmlType::F32;
}

// Generates chunks of rows in parallel, each from its own stream (so the values do not
// depend on the thread count), and holds only the encoded tensor whole.
std::vector<uint8_t> make_tensor(const TensorPlan& t, GgmlType type, uint64_t seed) {
  const int64_t row = t.ne[0], n = t.ne.size() == 2 ? row * t.ne[1] : row;
  std::vector<uint8_t> out(quant::byte_size(type, n));
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 20) / row) * row;
  const int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < chunks; ++c) {
    Rng rng(seed * 0x100000001b3ull + static_cast<uint64_t>(c));
    const int64_t at = c * chunk;
    std::vector<float> x(static_cast<size_t>(std::min(chunk, n - at)));
    for (float& v : x) v = t.ne.size() == 1 ? 1.0f : kWeightStd * rng.normal();
    const uint64_t offset = quant::byte_size(type, at);
    quant::quantize(type, x, std::span(out).subspan(offset, quant::byte_size(type, static_cast<int64_t>(x.size()))));
  }
  return out;
}

void add_hparams(GgufWriter& w, const Shape& s, const std::string& preset, GgmlType type) {
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", "tessera-synth-" + preset);
  w.add_u32("general.file_type", quant::llama_file_type(type));
  if (type == GgmlType::Q8_0 || type == GgmlType::Q4_0) w.add_u32("general.quantization_version", 2);
  w.add_u32("llama.context_length", static_cast<uint32_t>(s.ctx));
  w.add_u32("llama.embedding_length", static_cast<uint32_t>(s.dim));
  w.add_u32("llama.block_count", static_cast<uint32_t>(s.layers));
  w.add_u32("llama.feed_forward_length", static_cast<uint32_t>(s.ffn));
  w.add_u32("llama.attention.head_count", static_cast<uint32_t>(s.heads));
  w.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  w.add_u32("llama.rope.dimension_count", static_cast<uint32_t>(s.dim / s.heads));
  w.add_f32("llama.rope.freq_base", 10000.0f);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_u32("llama.vocab_size", static_cast<uint32_t>(s.vocab));
}

// A self-contained SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens and
// "▁" (the space). Any text encodes (by byte fallback), so a model can be made without
// any donor file.
constexpr int32_t kByteVocabSize = 260;

void add_byte_tokenizer(GgufWriter& w, int32_t vocab) {
  if (vocab != kByteVocabSize) {
    throw Error(fmt::format("--donor bytes makes a {}-token vocabulary; pass --vocab {}", kByteVocabSize,
                            kByteVocabSize));
  }
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types{2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(6);
  }
  tokens.push_back("\xe2\x96\x81");
  types.push_back(1);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_f32_array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
}

// Copies every tokenizer.* key; the vocabulary must be as large as the embedding.
void add_tokenizer(GgufWriter& w, const std::string& donor_path, int32_t vocab) {
  if (donor_path == "bytes") {
    add_byte_tokenizer(w, vocab);
    return;
  }
  if (donor_path == kDefaultDonor && !std::filesystem::exists(donor_path)) {
    throw Error(std::string("no tokenizer donor: the default, ") + kDefaultDonor +
                    ", is not there; pass --donor FILE.gguf (a llama GGUF whose tokenizer is copied) or --donor bytes",
                TSR_STATUS_IO_ERROR);
  }
  if (!std::filesystem::exists(donor_path)) {
    throw Error("tokenizer donor " + donor_path + " not found; give a llama GGUF with --donor",
                TSR_STATUS_IO_ERROR);
  }
  const auto donor = GgufFile::open(donor_path);
  const GgufValue* tokens = donor->find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->array.size() != static_cast<size_t>(vocab)) {
    throw Error(fmt::format("donor {} has {} tokens, the model's vocabulary is {} (--vocab)", donor_path,
                            tokens ? tokens->array.size() : 0, vocab));
  }
  for (const GgufKv& kv : donor->metadata()) {
    if (kv.key.starts_with("tokenizer.")) w.add(kv.key, kv.value);
  }
}

// Logs once per 10% of the parameters.
class Progress {
 public:
  explicit Progress(int64_t total) : total_(total) {}
  void advance(int64_t n) {
    done_ += n;
    const int64_t decile = done_ * 10 / total_;
    if (decile > reported_) {
      reported_ = decile;
      spdlog::info("synth: {}% ({} of {} parameters)", decile * 10, done_, total_);
    }
  }

 private:
  int64_t total_, done_ = 0, reported_ = 0;
};

int synth(const SynthFlags& f) {
  const auto start = std::chrono::steady_clock::now();
  const std::optional<GgmlType> type = quant::parse_type(f.type);
  if (!type) throw Error("unknown --type '" + f.type + "' (f32, f16, bf16, q8_0, q4_0)");
  const Shape s = resolve_shape(f);
  const std::vector<TensorPlan> plan = plan_tensors(s);
  int64_t params = 0;
  for (const TensorPlan& t : plan) params += t.ne.size() == 2 ? t.ne[0] * t.ne[1] : t.ne[0];
  spdlog::info("synth: dim {}, {} layers, {} heads ({} kv), ffn {}, vocab {}, ctx {}: {} parameters as {}",
               s.dim, s.layers, s.heads, s.kv_heads, s.ffn, s.vocab, s.ctx, params, f.type);

  GgufWriter w;
  add_hparams(w, s, f.preset, *type);
  add_tokenizer(w, f.donor.empty() ? kDefaultDonor : f.donor, s.vocab);
  Progress progress(params);
  for (size_t i = 0; i < plan.size(); ++i) {
    const TensorPlan& t = plan[i];
    const GgmlType tt = tensor_type(t, *type);
    w.add_tensor(t.name, tt, t.ne, make_tensor(t, tt, f.seed * 0x100000001b3ull + i));
    progress.advance(t.ne.size() == 2 ? t.ne[0] * t.ne[1] : t.ne[0]);
  }
  w.write(f.out);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("synth: wrote {} ({} bytes) in {:.1f} s", f.out, std::filesystem::file_size(f.out), secs);
  return 0;
}

}  // namespace

std::function<int()> register_synth(CLI::App& app) {
  auto f = std::make_shared<SynthFlags>();
  Shape& o = f->overrides;
  app.add_option("out", f->out, "GGUF file to write")->required();
  app.add_option("--preset", f->preset, "110m, 1b or tiny")->capture_default_str();
  app.add_option("--dim", o.dim, "embedding width")->check(CLI::PositiveNumber);
  app.add_option("--layers", o.layers, "transformer blocks")->check(CLI::PositiveNumber);
  app.add_option("--heads", o.heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--kv-heads", o.kv_heads, "key/value heads (GQA)")->check(CLI::PositiveNumber);
  app.add_option("--ffn", o.ffn, "feed-forward width")->check(CLI::PositiveNumber);
  app.add_option("--vocab", o.vocab, "vocabulary size (must match the donor's)")->check(CLI::PositiveNumber);
  app.add_option("--ctx", o.ctx, "training context length")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--type", f->type, "f32, f16, bf16, q8_0 or q4_0")->capture_default_str();
  app.add_option("--donor", f->donor,
                 "GGUF file whose tokenizer.* metadata is copied, or \"bytes\" for a built-in "
                 "260-token byte vocabulary (with --vocab 260); default: " + std::string(kDefaultDonor));
  app.add_option("--seed", f->seed, "random seed")->capture_default_str();
  return [f]() -> int {
    try {
      return synth(*f);
    } catch (const Error& e) {
      spdlog::error("{}", e.what());
      return 1;
    }
  };
}

}  // namespace tsr::app
