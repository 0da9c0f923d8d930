// llama.cpp's importance matrix files: the GGUF format round-trips and normalizes as
// llama-quantize does (sums / tokens per expert, 1 for an expert no token reached); the
// legacy format reads with its optional trailer; malformed files are refused by name
// before anything they claim is allocated.
#include "core/quant/imatrix.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "core/model/gguf_writer.h"
#include "tests/common/scratch_dir.h"

namespace tsr::quant {
namespace {

namespace fs = std::filesystem;

const fs::path& dir() {
  static const testing::ScratchDir d("tessera_imatrix_test");
  return d.path();
}

std::string error_of(const std::string& path) {
  try {
    imatrix_read(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Bytes of the legacy format, written field by field.
class Legacy {
 public:
  Legacy& i32(int32_t v) { return raw(&v, 4); }
  Legacy& str(const std::string& s) { return i32(int32_t(s.size())).raw(s.data(), s.size()); }
  Legacy& floats(const std::vector<float>& v) { return raw(v.data(), v.size() * 4); }
  std::string write(const std::string& name) const {
    const std::string path = (dir() / name).string();
    std::ofstream(path, std::ios::binary).write(bytes_.data(), std::streamsize(bytes_.size()));
    return path;
  }

 private:
  Legacy& raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string bytes_;
};

TEST(Imatrix, GgufRoundTripsAndNormalizesPerExpert) {
  Imatrix m;
  m.datasets = {"calib.txt"};
  m.chunk_count = 3, m.chunk_size = 512;
  m.entries["blk.0.attn_q.weight"] = {{4, 8, 12, 16}, {4}};
  m.entries["blk.0.ffn_up_exps.weight"] = {{2, 4, 6, 8, 10, 12}, {2, 0, 3}};  // 3 experts of 2 columns
  const std::string path = (dir() / "m.gguf").string();
  imatrix_write(m, path);
  const Imatrix r = imatrix_read(path);
  EXPECT_FALSE(r.legacy);
  EXPECT_EQ(r.datasets, m.datasets);
  EXPECT_EQ(r.chunk_count, 3);
  EXPECT_EQ(r.chunk_size, 512);
  ASSERT_EQ(r.entries.size(), 2u);
  EXPECT_EQ(r.entries.at("blk.0.ffn_up_exps.weight").counts, (std::vector<int64_t>{2, 0, 3}));
  const auto imp = imatrix_importances(r);
  EXPECT_EQ(imp.at("blk.0.attn_q.weight"), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(imp.at("blk.0.ffn_up_exps.weight"), (std::vector<float>{1, 2, 1, 1, 10.0f / 3, 4}));
}

TEST(Imatrix, LegacyFormatWithItsTrailer) {
  const std::string path = Legacy()
                               .i32(2)
                               .str("blk.0.attn_q.weight").i32(4).i32(2).floats({8, 12})
                               .str("blk.0.ffn_down.weight").i32(0).i32(1).floats({5})
                               .i32(10).str("wiki.train.raw")
                               .write("legacy.dat");
  const Imatrix r = imatrix_read(path);
  EXPECT_TRUE(r.legacy);
  EXPECT_EQ(r.chunk_count, 10);
  EXPECT_EQ(r.datasets, std::vector<std::string>{"wiki.train.raw"});
  const auto imp = imatrix_importances(r);
  EXPECT_EQ(imp.at("blk.0.attn_q.weight"), (std::vector<float>{2, 3}));
  EXPECT_EQ(imp.at("blk.0.ffn_down.weight"), std::vector<float>{5});  // ncall 0: the sums as stored
}

TEST(Imatrix, MalformedFilesAreRefusedByName) {
  // A value count of 2^31 - 1 in a file of a few bytes: refused before allocating 8 GB.
  EXPECT_NE(error_of(Legacy().i32(1).str("w").i32(1).i32(0x7fffffff).floats({1}).write("huge.dat")).find("truncated"),
            std::string::npos);
  EXPECT_NE(error_of(Legacy().i32(1).str("w").write("short.dat")).find("truncated importance matrix (reading a call count)"),
            std::string::npos);
  EXPECT_NE(error_of(Legacy().i32(1).i32(-5).write("neg.dat")).find("negative a name length"), std::string::npos);
  EXPECT_NE(error_of(Legacy().i32(1).str("w").i32(1).i32(2).floats({1, -1}).write("minus.dat")).find("w value 1 is -1"),
            std::string::npos);
  EXPECT_NE(error_of(Legacy().i32(0).write("empty.dat")).find("0 entries"), std::string::npos);
  EXPECT_NE(error_of((dir() / "absent.dat").string()).find("cannot open"), std::string::npos);

  GgufWriter no_meta;
  no_meta.add_string("general.type", "imatrix");
  no_meta.write((dir() / "no_meta.gguf").string());
  EXPECT_NE(error_of((dir() / "no_meta.gguf").string()).find("not an importance matrix"), std::string::npos);

  GgufWriter no_counts;
  no_counts.add_string_array("imatrix.datasets", {"t"});
  no_counts.add_u32("imatrix.chunk_count", 1);
  no_counts.add_u32("imatrix.chunk_size", 1);
  const float sums[2] = {1, 2};
  no_counts.add_tensor("w.in_sum2", GgmlType::F32, {2, 1}, {reinterpret_cast<const uint8_t*>(sums), sizeof sums});
  no_counts.write((dir() / "no_counts.gguf").string());
  EXPECT_NE(error_of((dir() / "no_counts.gguf").string()).find("imatrix entry w has sums but no counts"), std::string::npos);
}

TEST(Imatrix, FromCalibrationKeepsTheLayerWeights) {
  auto in = std::make_shared<InputStats>();
  in->cols = 2, in->tokens = 5, in->sq_sum = {10, 20};
  const Imatrix m = imatrix_from_calibration({{"blk.3.attn_q.weight", in}, {"output.weight", in}}, {"t.txt"}, 1, 5);
  ASSERT_EQ(m.entries.size(), 1u);
  EXPECT_EQ(imatrix_importances(m).at("blk.3.attn_q.weight"), (std::vector<float>{2, 4}));
}

}  // namespace
}  // namespace tsr::quant
