// `tessera synth`, `quantize`, `perplexity` and `bench -m` through the built binary:
// synthesized models load and generate in every type; quantized stories260K holds exactly
// the reference quantization of its F32 weights and, at Q8_0, still follows llama.cpp's
// greedy ids; the engine benchmark reports every figure with the machine's limits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/engine/engine.h"
#include "quant_formats/float_convert.h"
#include "quant_formats/int4_g128.h"
#include "base/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"
#include "core/model/llama_model.h"
#include "core/quant/imatrix.h"
#include "core/quant/quant.h"
#include "tests/common/npm_dir.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStories = "models/stories260K.gguf";
constexpr const char* kRefs = "models/reference/stories260K.ref.jsonl";
constexpr const char* kDonor = "models/llama-2-tiny-random.gguf";

// A directory of this process's files, removed at exit.
const fs::path& work_dir() {
  static const testing::ScratchDir dir("tessera_quantize_test");
  return dir.path();
}

// Runs the tessera binary; its log goes to a file beside the outputs.
int tessera(const std::string& args) {
  const std::string cmd = std::string(TESSERA_BIN_DIR) + "/tessera " + args + " 2>>" +
                          (work_dir() / "tessera.log").string();
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string synth(const std::string& type, uint64_t seed) {
  const fs::path out = work_dir() / ("tiny-" + type + "-" + std::to_string(seed) + ".gguf");
  const std::string args = "synth " + out.string() + " --preset tiny --type " + type + " --seed " +
                           std::to_string(seed) + " --donor " + testing::shared_path(kDonor);
  EXPECT_EQ(tessera(args), 0) << args;
  return out.string();
}

// stories260K converted to `type`, made once per process.
std::string quantized_stories(const std::string& type) {
  const fs::path out = work_dir() / ("stories260K-" + type + ".gguf");
  if (!fs::exists(out)) {
    EXPECT_EQ(tessera("quantize " + testing::shared_path(kStories) + " " + out.string() + " " + type), 0);
  }
  return out.string();
}

std::unique_ptr<Engine> load(const std::string& path) {
  Config c;
  c.model.path = path;
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.threads = 1;
  return Engine::create(c);
}

std::vector<int32_t> greedy(Engine& engine, std::vector<int32_t> prompt, int32_t n) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = n;
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  return engine.generate(std::move(p)).tokens;
}

std::span<const uint8_t> bytes_of(const GgufFile& f, const GgufTensorInfo& t) {
  return {f.tensor_data(t), t.nbytes};
}

// Dequantization written out from ggml's block definitions, independent of core/quant.
std::vector<float> dequantize_by_hand(GgmlType type, std::span<const uint8_t> b, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  const size_t block_bytes = type == GgmlType::Q8_0 ? 34 : 18;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* block = b.data() + static_cast<size_t>(i / 32) * block_bytes;
    const float d = f16_to_f32(static_cast<uint16_t>(block[0] | block[1] << 8));
    const int64_t j = i % 32;
    const int q = type == GgmlType::Q8_0 ? static_cast<int8_t>(block[2 + j])
                                         : (j < 16 ? block[2 + j] & 0x0f : block[2 + j - 16] >> 4) - 8;
    y[static_cast<size_t>(i)] = static_cast<float>(q) * d;
  }
  return y;
}

TEST(Synth, TinyLoadsAndGeneratesInEveryType) {
  TSR_REQUIRE_SHARED(kDonor);
  for (const std::string type : {"f32", "f16", "bf16", "q8_0", "q4_0"}) {
    SCOPED_TRACE(type);
    const std::string path = synth(type, 1);
    const auto file = GgufFile::open(path);
    EXPECT_EQ(file->find_tensor("blk.1.ffn_down.weight")->type, *quant::parse_type(type));
    EXPECT_EQ(file->find_tensor("blk.1.ffn_norm.weight")->type, GgmlType::F32);
    EXPECT_EQ(file->get_int("general.file_type"), int64_t{quant::llama_file_type(*quant::parse_type(type))});
    EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens")->size(), 32000u);
    auto engine = load(path);
    EXPECT_EQ(engine->hparams().n_vocab, 32000);
    EXPECT_EQ(engine->context_length(), 2048);
    EXPECT_EQ(greedy(*engine, engine->tokenize("Hello world"), 8).size(), 8u);
  }
}

// GGUF allows general.alignment 1 or 2, which can leave an F32 tensor at an address no
// kernel may read floats from: such a file is refused at load, naming the tensor, rather
// than read misaligned. (A 2-byte tensor ahead of the others shifts them by 2.)
TEST(Synth, MisalignedTensorIsRefusedAtLoad) {
  TSR_REQUIRE_SHARED(kStories);
  const auto src = GgufFile::open(testing::shared_path(kStories));
  for (const int64_t pad : {1, 2}) {
    GgufWriter w;
    w.set_alignment(2);
    for (const GgufKv& kv : src->metadata()) {
      if (kv.key != "general.alignment") w.add(kv.key, kv.value);
    }
    w.add_tensor("aaa.pad", GgmlType::F16, {pad}, std::vector<uint8_t>(size_t(2 * pad)));
    for (const GgufTensorInfo& t : src->tensors()) w.add_tensor(t.name, t.type, t.ne, bytes_of(*src, t));
    const fs::path path = work_dir() / "stories260K-misaligned.gguf";
    w.write(path.string());
    const auto file = GgufFile::open(path.string());
    if (reinterpret_cast<uintptr_t>(file->tensor_data(*file->find_tensor("token_embd.weight"))) % 4 == 0) continue;
    try {
      load(path.string());
      ADD_FAILURE() << "a misaligned F32 tensor was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not 4-byte aligned in the file (general.alignment 2)"), std::string::npos)
          << e.what();
    }
    return;
  }
  FAIL() << "no padding misaligned the tensors";
}

// One seed gives the same weights in every type: quantizing the F32 file reproduces the
// synthesized Q4_0 tensors byte for byte.
TEST(Synth, QuantizedF32FileEqualsSynthesizedQ4_0File) {
  TSR_REQUIRE_SHARED(kDonor);
  const std::string f32 = synth("f32", 7), q4 = synth("q4_0", 7);
  const std::string converted = (work_dir() / "tiny-f32-to-q4_0.gguf").string();
  ASSERT_EQ(tessera("quantize " + f32 + " " + converted + " q4_0"), 0);
  const auto a = GgufFile::open(q4), b = GgufFile::open(converted);
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (const GgufTensorInfo& t : a->tensors()) {
    const GgufTensorInfo* u = b->find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->type, t.type) << t.name;
    EXPECT_TRUE(std::ranges::equal(bytes_of(*a, t), bytes_of(*b, *u))) << t.name;
  }
}

TEST(Synth, RefusesAVocabularyTheDonorLacks) {
  TSR_REQUIRE_SHARED(kDonor);
  EXPECT_NE(tessera("synth " + (work_dir() / "bad.gguf").string() + " --preset tiny --vocab 1000 --donor " +
                    testing::shared_path(kDonor)),
            0);
}

// The default donor is found from any working directory (its path is fixed at build time).
TEST(Synth, DefaultDonorFromAnyFolder) {
  TSR_REQUIRE_SHARED(kDonor);
  const fs::path out = work_dir() / "default-donor.gguf";
  const std::string cmd = "cd / && " + std::string(TESSERA_BIN_DIR) + "/tessera synth " + out.string() +
                          " --preset tiny 2>>" + (work_dir() / "tessera.log").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(GgufFile::open(out.string())->get_string_array("tokenizer.ggml.tokens")->size(), 32000u);
}

// As llama-quantize: an already quantized tensor is converted only with --allow-requantize.
TEST(Quantize, RequantizingTakesAllowRequantize) {
  TSR_REQUIRE_SHARED(kStories);
  const std::string q8 = quantized_stories("q8_0");
  const fs::path out = work_dir() / "stories260K-q8-q4.gguf";
  const fs::path log = work_dir() / "requantize.log";
  const std::string base = std::string(TESSERA_BIN_DIR) + "/tessera quantize " + q8 + " " + out.string() + " q4_0";
  const int refused = std::system((base + " 2>" + log.string()).c_str());
  EXPECT_EQ(WEXITSTATUS(refused), 1);
  EXPECT_FALSE(fs::exists(out));
  std::ifstream in(log);
  const std::string message((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(message.find("already quantized"), std::string::npos) << message;
  EXPECT_NE(message.find("--allow-requantize"), std::string::npos) << message;
  EXPECT_EQ(tessera("quantize --allow-requantize " + q8 + " " + out.string() + " q4_0"), 0);
  EXPECT_EQ(GgufFile::open(out.string())->find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q4_0);
  // Nothing to convert (the file is Q8_0 already): no refusal.
  EXPECT_EQ(tessera("quantize " + q8 + " " + (work_dir() / "same.gguf").string() + " q8_0"), 0);
}

class QuantizeStories : public ::testing::TestWithParam<const char*> {};

// Every 2-D weight with 64-wide rows becomes the reference quantization of its F32 values;
// ffn_down (rows of 172) and the norms stay F32, byte for byte.
TEST_P(QuantizeStories, TensorsEqualTheReferenceQuantization) {
  TSR_REQUIRE_SHARED(kStories);
  const GgmlType type = *quant::parse_type(GetParam());
  const auto in = GgufFile::open(testing::shared_path(kStories));
  const auto out = GgufFile::open(quantized_stories(GetParam()));
  ASSERT_EQ(out->tensors().size(), in->tensors().size());
  int converted = 0;
  for (const GgufTensorInfo& t : in->tensors()) {
    SCOPED_TRACE(t.name);
    const GgufTensorInfo* q = out->find_tensor(t.name);
    ASSERT_NE(q, nullptr);
    ASSERT_EQ(q->ne, t.ne);
    if (t.ne.size() == 1 || t.ne[0] % 32 != 0) {
      EXPECT_EQ(q->type, t.type);
      EXPECT_TRUE(std::ranges::equal(bytes_of(*in, t), bytes_of(*out, *q)));
      continue;
    }
    ++converted;
    ASSERT_EQ(q->type, type);
    const auto* x = reinterpret_cast<const float*>(in->tensor_data(t));
    const std::vector<uint8_t> want = quant::quantize(type, {x, static_cast<size_t>(t.nelements)});
    EXPECT_TRUE(std::ranges::equal(bytes_of(*out, *q), want));
    EXPECT_EQ(quant::dequantize(type, bytes_of(*out, *q), t.nelements),
              dequantize_by_hand(type, bytes_of(*out, *q), t.nelements));
  }
  EXPECT_EQ(converted, 32);  // token_embd, output and 6 of 7 matrices in each of 5 layers
  EXPECT_EQ(out->get_int("general.file_type"), int64_t{quant::llama_file_type(type)});
  EXPECT_EQ(out->get_string_array("tokenizer.ggml.tokens"), in->get_string_array("tokenizer.ggml.tokens"));
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizeStories, ::testing::Values("q8_0", "q4_0"));

struct Reference {
  std::vector<int32_t> prompt, greedy;
};

std::vector<Reference> references() {
  std::vector<Reference> refs;
  for (const std::string& line : testing::read_lines(testing::shared_path(kRefs))) {
    const auto j = nlohmann::json::parse(line);
    refs.push_back({j["prompt_ids"].get<std::vector<int32_t>>(), j["greedy_ids"].get<std::vector<int32_t>>()});
  }
  return refs;
}

// The logits of the token after `prompt`.
std::vector<float> next_logits(Engine& engine, std::vector<int32_t> prompt) {
  std::vector<float> logits;
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = 1;
  p.sampling.temperature = 0;
  p.on_logits = [&](std::span<const float> l) { logits.assign(l.begin(), l.end()); };
  engine.generate(std::move(p));
  return logits;
}

// Q8_0 moves stories260K's logits by up to ~0.3, and a few of llama.cpp's F32 greedy choices
// are closer calls than that (top-2 gaps of 0.005-0.03), so free-running Q8_0 text leaves the
// reference early on two prompts (after 15 and 43 tokens). The CPU kernels also quantize
// the activations to 8 bits (as llama.cpp's Q8_0 path does), which on this 64-wide model
// adds up to ~0.1 of logit error. Fed the reference tokens, Q8_0 picks the reference token
// at each of the first 50 positions, or one its logit is within 0.15 of: 4 times in the 250
// positions (prompts and decode batches under 64 rows run on the int8 kernels).
TEST(QuantizeStoriesQ8_0, FollowsTheF32GreedyIdsExceptAtNearTies) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED(kRefs);
  auto engine = load(quantized_stories("q8_0"));
  int near_ties = 0;
  for (const Reference& ref : references()) {
    for (size_t k = 0; k < 50; ++k) {
      std::vector<int32_t> prompt = ref.prompt;
      prompt.insert(prompt.end(), ref.greedy.begin(), ref.greedy.begin() + static_cast<ptrdiff_t>(k));
      const std::vector<float> logits = next_logits(*engine, prompt);
      const auto top = std::ranges::max_element(logits);
      if (top - logits.begin() == ref.greedy[k]) continue;
      ++near_ties;
      EXPECT_LT(*top - logits[static_cast<size_t>(ref.greedy[k])], 0.15f) << "position " << k;
    }
  }
  EXPECT_LE(near_ties, 5);
}

// The Q8_0 kernels compute what F32 kernels compute on the reference dequantization of the
// same weights (`quantize ... f32` of the Q8_0 file), up to the 8-bit rounding of the
// activations: teacher-forced logits agree within 0.4 (0.26 at worst on these prompts, in
// logits of magnitude 5-15; a wrong block decode moves them by whole units).
TEST(QuantizeStoriesQ8_0, ComputesAsItsDequantizedF32File) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED(kRefs);
  const std::string q8 = quantized_stories("q8_0");
  const std::string dequantized = (work_dir() / "stories260K-q8_0-f32.gguf").string();
  ASSERT_EQ(tessera("quantize " + q8 + " " + dequantized + " f32"), 0);
  auto a = load(q8), b = load(dequantized);
  for (const Reference& ref : references()) {
    for (size_t k = 0; k < 50; k += 7) {
      std::vector<int32_t> prompt = ref.prompt;
      prompt.insert(prompt.end(), ref.greedy.begin(), ref.greedy.begin() + static_cast<ptrdiff_t>(k));
      const std::vector<float> la = next_logits(*a, prompt), lb = next_logits(*b, prompt);
      ASSERT_EQ(la.size(), lb.size());
      float worst = 0;
      for (size_t i = 0; i < la.size(); ++i) worst = std::max(worst, std::abs(la[i] - lb[i]));
      EXPECT_LT(worst, 0.4f) << "position " << k;
    }
  }
}

std::unique_ptr<Engine> load_quantized_at_load(const std::string& path, const std::string& scheme,
                                               const std::string& graphs = "auto") {
  Config c;
  c.model.path = path;
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.threads = 1;
  c.backend.graphs = graphs;
  c.quant.scheme = scheme;
  return Engine::create(c);
}

// `[quant] scheme` converts the same tensors to the same bytes as `tessera quantize`: the
// plugins share the GGUF reference, so the two models generate identically.
TEST(QuantAtLoad, GgufSchemesEqualTheQuantizedFile) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED(kRefs);
  for (const char* scheme : {"q8_0", "q4_0"}) {
    auto at_load = load_quantized_at_load(testing::shared_path(kStories), scheme);
    auto file = load(quantized_stories(scheme));
    EXPECT_LT(at_load->weight_bytes(), load(testing::shared_path(kStories))->weight_bytes());
    for (const Reference& ref : references()) {
      EXPECT_EQ(greedy(*at_load, ref.prompt, 50), greedy(*file, ref.prompt, 50)) << scheme;
    }
  }
}

// Teacher-forced on llama.cpp's F32 greedy ids, FP8 E4M3 (every stories260K tensor fits)
// picks the same next token at nearly every position.
TEST(QuantAtLoad, Fp8FollowsTheF32GreedyIds) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED(kRefs);
  auto engine = load_quantized_at_load(testing::shared_path(kStories), "fp8_e4m3");
  int agree = 0, total = 0;
  for (const Reference& ref : references()) {
    for (size_t k = 0; k < 50; ++k, ++total) {
      std::vector<int32_t> prompt = ref.prompt;
      prompt.insert(prompt.end(), ref.greedy.begin(), ref.greedy.begin() + static_cast<ptrdiff_t>(k));
      const std::vector<float> logits = next_logits(*engine, prompt);
      agree += std::ranges::max_element(logits) - logits.begin() == ref.greedy[k];
    }
  }
  std::printf("[ stats    ] fp8_e4m3: %d of %d teacher-forced greedy ids agree\n", agree, total);
  EXPECT_GE(agree, total * 9 / 10);
}

// int4_g128 converts the synthesized tiny model's 128-wide FFN rows and runs them on the
// plugin's CPU kernel, registered into the CPU backend: decode graphs record it like any
// op and replay the eager steps' ids.
TEST(QuantAtLoad, Int4RunsOnThePluginKernels) {
  TSR_REQUIRE_SHARED(kDonor);
  const std::string path = synth("f32", 5);
  auto f32 = load(path);
  auto int4 = load_quantized_at_load(path, "int4_g128", "off");
  EXPECT_LT(int4->weight_bytes(), f32->weight_bytes());
  const std::vector<int32_t> prompt = f32->tokenize("Once upon a time");
  const std::vector<int32_t> eager = greedy(*int4, prompt, 16);
  EXPECT_EQ(eager.size(), 16u);
  auto graphed = load_quantized_at_load(path, "int4_g128", "on");
  EXPECT_EQ(greedy(*graphed, prompt, 16), eager);
  EXPECT_GT(graphed->stats().graph_replays, 0) << "decode steps did not replay graphs";
}

// `tessera perplexity --kl-base`: Q8_0 at load stays within 1e-3 of the F32 model in KL
// divergence, and the F32 model against itself gives exactly zero.
TEST(Perplexity, Q8_0KlAgainstF32) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  const std::string out = (work_dir() / "ppl.json").string();
  auto run = [&](const std::string& quant) {
    const std::string args = "perplexity -m " + testing::shared_path(kStories) + " -f " +
                             testing::shared_path("models/stories260K.samples.txt") + " --chunks 4 -t 1 -ctk f32 -ctv f32 --json --quant " +
                             quant + " --kl-base " + testing::shared_path(kStories) + " | tail -1 > " + out;
    EXPECT_EQ(tessera(args), 0) << args;
    std::ifstream in(out);
    return nlohmann::json::parse(in);
  };
  const nlohmann::json same = run("auto"), q8 = run("q8_0");
  EXPECT_EQ(same["kl_mean"].get<double>(), 0.0);
  EXPECT_EQ(same["ppl"], same["ppl_base"]);
  EXPECT_GT(q8["kl_mean"].get<double>(), 0.0);
  EXPECT_LT(q8["kl_mean"].get<double>(), 1e-3);
  EXPECT_NEAR(q8["ppl"].get<double>(), q8["ppl_base"].get<double>(), 0.02 * q8["ppl_base"].get<double>());
  EXPECT_GT(q8["top1_agree"].get<double>(), 0.95);
  EXPECT_EQ(q8["tokens"].get<int64_t>(), 4 * 255);
}

// stories260K with outlier features injected without changing what it computes: at four
// of its 64 hidden dimensions every input norm's weight is multiplied by `gain` and the
// matching input column of each projection it feeds (Q, K, V; gate, up) divided by it.
// The projections then see values `gain` times larger there, as LLM.int8() found in large
// models, while the F32 model's outputs stay the original's (up to rounding).
void write_with_outliers(const std::string& src_path, const std::string& dst_path, float gain) {
  const auto src = GgufFile::open(src_path);
  GgufWriter w;
  w.set_alignment(uint32_t(src->alignment()));
  for (const GgufKv& kv : src->metadata()) {
    if (kv.key != "general.alignment") w.add(kv.key, kv.value);
  }
  auto ends_with = [](const std::string& s, std::string_view tail) { return s.ends_with(tail); };
  for (const GgufTensorInfo& t : src->tensors()) {
    ASSERT_EQ(t.type, GgmlType::F32) << t.name;
    std::vector<float> v(size_t(t.nelements));
    std::memcpy(v.data(), src->tensor_data(t), t.nbytes);
    const int64_t cols = t.ne[0];
    const bool norm = ends_with(t.name, "attn_norm.weight") || ends_with(t.name, "ffn_norm.weight");
    const bool consumer = ends_with(t.name, "attn_q.weight") || ends_with(t.name, "attn_k.weight") ||
                          ends_with(t.name, "attn_v.weight") || ends_with(t.name, "ffn_gate.weight") ||
                          ends_with(t.name, "ffn_up.weight");
    const float scale = norm ? gain : consumer ? 1.0f / gain : 1.0f;
    for (int64_t d : {5, 21, 38, 50}) {
      for (int64_t i = d; scale != 1.0f && i < t.nelements; i += cols) v[size_t(i)] *= scale;
    }
    w.add_tensor(t.name, t.type, t.ne, {reinterpret_cast<const uint8_t*>(v.data()), t.nbytes});
  }
  w.write(dst_path);
}

// Splits the stories text: the first half to score on, the second to calibrate on.
void split_samples(const fs::path& eval, const fs::path& calib) {
  std::ifstream in(testing::shared_path("models/stories260K.samples.txt"), std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(eval, std::ios::binary) << all.substr(0, all.size() / 2);
  std::ofstream(calib, std::ios::binary) << all.substr(all.size() / 2);
}

// LLM.int8() (the llm_int8 quant plugin) on stories260K with injected outlier features
// (above, gain 20), scored against the original F32 model on the first half of the stories
// text. Plain vector-wise int8 (outlier_threshold = inf) lets those dimensions set every
// token's scale; llm_int8 (threshold 6, the default) multiplies them in F32, against weight
// columns decoded from int8 (as bitsandbytes' inference kernel does: here they are 20 times
// smaller than their rows' absmax and keep 3 bits), or, with an importance matrix of the
// second half ([quant] imatrix, from `tessera imatrix`), kept in F32. Measured (40 chunks
// of 128): plain int8 KL 0.0493 (top-1 0.872); llm_int8 0.0112 (0.936); with the imatrix
// 0.00139 (0.980), below llm_int8 on the unmodified model (0.00153): what is left is int8's
// own rounding of 64-wide rows (weights alone 0.0006, activations the rest), which a lower
// threshold moves to F32: 0.00092 at 2.5. An option the scheme lacks, an imatrix for a
// scheme that uses none, or either without a scheme, is refused by name.
TEST(Perplexity, LlmInt8KeepsOutlierFeaturesInF32) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  const std::string model = (work_dir() / "stories260K-outliers.gguf").string();
  write_with_outliers(testing::shared_path(kStories), model, 20.0f);
  const fs::path eval = work_dir() / "int8-eval.txt", calib = work_dir() / "int8-calib.txt";
  split_samples(eval, calib);
  const std::string imatrix = (work_dir() / "outliers.imatrix.gguf").string();
  ASSERT_EQ(tessera("imatrix -m " + model + " -f " + calib.string() + " -o " + imatrix + " -c 128 --chunks 40 -t 2"), 0);
  const std::string out = (work_dir() / "ppl-int8.json").string();
  auto run = [&](const std::string& path, const std::string& scheme, const std::string& threshold,
                 const std::string& importance) {
    const std::string config = (work_dir() / "int8.toml").string();
    std::ofstream(config) << "[quant]\nscheme = \"" << scheme << "\"\n"
                          << (threshold.empty() ? "" : "outlier_threshold = " + threshold + "\n")
                          << (importance.empty() ? "" : "imatrix = \"" + importance + "\"\n");
    const std::string args = "perplexity --config " + config + " -m " + path + " --kl-base " +
                             testing::shared_path(kStories) + " -f " + eval.string() +
                             " -c 128 --chunks 40 -t 2 -ctk f32 -ctv f32 --json | tail -1 > " + out;
    EXPECT_EQ(tessera(args), 0) << args;
    std::ifstream in(out);
    const nlohmann::json j = nlohmann::json::parse(in);
    std::printf("%s %s, outlier_threshold %s%s: KL mean %.3g, top-1 agreement %.3f\n", fs::path(path).filename().c_str(),
                scheme.c_str(), threshold.empty() ? "(default)" : threshold.c_str(), importance.empty() ? "" : ", imatrix",
                j["kl_mean"].get<double>(), j["top1_agree"].get<double>());
    return j;
  };
  auto kl = [](const nlohmann::json& j) { return j["kl_mean"].get<double>(); };
  EXPECT_LT(kl(run(model, "auto", "", "")), 1e-9) << "the injection changed the model";
  const nlohmann::json decomposed = run(model, "llm_int8", "", ""), plain = run(model, "llm_int8", "inf", "");
  EXPECT_LT(kl(decomposed), kl(plain) / 3);
  EXPECT_GT(decomposed["top1_agree"].get<double>(), plain["top1_agree"].get<double>() + 0.03);
  const nlohmann::json kept = run(model, "llm_int8", "", imatrix);
  EXPECT_LT(kl(kept), kl(decomposed) / 5);
  EXPECT_LT(kl(kept), kl(run(testing::shared_path(kStories), "llm_int8", "", ""))) << "the outliers still cost";
  EXPECT_LE(kl(run(model, "llm_int8", "2.5", imatrix)), 1e-3);

  auto refused = [&](const std::string& toml, const std::string& message) {
    const std::string config = (work_dir() / "bad-int8.toml").string();
    std::ofstream(config) << toml;
    EXPECT_NE(tessera("run --config " + config + " -m " + model + " -p x -n 1"), 0) << toml;
    std::ifstream log(work_dir() / "tessera.log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(message), std::string::npos) << message;
  };
  refused("[quant]\nscheme = \"q8_0\"\noutlier_threshold = 6.0\n",
          "[quant] outlier_threshold: quant scheme 'q8_0' takes no options");
  refused("[quant]\nscheme = \"q8_0\"\nimatrix = \"" + imatrix + "\"\n",
          "[quant] imatrix: quant scheme 'q8_0' uses no importance matrix");
  refused("[quant]\nimatrix = \"" + imatrix + "\"\n", "[quant] imatrix needs a [quant] scheme that uses one");
}

// GPTQ and AWQ (`quantize --method gptq|awq --calib TEXT`) on a synth model with moderate
// outlier features (four of 256 dimensions weighed by 4 in the input norms), calibrated on
// the first half of the stories text and scored on the second: both lose less than round to
// nearest in the same type. Measured (8 calibration chunks, 40 scored): Q4_0 KL 1.17 (RTN),
// 0.92 (GPTQ), 1.03 (AWQ: scales and clipping); int4_g128 at load 1.11 (RTN), 0.91 (the
// AWQ-scaled and clipped model), 0.77 (GPTQ's grid values; 0.74 with --act-order).
class Calibrated : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string text = testing::shared_path("models/stories260K.samples.txt");
    if (!fs::exists(text)) return;  // the tests skip, naming it
    std::ifstream in(text, std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(work_dir() / "calib.txt", std::ios::binary) << all.substr(0, all.size() / 2);
    std::ofstream(work_dir() / "eval.txt", std::ios::binary) << all.substr(all.size() / 2);
    for (auto [path, gain] : {std::pair{model(), "4"}, {outliers(), "20"}}) {
      ASSERT_EQ(tessera("synth " + path + " --dim 256 --layers 4 --heads 4 --kv-heads 4 --ffn 768 --outlier-dims 4 "
                        "--outlier-gain " + gain + " --donor " + testing::shared_path(kDonor)), 0);
    }
  }
  static std::string model() { return (work_dir() / "calib-model.gguf").string(); }
  static std::string outliers() { return (work_dir() / "calib-outliers.gguf").string(); }
  static std::string calib() { return (work_dir() / "calib.txt").string(); }

  // Writes `out` from the model with `method` ("rtn" needs no text).
  static std::string quantize(const std::string& type, const std::string& method) {
    const std::string out = (work_dir() / ("calib-" + type + "-" + method + ".gguf")).string();
    const std::string args = "quantize " + model() + " " + out + " " + type + " --method " + method +
                             (method == "rtn" ? "" : " --calib " + calib() + " --calib-chunks 8");
    EXPECT_EQ(tessera(args), 0) << args;
    return out;
  }
  // Mean KL(base || path) on the held-out half, `quant` the load-time scheme.
  static double kl(const std::string& path, const std::string& quant = "", const std::string& base = model()) {
    const std::string out = (work_dir() / "calib-ppl.json").string();
    const std::string args = "perplexity -m " + path + " --kl-base " + base + " -f " + (work_dir() / "eval.txt").string() +
                             " -c 128 --chunks 40 -t 2 -ctk f32 -ctv f32 --json" + (quant.empty() ? "" : " --quant " + quant) +
                             " | tail -1 > " + out;
    EXPECT_EQ(tessera(args), 0) << args;
    std::ifstream in(out);
    const double v = nlohmann::json::parse(in)["kl_mean"].get<double>();
    std::printf("%s%s: KL %.4f\n", fs::path(path).filename().c_str(), quant.empty() ? "" : (" as " + quant).c_str(), v);
    return v;
  }
};

TEST_F(Calibrated, GptqAndAwqLoseLessThanRoundToNearest) {
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  const double rtn = kl(quantize("q4_0", "rtn"));
  EXPECT_LT(kl(quantize("q4_0", "gptq")), 0.9 * rtn);
  EXPECT_LT(kl(quantize("q4_0", "awq")), 0.95 * rtn);
  const double int4_rtn = kl(model(), "int4_g128");
  EXPECT_LT(kl(quantize("int4_g128", "awq"), "int4_g128"), 0.9 * int4_rtn);
  EXPECT_LT(kl(quantize("int4_g128", "gptq"), "int4_g128"), 0.8 * int4_rtn);
}

// GPTQ for the load-time int4_g128 scheme writes the model in its float type with every
// calibrated weight on the scheme's grid: quantized again at load, each group gives back
// exactly the values GPTQ chose (its codes, scale and zero point).
TEST_F(Calibrated, GptqInt4G128ValuesSurviveTheLoadTimeQuantizer) {
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  const auto f = GgufFile::open(quantize("int4_g128", "gptq"));
  const auto original = GgufFile::open(model());
  int checked = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    if (t.ne.size() != 2 || t.ne[0] % quant::kGroupInt4 != 0 || t.name.find("blk.") != 0) continue;
    SCOPED_TRACE(t.name);
    ASSERT_EQ(t.type, GgmlType::F32);
    const auto* x = reinterpret_cast<const float*>(f->tensor_data(t));
    std::vector<quant::GroupInt4> g(size_t(t.nelements / quant::kGroupInt4));
    quant::quantize_row_int4_g128(x, g.data(), t.nelements);
    std::vector<float> again(size_t(t.nelements));
    quant::dequantize_row_int4_g128(g.data(), again.data(), t.nelements);
    EXPECT_TRUE(std::equal(again.begin(), again.end(), x));
    EXPECT_FALSE(std::ranges::equal(bytes_of(*f, t), bytes_of(*original, *original->find_tensor(t.name))));
    ++checked;
  }
  EXPECT_EQ(checked, 28);  // 7 matrices in each of 4 layers
}

// SmoothQuant: the smoothed model under the w8a8_smooth scheme (int8 weights per row, int8
// activations per token) against the same scheme on the unsmoothed model, i.e. plain W8A8,
// whose per-token scales the outlier channels set. Measured on the synth with outlier gain
// 20 (40 chunks): KL 2.05 -> 0.47 (llm_int8: 0.32); with gain 4, 0.025 -> 0.019.
TEST_F(Calibrated, SmoothQuantLetsW8A8Follow) {
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  const std::string smoothed = (work_dir() / "calib-smoothed.gguf").string();
  ASSERT_EQ(tessera("quantize " + outliers() + " " + smoothed + " w8a8_smooth --calib " + calib() + " --calib-chunks 8"), 0);
  const double plain = kl(outliers(), "w8a8_smooth", outliers()), smooth = kl(smoothed, "w8a8_smooth", outliers());
  EXPECT_LT(smooth, 0.6 * plain);
  EXPECT_NE(tessera("quantize " + model() + " " + smoothed + " q8_0 --method smoothquant --calib " + calib()), 0);
}

// GPTQ's file holds plain Q4_0 blocks (what llama.cpp reads), other bytes than round to
// nearest's; the methods refuse what they cannot do, naming it.
TEST_F(Calibrated, GptqWritesGgufBlocksAndRefusesWhatItCannotWrite) {
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  const auto gptq = GgufFile::open(quantize("q4_0", "gptq")), rtn = GgufFile::open(quantize("q4_0", "rtn"));
  const GgufTensorInfo* g = gptq->find_tensor("blk.1.ffn_down.weight");
  const GgufTensorInfo* r = rtn->find_tensor("blk.1.ffn_down.weight");
  ASSERT_TRUE(g && r);
  EXPECT_EQ(g->type, GgmlType::Q4_0);
  EXPECT_EQ(quant::dequantize(GgmlType::Q4_0, bytes_of(*gptq, *g), g->nelements),
            dequantize_by_hand(GgmlType::Q4_0, bytes_of(*gptq, *g), g->nelements));
  EXPECT_FALSE(std::equal(bytes_of(*gptq, *g).begin(), bytes_of(*gptq, *g).end(), bytes_of(*rtn, *r).begin()));
  const std::string out = (work_dir() / "refused.gguf").string();
  const std::string base = "quantize " + model() + " " + out + " ";
  EXPECT_NE(tessera(base + "q4_0 --method gptq"), 0);                                // no --calib
  EXPECT_NE(tessera(base + "q4_k_m --method gptq --calib " + calib()), 0);            // not a block-of-32 grid
  EXPECT_NE(tessera(base + "int4_g128"), 0);                                          // no GGUF type to round to
  EXPECT_NE(tessera(base + "q4_0 --calib " + calib()), 0);                           // rtn takes no text
  EXPECT_NE(tessera(base + "q4_0 --method obq --calib " + calib()), 0);
  std::ifstream log(work_dir() / "tessera.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  for (const char* why : {"needs a calibration text: --calib FILE", "--method gptq writes q4_0, q4_1, q5_0, q5_1 or q8_0",
                          "int4_g128 is a load-time scheme", "--calib is for --method gptq, awq or smoothquant",
                          "--method must be rtn, gptq, awq or smoothquant, not 'obq'"}) {
    EXPECT_NE(text.find(why), std::string::npos) << why;
  }
}

// `tessera imatrix` and `quantize --imatrix` against llama.cpp's own quantizer:
// llama_model_quantize in node-llama-cpp's libllama (tests/e2e/llama_quantize_ref.cpp), fed
// the same importance matrix file. Every tensor both write in the same type holds the same
// bytes: the 32-block types and IQ4_NL on stories260K (--pure), the K-quants, IQ4_XS and the
// Q4_K_M / Q5_K_M / Q6_K mixes (their whole tensor-type choice too) on a synth model with
// rows of 256 and more. The importance matrix lowers KL against F32 (measured on stories260K,
// held-out text: Q4_0 0.111 -> 0.103, Q4_1 0.089 -> 0.073, IQ4_NL 0.090 -> 0.084).
enum class ImatrixModel { stories, synth, moe };

class ImatrixOracle : public ::testing::TestWithParam<std::tuple<const char*, int, bool, ImatrixModel>> {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(testing::shared_path("models/stories260K.samples.txt")) || !fs::exists(testing::shared_path(kStories))) return;
    ASSERT_EQ(tessera("synth " + synth_model() + " --dim 256 --layers 8 --heads 4 --kv-heads 2 --ffn 512 --donor " +
                      testing::shared_path(kDonor)), 0);
    ASSERT_EQ(tessera("synth " + moe_model() + " --arch qwen3moe --dim 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 "
                      "--ffn 256 --experts 8 --experts-used 2 --vocab 512 --donor bytes"), 0);
    const std::string text = testing::shared_path("models/stories260K.samples.txt");
    for (const std::string& m : {synth_model(), moe_model(), testing::shared_path(kStories)}) {
      ASSERT_EQ(tessera("imatrix -m " + m + " -f " + text + " -c 128 --chunks 24 -o " + imatrix_of(m)), 0);
    }
  }
  static std::string synth_model() { return (work_dir() / "imatrix-synth.gguf").string(); }
  // Qwen3-MoE: the experts' importances are per expert (tokens routed to each).
  static std::string moe_model() { return (work_dir() / "imatrix-moe.gguf").string(); }
  static std::string model_of(ImatrixModel m) {
    return m == ImatrixModel::stories ? testing::shared_path(kStories) : m == ImatrixModel::synth ? synth_model() : moe_model();
  }
  static std::string imatrix_of(const std::string& model) {
    return (work_dir() / (fs::path(model).stem().string() + ".imatrix.gguf")).string();
  }
  static std::string lib_dir() { return testing::npm_dir() + "/@node-llama-cpp/linux-x64/bins/linux-x64"; }
};

TEST_P(ImatrixOracle, TensorsEqualLlamaQuantize) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  if (!fs::exists(lib_dir() + "/libllama.v0.4.0.so")) {
    GTEST_SKIP() << "no libllama in " << lib_dir() << ": run `npm ci` in tests/npm";
  }
  const auto [type, ftype, pure, which] = GetParam();
  const std::string model = model_of(which);
  const std::string tag = std::string(type) + (which == ImatrixModel::moe ? "-moe" : "");
  const std::string ours = (work_dir() / ("imatrix-" + tag + ".gguf")).string();
  const std::string theirs = (work_dir() / ("imatrix-" + tag + "-llama.gguf")).string();
  ASSERT_EQ(tessera("quantize " + model + " " + ours + " " + type + " --imatrix " + imatrix_of(model)), 0);
  const std::string ref = std::string(TESSERA_LLAMA_QUANTIZE_REF) + " " + lib_dir() + " " + model + " " + theirs + " " +
                          std::to_string(ftype) + " " + (pure ? "1" : "0") + " " + imatrix_of(model) + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(ref.c_str()), 0) << ref;
  const auto a = GgufFile::open(ours), b = GgufFile::open(theirs);
  const auto in = GgufFile::open(model);
  int same_type = 0, quantized = 0;
  for (const GgufTensorInfo& t : a->tensors()) {
    SCOPED_TRACE(t.name);
    const GgufTensorInfo* u = b->find_tensor(t.name);
    ASSERT_NE(u, nullptr);
    // --pure keeps a tensor whose rows do not fill the type's blocks; llama.cpp falls back
    // to another type. The mixes must agree on every tensor.
    if (!pure) {
      EXPECT_EQ(t.type, u->type);
    }
    if (t.type != u->type) continue;
    ++same_type;
    quantized += t.type != in->find_tensor(t.name)->type;
    EXPECT_TRUE(std::ranges::equal(bytes_of(*a, t), bytes_of(*b, *u)));
  }
  EXPECT_GE(quantized, which == ImatrixModel::synth ? 56 : which == ImatrixModel::moe ? 14 : 25);  // the layers' matrices
  EXPECT_GT(same_type, quantized);           // and the norms, copied
}

// An importance matrix of another model is refused by the tensor it does not fit, and
// --imatrix takes no calibrated method.
TEST_F(ImatrixOracle, RefusesAMatrixThatDoesNotFit) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  const std::string out = (work_dir() / "imatrix-refused.gguf").string();
  const std::string stories_im = imatrix_of(testing::shared_path(kStories));
  EXPECT_NE(tessera("quantize " + synth_model() + " " + out + " q4_k --imatrix " + stories_im), 0);
  EXPECT_NE(tessera("quantize " + synth_model() + " " + out + " q4_0 --method gptq --calib " + stories_im +
                    " --imatrix " + imatrix_of(synth_model())), 0);
  EXPECT_NE(tessera("quantize " + synth_model() + " " + out + " q4_0 --imatrix " + kStories), 0);  // no such file
  std::ifstream log(work_dir() / "tessera.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  for (const char* why : {"imatrix: the entry for blk.0.attn_q.weight has 64 values, the tensor 256 (256 columns x 1 experts)",
                          "--imatrix weights round-to-nearest's quantizers (--method rtn); gptq calibrates"}) {
    EXPECT_NE(text.find(why), std::string::npos) << why;
  }
}

// The MoE model's matrix: each expert stack has an entry per expert whose counts are the
// tokens routed to it (two experts a token: twice the tokens in all), the dense weights the
// tokens; sums of squares are positive where tokens went.
TEST_F(ImatrixOracle, MoeExpertsCountTheTokensRoutedToThem) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  const quant::Imatrix m = quant::imatrix_read(imatrix_of(moe_model()));
  EXPECT_EQ(m.chunk_count, 24);
  EXPECT_EQ(m.chunk_size, 128);
  const int64_t tokens = 24 * 128;
  int stacks = 0;
  for (const auto& [name, e] : m.entries) {
    SCOPED_TRACE(name);
    if (name.find("_exps") == std::string::npos) {
      EXPECT_EQ(e.counts, std::vector<int64_t>{tokens});
      continue;
    }
    ++stacks;
    ASSERT_EQ(e.counts.size(), 8u);
    EXPECT_EQ(std::accumulate(e.counts.begin(), e.counts.end(), int64_t{0}), 2 * tokens);
    ASSERT_EQ(e.sums.size(), 8u * 256);
    for (size_t x = 0; x < 8; ++x) {
      if (e.counts[x] > 0) {
        EXPECT_GT(e.sums[x * 256], 0.0f);
      }
    }
  }
  EXPECT_EQ(stacks, 6);  // gate, up and down in each of 2 layers
}

INSTANTIATE_TEST_SUITE_P(
    Types, ImatrixOracle,
    ::testing::Values(std::tuple{"q4_0", 2, true, ImatrixModel::stories}, std::tuple{"q4_1", 3, true, ImatrixModel::stories},
                      std::tuple{"q5_0", 8, true, ImatrixModel::stories}, std::tuple{"q5_1", 9, true, ImatrixModel::stories},
                      std::tuple{"iq4_nl", 25, true, ImatrixModel::stories}, std::tuple{"q2_k", 10, true, ImatrixModel::synth},
                      std::tuple{"q3_k", 12, true, ImatrixModel::synth}, std::tuple{"q4_k", 15, true, ImatrixModel::synth},
                      std::tuple{"q5_k", 17, true, ImatrixModel::synth}, std::tuple{"q6_k", 18, false, ImatrixModel::synth},
                      std::tuple{"iq4_xs", 30, true, ImatrixModel::synth}, std::tuple{"q4_k_m", 15, false, ImatrixModel::synth},
                      std::tuple{"q5_k_m", 17, false, ImatrixModel::synth}, std::tuple{"q4_k_m", 15, false, ImatrixModel::moe},
                      std::tuple{"q4_0", 2, true, ImatrixModel::moe}),
    [](const auto& info) {
      return std::string(std::get<0>(info.param)) + (std::get<3>(info.param) == ImatrixModel::moe ? "_moe" : "");
    });

// `tessera perplexity --kl-base` with the same file measures what a KV dtype costs (the
// base runs with an F32 cache). stories260K's heads of 8 take f16, bf16 and fp8_e4m3 (q8_0
// and q4_0 need whole blocks of 32, as llama.cpp's); a synth model with heads of 64 takes
// all, and its rotated q4_0 cache loses less than the unrotated one (measured: KL 0.022 and
// 0.027, q8_0 1e-4, fp8_e4m3 0.0021; stories260K fp8_e4m3 0.00997, the same with 1 and 2
// threads: E4M3's 3 mantissa bits, whatever the scale).
TEST(Perplexity, KvDtypesKlAgainstAnF32Cache) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  const std::string out = (work_dir() / "ppl-kv.json").string();
  const std::string no_rotation = (work_dir() / "no-rotation.toml").string();
  std::ofstream(no_rotation) << "[cache]\nrotation = \"none\"\n";
  auto kl = [&](const std::string& model, const std::string& kv, const std::string& extra = "") {
    const std::string args = "perplexity -m " + model + " --kl-base " + model + " -f " +
                             testing::shared_path("models/stories260K.samples.txt") + " -c 256 --chunks 4 -t 2 --json -ctk " +
                             kv + " -ctv " + kv + " " + extra + " | tail -1 > " + out;
    EXPECT_EQ(tessera(args), 0) << args;
    std::ifstream in(out);
    const double v = nlohmann::json::parse(in)["kl_mean"].get<double>();
    std::printf("%s, %s %s: KL mean %.3g\n", model.c_str(), kv.c_str(), extra.c_str(), v);
    return v;
  };
  const std::string stories = testing::shared_path(kStories);
  EXPECT_LT(kl(stories, "f16"), 1e-4);
  EXPECT_LT(kl(stories, "bf16"), 2e-3);
  EXPECT_LT(kl(stories, "fp8_e4m3"), 1e-2);
  const std::string heads64 = (work_dir() / "heads64.gguf").string();
  ASSERT_EQ(tessera("synth " + heads64 + " --preset tiny --dim 256 --heads 4 --kv-heads 2 --layers 4 --ffn 512 --seed 7 --donor " +
                          testing::shared_path(kDonor)), 0);
  EXPECT_LT(kl(heads64, "f16"), 1e-5);
  EXPECT_LT(kl(heads64, "q8_0"), 2e-3);
  EXPECT_LT(kl(heads64, "fp8_e4m3"), 1e-2);
  const double rotated = kl(heads64, "q4_0"), plain = kl(heads64, "q4_0", "--config " + no_rotation);
  EXPECT_LT(rotated, plain);
  EXPECT_LT(plain, 0.1);
}

// `tessera perplexity` through a streaming window ([cache] eviction = "streaming"): each
// 512-token chunk's scored half runs with 4 sinks + 256 window tokens, within 5 % of the
// full context (measured on all 80 chunks: 4.1668 against 4.1687; 0 sinks + 260: 4.1681);
// a window of 28 costs clearly more (20 chunks: 5.06), which shows that it evicts.
TEST(Perplexity, StreamingWindowAgainstTheFullContext) {
  TSR_REQUIRE_SHARED(kStories);
  TSR_REQUIRE_SHARED("models/stories260K.samples.txt");
  const std::string out = (work_dir() / "ppl-stream.json").string();
  auto ppl = [&](const std::string& cache) {
    const std::string config = (work_dir() / "stream.toml").string();
    std::ofstream(config) << "[cache]\n" << cache;
    const std::string args = "perplexity -m " + testing::shared_path(kStories) + " -f " +
                             testing::shared_path("models/stories260K.samples.txt") + " -c 512 --chunks 8 -t 2 --json --config " +
                             config + " | tail -1 > " + out;
    EXPECT_EQ(tessera(args), 0) << args;
    std::ifstream in(out);
    const nlohmann::json j = nlohmann::json::parse(in);
    std::printf("%s: perplexity %.4f\n", cache.c_str(), j["ppl"].get<double>());
    return j["ppl"].get<double>();
  };
  const double full = ppl("eviction = \"none\"\n");
  const double streaming = ppl("eviction = \"streaming\"\nsink_tokens = 4\nwindow = 256\n");
  const double narrow = ppl("eviction = \"streaming\"\nsink_tokens = 4\nwindow = 28\n");
  EXPECT_NE(streaming, full);
  EXPECT_NEAR(streaming, full, 0.05 * full);
  EXPECT_GT(narrow, 1.05 * full);
}

// `tessera bench -m --json`: every test's rate, the probes of this machine, and the
// rooflines derived from them (bytes read per decode step; multiply-adds per prompt token
// from the model's shape).
TEST(Bench, EngineModeReportsRatesAndMachineLimits) {
  TSR_REQUIRE_SHARED(kDonor);
  const std::string model = synth("q8_0", 7), out = (work_dir() / "bench.json").string();
  const std::string args = "bench -m " + model + " -t 1 -p 32 -n 8 --batches 1,2 --reps 1 --json | tail -1 > " + out;
  ASSERT_EQ(tessera(args), 0) << args;
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const char* key : {"pp32_tok_s", "tg8_tok_s", "b1_tok_s", "b2_tok_s", "mem_read_gb_s", "roofline_tok_s",
                          "pp32_g_mac_s", "load_ms", "load_to_first_token_ms"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<double>(), 0) << key;
  }
  EXPECT_GT(j["load_to_first_token_ms"].get<double>(), j["load_ms"].get<double>());
  EXPECT_NEAR(j["roofline_tok_s"].get<double>(),
              j["mem_read_gb_s"].get<double>() * 1e9 / j["step_read_bytes"].get<double>(), 1e-6 * j["roofline_tok_s"].get<double>());
  const LlamaHParams hp = llama_hparams_from_gguf(*GgufFile::open(model));
  const double q = double(hp.n_head) * hp.head_dim, kv = double(hp.n_head_kv) * hp.head_dim;
  const double macs = double(hp.n_layer) * hp.n_embd * (2 * q + 2 * kv + 3 * double(hp.n_ff));
  EXPECT_NEAR(j["pp32_g_mac_s"].get<double>(), j["pp32_tok_s"].get<double>() * macs / 1e9, 1e-6 * j["pp32_g_mac_s"].get<double>());
  // The peaks where the CPU has the instructions, 0 where not (their size is a matter of
  // the build too: sanitizers keep the probe's chains in memory).
  EXPECT_EQ(j["peak_f32_fma_g_s"].get<double>() > 0, __builtin_cpu_supports("avx512f") != 0);
  EXPECT_EQ(j["peak_i8_mac_g_s"].get<double>() > 0, __builtin_cpu_supports("avx512vnni") != 0);
}

}  // namespace
}  // namespace tsr
