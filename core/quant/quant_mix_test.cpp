// llama.cpp's Q4_K_M / Q5_K_M / Q6_K tensor types, on model layouts written for the test:
// the expectations are llama-quant.cpp's rules (llama_tensor_get_type) worked by hand.
#include "core/quant/quant_mix.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <unistd.h>

#include "core/model/gguf_writer.h"

namespace tsr::quant {
namespace {

struct Layout {
  int layers = 32;
  int experts = 0;
  bool tied = false;
  int64_t width = 256;  // every tensor's row length
};

// A llama-style file of F32 tensors (two rows each: the rules read names and shapes only).
std::unique_ptr<GgufFile> write_model(const Layout& l) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", uint32_t(l.layers));
  w.add_u32("llama.attention.head_count", 8);
  w.add_u32("llama.attention.head_count_kv", 2);
  if (l.experts > 0) w.add_u32("llama.expert_count", uint32_t(l.experts));
  const std::vector<uint8_t> row(size_t(l.width) * 2 * 4);
  const auto add = [&](const std::string& name, std::vector<int64_t> ne) {
    std::vector<uint8_t> data(row.size() * size_t(ne.size() == 1 ? 1 : ne[1]) / 2);
    if (ne.size() == 1) data.resize(size_t(ne[0]) * 4);
    w.add_tensor(name, GgmlType::F32, ne, data);
  };
  add("token_embd.weight", {l.width, 2});
  for (int i = 0; i < l.layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", {l.width});
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      add(b + t + ".weight", {l.width, 2});
    }
  }
  add("output_norm.weight", {l.width});
  if (!l.tied) add("output.weight", {l.width, 2});
  const std::string path = (std::filesystem::path(::testing::TempDir()) /
                            ("mix-" + std::to_string(getpid()) + ".gguf")).string();
  w.write(path);
  auto file = GgufFile::open(path);
  std::filesystem::remove(path);
  return file;
}

std::map<std::string, GgmlType> types_of(const GgufFile& f, const char* mix, std::vector<std::string>* fallbacks = nullptr) {
  const std::vector<GgmlType> types = quant_mix_types(f, *quant_mix_parse(mix), fallbacks);
  std::map<std::string, GgmlType> out;
  for (size_t i = 0; i < types.size(); ++i) out[f.tensors()[i].name] = types[i];
  return out;
}

std::string blk(int i, const char* t) { return "blk." + std::to_string(i) + "." + t + ".weight"; }

// use_more_bits over 32 layers: the first and last four and every third from layer 6.
const std::set<int> kMoreBits32 = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};

TEST(QuantMix, Q4KMGivesTheSensitiveLayersQ6K) {
  const auto f = write_model({});
  const auto t = types_of(*f, "q4_k_m");
  EXPECT_EQ(t.at("output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(t.at("token_embd.weight"), GgmlType::Q4_K);
  EXPECT_EQ(t.at("output_norm.weight"), GgmlType::F32);
  for (int i = 0; i < 32; ++i) {
    const GgmlType more = kMoreBits32.count(i) ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(t.at(blk(i, "attn_v")), more) << i;
    EXPECT_EQ(t.at(blk(i, "ffn_down")), more) << i;
    for (const char* other : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) {
      EXPECT_EQ(t.at(blk(i, other)), GgmlType::Q4_K) << i << other;
    }
    EXPECT_EQ(t.at(blk(i, "attn_norm")), GgmlType::F32);
  }
  EXPECT_EQ(quant_mix_parse("Q4_K_M")->file_type, 15u);
}

TEST(QuantMix, Q5KMAndQ6K) {
  const auto f = write_model({});
  const auto t5 = types_of(*f, "q5_k_m");
  const auto t6 = types_of(*f, "q6_k");
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(t5.at(blk(i, "attn_v")), kMoreBits32.count(i) ? GgmlType::Q6_K : GgmlType::Q5_K) << i;
    EXPECT_EQ(t5.at(blk(i, "attn_q")), GgmlType::Q5_K);
    EXPECT_EQ(t6.at(blk(i, "attn_v")), GgmlType::Q6_K);
    EXPECT_EQ(t6.at(blk(i, "ffn_down")), GgmlType::Q6_K);
  }
  EXPECT_EQ(t5.at("output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(quant_mix_parse("q5_k_m")->file_type, 17u);
  EXPECT_EQ(quant_mix_parse("q6_k")->file_type, 18u);
  EXPECT_FALSE(quant_mix_parse("q4_k_s").has_value());
}

TEST(QuantMix, TiedEmbeddingTakesTheOutputsType) {
  const auto f = write_model({.layers = 4, .tied = true});
  EXPECT_EQ(types_of(*f, "q4_k_m").at("token_embd.weight"), GgmlType::Q6_K);
}

TEST(QuantMix, EightExpertModelsBumpAttention) {
  const auto f = write_model({.layers = 8, .experts = 8});
  const auto t = types_of(*f, "q4_k_m");
  EXPECT_EQ(t.at(blk(3, "attn_v")), GgmlType::Q8_0);
  EXPECT_EQ(t.at(blk(3, "attn_k")), GgmlType::Q8_0);
  EXPECT_EQ(t.at(blk(3, "attn_output")), GgmlType::Q5_K);
  EXPECT_EQ(types_of(*f, "q5_k_m").at(blk(3, "attn_output")), GgmlType::Q5_K);
}

// Rows that do not fill a 256-block: llama.cpp's fallbacks (Q4_K -> Q5_0, Q6_K -> Q8_0, an
// output head -> Q8_0).
TEST(QuantMix, NarrowRowsFallBack) {
  const auto f = write_model({.layers = 2, .width = 96});
  std::vector<std::string> fallbacks;
  const auto t6 = types_of(*f, "q6_k", &fallbacks);
  EXPECT_EQ(t6.at(blk(0, "attn_q")), GgmlType::Q8_0);
  EXPECT_EQ(t6.at("output.weight"), GgmlType::Q8_0);
  EXPECT_FALSE(fallbacks.empty());
  const auto t4 = types_of(*f, "q4_k_m");
  EXPECT_EQ(t4.at(blk(0, "attn_q")), GgmlType::Q5_0);
  EXPECT_EQ(types_of(*f, "q5_k_m").at(blk(0, "attn_q")), GgmlType::Q5_1);
  EXPECT_EQ(t4.at(blk(1, "attn_v")), GgmlType::Q8_0);  // wanted Q6_K
  EXPECT_EQ(quant_fallback_type(GgmlType::Q6_K, 40), GgmlType::F16);  // not even 32-blocks
  EXPECT_EQ(quant_fallback_type(GgmlType::IQ4_XS, 96), GgmlType::IQ4_NL);
  EXPECT_EQ(quant_fallback_type(GgmlType::Q3_K, 96), GgmlType::Q4_0);
}

}  // namespace
}  // namespace tsr::quant
