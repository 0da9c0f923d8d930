// `tessera synth`: a GGUF with random weights of a chosen architecture, shape and type,
// with the tokenizer of a donor, for benchmarks and tests that need a model of a given
// size and layout without downloading one. What each architecture holds is in
// synth/synth_arch.cpp, and how the weights are scaled.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>

#include "apps/tessera/commands.h"
#include "apps/tessera/synth/synth_arch.h"
#include "apps/tessera/synth/synth_donor.h"
#include "apps/tessera/synth/synth_rng.h"
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

struct SynthFlags {
  std::string out, preset = "tiny", type = "f32", donor;  // empty donor: kDefaultDonor
  std::string expert_type;  // empty: type
  SynthShape overrides;  // 0: the preset's value
  uint64_t seed = 42;
};

// Llama shapes: TinyLlama 1.1B, a 110M model and a tiny one for tests.
SynthShape preset_shape(const std::string& name) {
  SynthShape s;
  if (name == "110m") s.dim = 768, s.layers = 12, s.heads = 12, s.kv_heads = 12, s.ffn = 2048;
  else if (name == "1b") s.dim = 2048, s.layers = 22, s.heads = 32, s.kv_heads = 4, s.ffn = 5632;
  else if (name == "tiny") s.dim = 64, s.layers = 2, s.heads = 4, s.kv_heads = 2, s.ffn = 128;
  else throw Error("unknown preset '" + name + "' (110m, 1b or tiny)");
  return s;
}

SynthShape resolve_shape(const SynthFlags& f) {
  SynthShape s = preset_shape(f.preset);
  const SynthShape& o = f.overrides;
  for (auto [field, value] : {std::pair{&s.dim, o.dim}, {&s.layers, o.layers}, {&s.heads, o.heads},
                              {&s.kv_heads, o.kv_heads}, {&s.ffn, o.ffn}}) {
    if (value > 0) *field = value;
  }
  // --heads alone keeps multi-head attention rather than inheriting the preset's GQA ratio.
  if (o.heads > 0 && o.kv_heads == 0) s.kv_heads = s.heads;
  s.arch = o.arch, s.head_dim = o.head_dim, s.vocab = o.vocab, s.ctx = o.ctx, s.rope_base = o.rope_base;
  s.tied = o.tied, s.rope_scaling = o.rope_scaling, s.rope_scale = o.rope_scale, s.sliding_window = o.sliding_window;
  s.rope_orig_ctx = o.rope_orig_ctx, s.pooling = o.pooling;
  s.experts = o.experts, s.experts_used = o.experts_used, s.expert_ffn = o.expert_ffn;
  s.outlier_dims = o.outlier_dims, s.outlier_gain = o.outlier_gain;
  s.q_lora = o.q_lora, s.kv_lora = o.kv_lora, s.rope_dim = o.rope_dim, s.value_dim = o.value_dim;
  s.shared_experts = o.shared_experts, s.dense_layers = o.dense_layers, s.gating = o.gating;
  s.expert_groups = o.expert_groups, s.expert_groups_used = o.expert_groups_used;
  return synth_resolve(s);
}

// Norm weights are 1 and stay F32 as in llama.cpp, and so do biases (gpt-oss's experts'
// are 2-D) and MoE routers (llama.cpp's quantize keeps ffn_gate_inp); matrices take `type`
// and expert stacks `expert_type` where their rows fill whole blocks.
GgmlType tensor_type(const TensorPlan& t, GgmlType type, GgmlType expert_type) {
  const bool router = t.name.find("ffn_gate_inp") != std::string::npos;
  const bool bias = t.name.ends_with(".bias");
  const GgmlType want = t.ne.size() == 3 ? expert_type : type;
  return t.ne.size() >= 2 && !router && !bias && quant::row_fits(want, t.ne[0]) ? want : GgmlType::F32;
}

int64_t elements(const TensorPlan& t) {
  int64_t n = 1;
  for (const int64_t d : t.ne) n *= d;
  return n;
}

// Generates chunks of rows in parallel, each from its own stream (so the values do not
// depend on the thread count), and holds only the encoded tensor whole.
std::vector<uint8_t> make_tensor(const TensorPlan& t, GgmlType type, uint64_t seed) {
  const int64_t row = t.ne[0], n = elements(t);
  std::vector<uint8_t> out(quant::byte_size(type, n));
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 20) / row) * row;
  const int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < chunks; ++c) {
    SynthRng rng(seed * 0x100000001b3ull + static_cast<uint64_t>(c));
    const int64_t at = c * chunk;
    std::vector<float> x(static_cast<size_t>(std::min(chunk, n - at)));
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = !t.values.empty() ? t.values[size_t(at) + i] : t.stddev == 0 ? t.fill : t.stddev * rng.normal();
    }
    const uint64_t offset = quant::byte_size(type, at);
    quant::quantize(type, x, std::span(out).subspan(offset, quant::byte_size(type, static_cast<int64_t>(x.size()))));
  }
  return out;
}

void add_general(GgufWriter& w, const SynthFlags& f, GgmlType type, GgmlType expert_type) {
  w.add_string("general.name", "tessera-synth-" + f.preset);
  w.add_u32("general.file_type", quant::llama_file_type(expert_type == GgmlType::MXFP4 ? expert_type : type));
  if (type == GgmlType::Q8_0 || type == GgmlType::Q4_0) w.add_u32("general.quantization_version", 2);
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
  const std::optional<GgmlType> expert_type = f.expert_type.empty() ? type : quant::parse_type(f.expert_type);
  if (!expert_type) throw Error("unknown --expert-type '" + f.expert_type + "' (f32, q8_0, mxfp4, ...)");
  if (f.donor.empty() && !std::filesystem::exists(kDefaultDonor)) {
    throw Error(std::string("no tokenizer donor: the default, ") + kDefaultDonor +
                    ", is not there; pass --donor (a GGUF file, a tokenizer.json, or bytes)",
                TSR_STATUS_IO_ERROR);
  }
  Vocab vocab = synth_donor_vocab(f.donor.empty() ? kDefaultDonor : f.donor);
  synth_pad_vocab(vocab, f.overrides.vocab);
  SynthFlags resolved = f;
  resolved.overrides.vocab = static_cast<int32_t>(vocab.tokens.size());
  const SynthShape s = resolve_shape(resolved);
  const std::vector<TensorPlan> plan = synth_tensor_plan(s);
  int64_t params = 0;
  for (const TensorPlan& t : plan) params += elements(t);
  spdlog::info("synth: {} dim {}, {} layers, {} heads ({} kv) of {}, ffn {}, vocab {}, ctx {}{}{}: {} parameters as {}",
               s.arch, s.dim, s.layers, s.heads, s.kv_heads, s.head_dim, s.ffn, s.vocab, s.ctx,
               s.sliding_window > 0 ? fmt::format(", window {}", s.sliding_window) : "",
               s.experts > 0 ? fmt::format(", {} experts of {} ({} per token)", s.experts, s.expert_ffn, s.experts_used) : "",
               params, f.type);

  GgufWriter w;
  synth_add_hparams(w, s);
  add_general(w, f, *type, *expert_type);
  vocab_write_gguf(vocab, w);
  Progress progress(params);
  for (size_t i = 0; i < plan.size(); ++i) {
    const TensorPlan& t = plan[i];
    const GgmlType tt = tensor_type(t, *type, *expert_type);
    w.add_tensor(t.name, tt, t.ne, make_tensor(t, tt, f.seed * 0x100000001b3ull + i));
    progress.advance(elements(t));
  }
  w.write(f.out);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("synth: wrote {} ({} bytes) in {:.1f} s", f.out, std::filesystem::file_size(f.out), secs);
  return 0;
}

}  // namespace

std::function<int()> register_synth(CLI::App& app) {
  auto f = std::make_shared<SynthFlags>();
  SynthShape& o = f->overrides;
  std::string archs;
  for (std::string_view a : synth_archs()) archs += (archs.empty() ? "" : ", ") + std::string(a);
  app.add_option("out", f->out, "GGUF file to write")->required();
  app.add_option("--arch", o.arch, "architecture: " + archs)->capture_default_str();
  app.add_option("--preset", f->preset, "starting shape: 110m, 1b or tiny (flags below override it)")
      ->capture_default_str();
  app.add_option("--dim", o.dim, "embedding width")->check(CLI::PositiveNumber);
  app.add_option("--layers", o.layers, "transformer blocks")->check(CLI::PositiveNumber);
  app.add_option("--heads", o.heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--kv-heads", o.kv_heads, "key/value heads (GQA)")->check(CLI::PositiveNumber);
  app.add_option("--head-dim", o.head_dim, "head size (default --dim / --heads)")->check(CLI::PositiveNumber);
  app.add_option("--ffn", o.ffn, "feed-forward width")->check(CLI::PositiveNumber);
  app.add_option("--vocab", o.vocab, "embedding rows: the donor's vocabulary (default), padded with unused tokens when larger")
      ->check(CLI::PositiveNumber);
  app.add_option("--ctx", o.ctx, "training context length")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--rope-base", o.rope_base, "RoPE base (default: the architecture's, 1e4 llama, 1e6 qwen)")
      ->check(CLI::PositiveNumber);
  app.add_option("--rope-scaling", o.rope_scaling,
                 "RoPE scaling: none, linear (with --rope-scale), yarn (with --rope-scale and --rope-orig-ctx) or "
                 "longrope (phi3, with --rope-orig-ctx)")
      ->capture_default_str();
  app.add_option("--rope-orig-ctx", o.rope_orig_ctx,
                 "LongRoPE and YaRN: the context before extension to --ctx (Phi-3 128k: 4096; Qwen3 YaRN: 32768)")
      ->check(CLI::PositiveNumber);
  app.add_option("--rope-scale", o.rope_scale, "RoPE context scaling factor (gemma3 4B-27B: 8, global layers only)")
      ->check(CLI::PositiveNumber);
  app.add_option("--sliding-window", o.sliding_window,
                 "window of the local attention layers (gemma3, default 512; gpt-oss, 128; phi3 writes it, llama.cpp ignores it)")
      ->check(CLI::PositiveNumber);
  app.add_option("--experts", o.experts, "experts per MoE layer (qwen3moe and gpt-oss, default 8; llama: Mixtral's layout)")
      ->check(CLI::PositiveNumber);
  app.add_option("--experts-used", o.experts_used, "experts routed per token (default 2)")->check(CLI::PositiveNumber);
  app.add_option("--expert-ffn", o.expert_ffn, "feed-forward width of each expert (qwen3moe; default --ffn)")
      ->check(CLI::PositiveNumber);
  app.add_option("--q-lora-rank", o.q_lora, "deepseek2: the queries' low rank (attn_q_a, attn_q_b)")
      ->check(CLI::PositiveNumber);
  app.add_option("--kv-lora-rank", o.kv_lora, "deepseek2: the latent the cache holds")->check(CLI::PositiveNumber);
  app.add_option("--rope-dim", o.rope_dim, "deepseek2: RoPE dims of each head (of --head-dim) and of the shared key")
      ->check(CLI::PositiveNumber);
  app.add_option("--value-dim", o.value_dim, "deepseek2: each head's value size (default --head-dim - --rope-dim)")
      ->check(CLI::PositiveNumber);
  app.add_option("--shared-experts", o.shared_experts, "deepseek2: always-on experts beside the routed ones")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--dense-layers", o.dense_layers, "deepseek2: leading layers with a dense feed-forward (--ffn)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--expert-groups", o.expert_groups, "deepseek2: groups of experts for group-limited routing (V3: 8)")
      ->check(CLI::PositiveNumber);
  app.add_option("--expert-groups-used", o.expert_groups_used, "deepseek2: groups a token's experts come from (V3: 4)")
      ->check(CLI::PositiveNumber);
  app.add_option("--gating", o.gating,
                 "deepseek2: softmax (V2) or sigmoid (V3: with a selection bias, renormalized weights scaled by 2.5)");
  app.add_option("--pooling", o.pooling, "embedding pooling the file declares: none, mean, cls or last")
      ->capture_default_str();
  app.add_option("--outlier-dims", o.outlier_dims,
                 "hidden dimensions the input norms weigh by --outlier-gain (LLM.int8()'s outlier features)")
      ->check(CLI::PositiveNumber);
  app.add_option("--outlier-gain", o.outlier_gain, "the outlier dimensions' norm weight (e.g. 20)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--tied", o.tied, "no output.weight: the output head is the embedding (Qwen2.5 0.5B, Qwen3 0.6B-4B)");
  app.add_option("--type", f->type, "f32, f16, bf16, q8_0 or q4_0")->capture_default_str();
  app.add_option("--expert-type", f->expert_type,
                 "type of the MoE expert stacks (default --type; mxfp4: gpt-oss's as released)");
  app.add_option("--donor", f->donor,
                 "tokenizer source: a GGUF file, a Hugging Face tokenizer.json or its folder, or \"bytes\" "
                 "for a built-in 260-token byte vocabulary; default: " + std::string(kDefaultDonor));
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
