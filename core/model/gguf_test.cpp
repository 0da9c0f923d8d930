// Tests of the GGUF reader and writer: round trips of every value and tensor type, the two
// real files in ../shared/models, hand-built malformed files for each check the reader
// makes, and a deterministic corruption fuzz over the real files.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"

namespace tsr {
namespace {

const std::string kShared = TESSERA_SHARED_DIR;
const std::string kStories = kShared + "/models/stories260K.gguf";
const std::string kTinyRandom = kShared + "/models/llama-2-tiny-random.gguf";

// ---- value helpers ----------------------------------------------------------------------

GgufValue uint_value(GgufType t, uint64_t u) {
  GgufValue v;
  v.type = t;
  v.u64 = u;
  return v;
}

GgufValue int_value(GgufType t, int64_t i) {
  GgufValue v;
  v.type = t;
  v.i64 = i;
  return v;
}

GgufValue float_value(GgufType t, double f) {
  GgufValue v;
  v.type = t;
  v.f64 = f;
  return v;
}

GgufValue string_value(std::string s) {
  GgufValue v;
  v.type = GgufType::STRING;
  v.str = std::move(s);
  return v;
}

GgufValue array_value(GgufType element_type, std::vector<GgufValue> elements) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.array_type = element_type;
  v.array = std::move(elements);
  return v;
}

// Compares the fields that carry the value of `a`'s type.
bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case GgufType::STRING: return a.str == b.str;
    case GgufType::FLOAT32:
    case GgufType::FLOAT64: return a.f64 == b.f64;
    case GgufType::INT8:
    case GgufType::INT16:
    case GgufType::INT32:
    case GgufType::INT64: return a.i64 == b.i64;
    case GgufType::ARRAY:
      if (a.array_type != b.array_type || a.array.size() != b.array.size()) return false;
      for (size_t i = 0; i < a.array.size(); ++i) {
        if (!same_value(a.array[i], b.array[i])) return false;
      }
      return true;
    default: return a.u64 == b.u64;
  }
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::vector<uint8_t> bytes(std::filesystem::file_size(path));
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(bytes.data()), bytes.size());
  return bytes;
}

class TempFile {
 public:
  explicit TempFile(const std::string& stem)
      : path_(::testing::TempDir() + "tessera_gguf_" + stem + "_" + std::to_string(getpid()) +
              ".gguf") {}
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The message of the tsr::Error that parsing `bytes` throws; fails the test when it parses.
std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile::from_bytes(bytes, "bad.gguf");
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), TSR_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("bad.gguf"), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "malformed file parsed";
  return "";
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << part << "\" is not in: " << text;
}

#define EXPECT_PARSE_ERROR(bytes, part) EXPECT_TRUE(contains(parse_error(bytes), part))

// ---- raw builder for files the writer would refuse to produce ----------------------------

class RawGguf {
 public:
  RawGguf& u8(uint8_t v) { return put(v); }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& i64(int64_t v) { return put(v); }
  RawGguf& str(std::string_view s) {
    u64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
  }
  RawGguf& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  RawGguf& tensor(std::string_view name, const std::vector<int64_t>& ne, uint32_t type,
                  uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (const int64_t d : ne) i64(d);
    return u32(type).u64(offset);
  }
  RawGguf& pad(size_t alignment) {
    bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    bytes_.resize(bytes_.size() + n);
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  template <class T>
  RawGguf& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof v);
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

// A file with one tensor described by the arguments and `data_bytes` bytes of data.
std::vector<uint8_t> one_tensor_file(const std::vector<int64_t>& ne, uint32_t type = 0,
                                     uint64_t offset = 0, size_t data_bytes = 64) {
  return RawGguf().header(1, 0).tensor("w", ne, type, offset).pad(32).zeros(data_bytes).bytes();
}

// ---- round trips --------------------------------------------------------------------------

struct TensorCase {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;
  size_t nbytes;
};

const std::vector<TensorCase> kTensorCases = {
    {"f32", GgmlType::F32, {4, 3}, 4 * 3 * 4},
    {"f16", GgmlType::F16, {8, 2, 3}, 8 * 2 * 3 * 2},
    {"bf16", GgmlType::BF16, {16}, 16 * 2},
    {"q8_0", GgmlType::Q8_0, {64, 2}, 2 * 2 * 34},
    {"q4_0", GgmlType::Q4_0, {32, 3, 1, 2}, 3 * 2 * 18},
};

// Every value type once at top level, then arrays of each, nested and empty arrays.
std::vector<GgufKv> all_value_kinds() {
  std::vector<GgufKv> kv = {
      {"t.u8", uint_value(GgufType::UINT8, 255)},
      {"t.i8", int_value(GgufType::INT8, -128)},
      {"t.u16", uint_value(GgufType::UINT16, 65535)},
      {"t.i16", int_value(GgufType::INT16, -32768)},
      {"t.u32", uint_value(GgufType::UINT32, 4000000000u)},
      {"t.i32", int_value(GgufType::INT32, -2000000000)},
      {"t.f32", float_value(GgufType::FLOAT32, 0.1f)},
      {"t.bool", uint_value(GgufType::BOOL, 1)},
      {"t.string", string_value("h\xc3\xa9llo\n\"world\"")},
      {"t.u64", uint_value(GgufType::UINT64, std::numeric_limits<uint64_t>::max())},
      {"t.i64", int_value(GgufType::INT64, std::numeric_limits<int64_t>::min())},
      {"t.f64", float_value(GgufType::FLOAT64, 1e300)},
      {"t.empty_string", string_value("")},
      {"t.empty_array", array_value(GgufType::FLOAT64, {})},
  };
  for (const GgufKv& scalar : std::vector<GgufKv>(kv.begin(), kv.begin() + 12)) {
    kv.push_back({"a." + scalar.key.substr(2),
                  array_value(scalar.value.type, {scalar.value, scalar.value, scalar.value})});
  }
  const GgufValue inner = array_value(GgufType::STRING, {string_value("x"), string_value("yz")});
  const GgufValue middle = array_value(GgufType::ARRAY, {inner, array_value(GgufType::STRING, {})});
  kv.push_back({"nested.three_levels", array_value(GgufType::ARRAY, {middle, middle})});
  GgufValue deepest = uint_value(GgufType::UINT8, 7);
  for (int depth = 0; depth < 16; ++depth) {
    deepest = array_value(deepest.type, {deepest});
  }
  kv.push_back({"nested.sixteen_levels", deepest});
  return kv;
}

void add_everything(GgufWriter& w, uint32_t alignment) {
  w.set_alignment(alignment);
  for (const GgufKv& kv : all_value_kinds()) w.add(kv.key, kv.value);
  uint32_t seed = 1;
  for (const TensorCase& t : kTensorCases) {
    w.add_tensor(t.name, t.type, t.ne, random_bytes(t.nbytes, seed++));
  }
}

void expect_everything(const GgufFile& f, uint32_t alignment) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), alignment);
  const std::vector<GgufKv> expected = all_value_kinds();
  const size_t extra = alignment != 32 ? 1 : 0;  // general.alignment, written last
  ASSERT_EQ(f.metadata().size(), expected.size() + extra);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].key, expected[i].key);
    EXPECT_TRUE(same_value(f.metadata()[i].value, expected[i].value)) << expected[i].key;
  }
  ASSERT_EQ(f.tensors().size(), kTensorCases.size());
  uint32_t seed = 1;
  for (const TensorCase& c : kTensorCases) {
    const GgufTensorInfo* t = f.find_tensor(c.name);
    ASSERT_NE(t, nullptr) << c.name;
    EXPECT_EQ(t->type, c.type);
    EXPECT_EQ(t->ne, c.ne);
    EXPECT_EQ(t->nbytes, c.nbytes);
    EXPECT_EQ(t->offset % alignment, 0u);
    // In memory, as aligned as the file up to a page (what a mapping guarantees).
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.tensor_data(*t)) % std::min(alignment, 4096u), 0u)
        << c.name;
    const std::vector<uint8_t> data = random_bytes(c.nbytes, seed++);
    EXPECT_EQ(std::memcmp(f.tensor_data(*t), data.data(), data.size()), 0) << c.name;
  }
}

TEST(GgufRoundTrip, FromBytesEveryValueAndTensorType) {
  for (const uint32_t alignment : {32u, 64u, 1u, 8192u}) {
    SCOPED_TRACE(alignment);
    GgufWriter w;
    add_everything(w, alignment);
    const std::vector<uint8_t> bytes = w.to_bytes();
    EXPECT_EQ(bytes.size() % alignment, 0u);
    expect_everything(*GgufFile::from_bytes(bytes, "memory"), alignment);
  }
}

TEST(GgufRoundTrip, WriteThenOpen) {
  TempFile tmp("roundtrip");
  GgufWriter w;
  add_everything(w, 64);
  w.write(tmp.path());
  const auto f = GgufFile::open(tmp.path());
  EXPECT_EQ(f->path(), tmp.path());
  EXPECT_EQ(f->file_size(), std::filesystem::file_size(tmp.path()));
  expect_everything(*f, 64);
}

TEST(GgufRoundTrip, TypedAddersAndGetters) {
  GgufWriter w;
  w.add_string("s", "text");
  w.add_u32("u", 7);
  w.add_i32("i", -7);
  w.add_f32("f", 2.5f);
  w.add_bool("b", true);
  w.add_string_array("sa", {"a", "", "c"});
  w.add_f32_array("fa", {1.5f, -0.25f});
  w.add_i32_array("ia", {1, -2, 2147483647});
  const auto f = GgufFile::from_bytes(w.to_bytes(), "memory");
  EXPECT_EQ(f->get_string("s"), "text");
  EXPECT_EQ(f->get_u32("u"), 7u);
  EXPECT_EQ(f->get_int("i"), -7);
  EXPECT_EQ(f->get_float("f"), 2.5);
  EXPECT_EQ(f->get_bool("b"), true);
  EXPECT_EQ(f->get_string_array("sa"), (std::vector<std::string>{"a", "", "c"}));
  EXPECT_EQ(f->get_f32_array("fa"), (std::vector<float>{1.5f, -0.25f}));
  EXPECT_EQ(f->get_i32_array("ia"), (std::vector<int32_t>{1, -2, 2147483647}));
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufRoundTrip, EmptyFile) {
  const std::vector<uint8_t> bytes = GgufWriter().to_bytes();
  EXPECT_EQ(bytes.size(), 32u);  // 24-byte header padded to the alignment
  const auto f = GgufFile::from_bytes(bytes, "memory");
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_TRUE(f->tensors().empty());
}

// ---- typed getters --------------------------------------------------------------------------

std::unique_ptr<GgufFile> getter_file() {
  GgufWriter w;
  w.add("u8", uint_value(GgufType::UINT8, 200));
  w.add("i8", int_value(GgufType::INT8, -3));
  w.add("u64_big", uint_value(GgufType::UINT64, 1ull << 63));
  w.add("u64_small", uint_value(GgufType::UINT64, 1ull << 32));
  w.add("i64_neg", int_value(GgufType::INT64, -1));
  w.add("f64", float_value(GgufType::FLOAT64, 0.125));
  w.add("str", string_value("x"));
  w.add("bool", uint_value(GgufType::BOOL, 0));
  w.add("u8_array", array_value(GgufType::UINT8, {uint_value(GgufType::UINT8, 255)}));
  w.add("i64_array", array_value(GgufType::INT64, {int_value(GgufType::INT64, -5),
                                                   int_value(GgufType::INT64, 1ll << 40)}));
  w.add("u64_array", array_value(GgufType::UINT64, {uint_value(GgufType::UINT64, 1ull << 31)}));
  w.add("f64_array", array_value(GgufType::FLOAT64, {float_value(GgufType::FLOAT64, 1)}));
  w.add("nested", array_value(GgufType::ARRAY, {array_value(GgufType::STRING, {})}));
  return GgufFile::from_bytes(w.to_bytes(), "getters.gguf");
}

std::string getter_error(const std::function<void()>& get) {
  try {
    get();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "getter did not throw";
  return "";
}

TEST(GgufGetters, IntegersConvertWhenInRange) {
  const auto f = getter_file();
  EXPECT_EQ(f->get_int("u8"), 200);
  EXPECT_EQ(f->get_u32("u8"), 200u);
  EXPECT_EQ(f->get_int("i8"), -3);
  EXPECT_EQ(f->get_int("u64_small"), int64_t{1} << 32);
  EXPECT_EQ(f->get_int("i64_neg"), -1);
  EXPECT_EQ(f->get_int("missing"), std::nullopt);
  EXPECT_EQ(f->get_u32("missing"), std::nullopt);
  EXPECT_TRUE(contains(getter_error([&] { f->get_u32("i8"); }), "does not fit in uint32"));
  EXPECT_TRUE(contains(getter_error([&] { f->get_u32("u64_small"); }), "does not fit in uint32"));
  EXPECT_TRUE(contains(getter_error([&] { f->get_int("u64_big"); }), "does not fit in int64"));
  EXPECT_TRUE(contains(getter_error([&] { f->get_int("str"); }), "'str' has type string"));
  EXPECT_TRUE(contains(getter_error([&] { f->get_int("bool"); }), "expected an integer"));
  EXPECT_TRUE(contains(getter_error([&] { f->get_int("f64"); }), "getters.gguf"));
}

TEST(GgufGetters, OtherScalars) {
  const auto f = getter_file();
  EXPECT_EQ(f->get_float("f64"), 0.125);
  EXPECT_EQ(f->get_string("str"), "x");
  EXPECT_EQ(f->get_bool("bool"), false);
  EXPECT_EQ(f->get_float("missing"), std::nullopt);
  EXPECT_EQ(f->get_string("missing"), std::nullopt);
  EXPECT_EQ(f->get_bool("missing"), std::nullopt);
  EXPECT_EQ(f->find("missing"), nullptr);
  EXPECT_TRUE(contains(getter_error([&] { f->get_float("u8"); }), "expected a float"));
  EXPECT_TRUE(contains(getter_error([&] { f->get_string("u8"); }), "expected string"));
  EXPECT_TRUE(contains(getter_error([&] { f->get_bool("u8"); }), "expected bool"));
}

TEST(GgufGetters, Arrays) {
  const auto f = getter_file();
  EXPECT_EQ(f->get_i32_array("u8_array"), std::vector<int32_t>{255});
  EXPECT_EQ(f->get_i32_array("missing"), std::nullopt);
  EXPECT_TRUE(contains(getter_error([&] { f->get_i32_array("i64_array"); }),
                       "element 1 (1099511627776) does not fit in int32"));
  EXPECT_TRUE(contains(getter_error([&] { f->get_i32_array("u64_array"); }), "does not fit"));
  EXPECT_TRUE(
      contains(getter_error([&] { f->get_i32_array("f64_array"); }), "is an array of float64"));
  EXPECT_TRUE(contains(getter_error([&] { f->get_i32_array("u8"); }), "has type uint8"));
  EXPECT_TRUE(contains(getter_error([&] { f->get_f32_array("f64_array"); }),
                       "expected an array of float32"));
  EXPECT_TRUE(
      contains(getter_error([&] { f->get_string_array("nested"); }), "is an array of array"));
}

// ---- rendering ----------------------------------------------------------------------------

TEST(GgufRender, TypeNames) {
  EXPECT_STREQ(gguf_type_name(GgufType::UINT8), "uint8");
  EXPECT_STREQ(gguf_type_name(GgufType::FLOAT64), "float64");
  EXPECT_STREQ(gguf_type_name(GgufType::ARRAY), "array");
  EXPECT_STREQ(gguf_type_name(static_cast<GgufType>(99)), "unknown");
}

TEST(GgufRender, Values) {
  EXPECT_EQ(gguf_value_to_string(uint_value(GgufType::UINT32, 42)), "42");
  EXPECT_EQ(gguf_value_to_string(int_value(GgufType::INT8, -5)), "-5");
  EXPECT_EQ(gguf_value_to_string(float_value(GgufType::FLOAT32, 1e-5f)), "1e-05");
  EXPECT_EQ(gguf_value_to_string(float_value(GgufType::FLOAT64, 0.5)), "0.5");
  EXPECT_EQ(gguf_value_to_string(uint_value(GgufType::BOOL, 1)), "true");
  EXPECT_EQ(gguf_value_to_string(string_value("a\"b\\\n\x01")), R"("a\"b\\\n\x01")");
}

TEST(GgufRender, ArraysAreAbbreviated) {
  std::vector<GgufValue> items;
  for (uint64_t i = 0; i < 10; ++i) items.push_back(uint_value(GgufType::UINT8, i));
  const GgufValue a = array_value(GgufType::UINT8, items);
  EXPECT_EQ(gguf_value_to_string(a, 3), "[0, 1, 2, ... (10 items)]");
  EXPECT_EQ(gguf_value_to_string(a, 0), "[... (10 items)]");
  EXPECT_EQ(gguf_value_to_string(a, 10), "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]");
  EXPECT_EQ(gguf_value_to_string(array_value(GgufType::STRING, {})), "[]");
  const GgufValue nested = array_value(GgufType::ARRAY, {a, a});
  EXPECT_EQ(gguf_value_to_string(nested, 1), "[[0, ... (10 items)], ... (2 items)]");
}

// ---- writer validation --------------------------------------------------------------------

std::string writer_error(const std::function<void(GgufWriter&)>& misuse) {
  GgufWriter w;
  try {
    misuse(w);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "writer accepted it";
  return "";
}

TEST(GgufWriterValidation, RefusesBadTensors) {
  const std::vector<uint8_t> data(64);
  EXPECT_TRUE(contains(writer_error([&](GgufWriter& w) {
                         w.add_tensor("t", GgmlType::F32, {4, 4}, std::span(data).first(60));
                       }),
                       "shape needs 64 bytes of F32, data has 60"));
  EXPECT_TRUE(
      contains(writer_error([&](GgufWriter& w) { w.add_tensor("t", GgmlType::Q8_0, {16}, data); }),
               "not a multiple of the Q8_0 block size 32"));
  EXPECT_TRUE(
      contains(writer_error([&](GgufWriter& w) { w.add_tensor("t", GgmlType::F32, {}, data); }),
               "dimension count 0"));
  EXPECT_TRUE(contains(writer_error([&](GgufWriter& w) {
                         w.add_tensor("t", GgmlType::F32, {1, 1, 1, 1, 16}, data);
                       }),
                       "dimension count 5"));
  EXPECT_TRUE(contains(writer_error([&](GgufWriter& w) {
                         w.add_tensor("t", GgmlType::F32, {16, 0}, data);
                       }),
                       "must be positive"));
  EXPECT_TRUE(
      contains(writer_error([&](GgufWriter& w) {
                 w.add_tensor("t", GgmlType::F32, {int64_t{1} << 40, int64_t{1} << 40}, data);
               }),
               "element count overflows"));
  EXPECT_TRUE(contains(
      writer_error([&](GgufWriter& w) { w.add_tensor("t", static_cast<GgmlType>(4), {16}, data); }),
      "unknown type 4"));
  EXPECT_TRUE(contains(writer_error([&](GgufWriter& w) {
                         w.add_tensor("t", GgmlType::F32, {16}, data);
                         w.add_tensor("t", GgmlType::F32, {16}, data);
                       }),
                       "duplicate tensor name 't'"));
}

TEST(GgufWriterValidation, RefusesBadMetadata) {
  EXPECT_TRUE(contains(writer_error([](GgufWriter& w) {
                         w.add_u32("k", 1);
                         w.add_u32("k", 2);
                       }),
                       "duplicate metadata key 'k'"));
  EXPECT_TRUE(
      contains(writer_error([](GgufWriter& w) { w.add_u32("", 1); }), "empty metadata key"));
  EXPECT_TRUE(contains(writer_error([](GgufWriter& w) { w.add_u32("general.alignment", 64); }),
                       "set_alignment"));
  EXPECT_TRUE(contains(writer_error([](GgufWriter& w) { w.set_alignment(48); }),
                       "alignment 48 is not a power of two"));
  EXPECT_TRUE(contains(writer_error([](GgufWriter& w) { w.set_alignment(0); }), "alignment 0"));
  EXPECT_TRUE(contains(writer_error([](GgufWriter& w) { w.set_alignment(2u << 20); }), "alignment 2097152"));
  EXPECT_TRUE(
      contains(writer_error([](GgufWriter& w) { w.add("k", uint_value(GgufType::UINT8, 256)); }),
               "out of range for uint8"));
  EXPECT_TRUE(contains(writer_error([](GgufWriter& w) {
                         w.add("k", array_value(GgufType::INT32, {string_value("x")}));
                       }),
                       "array of int32 holds a string element"));
  EXPECT_TRUE(contains(
      writer_error([](GgufWriter& w) { w.add("k", uint_value(static_cast<GgufType>(13), 0)); }),
      "invalid value type 13"));
  GgufValue deep = uint_value(GgufType::UINT8, 0);
  for (int depth = 0; depth < 17; ++depth) deep = array_value(deep.type, {deep});
  EXPECT_TRUE(contains(writer_error([&](GgufWriter& w) { w.add("k", deep); }), "nested deeper"));
}

TEST(GgufWriterValidation, WriteToBadPathIsAnIoError) {
  try {
    GgufWriter().write("/nonexistent-dir/x.gguf");
    ADD_FAILURE() << "write succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), TSR_STATUS_IO_ERROR);
    EXPECT_TRUE(contains(std::string(e.what()), "/nonexistent-dir/x.gguf"));
  }
}

// ---- open() failures ----------------------------------------------------------------------

Error open_error(const std::string& path) {
  try {
    GgufFile::open(path);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << path << " opened";
  return Error("");
}

TEST(GgufOpen, MissingFileIsAnIoError) {
  const Error e = open_error("/nonexistent-dir/model.gguf");
  EXPECT_EQ(e.status(), TSR_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(std::string(e.what()), "/nonexistent-dir/model.gguf: cannot open"));
}

TEST(GgufOpen, DirectoryIsAnIoError) {
  const Error e = open_error(::testing::TempDir());
  EXPECT_EQ(e.status(), TSR_STATUS_IO_ERROR);
  EXPECT_TRUE(contains(std::string(e.what()), "not a regular file"));
}

TEST(GgufOpen, EmptyFileIsTruncated) {
  TempFile tmp("empty");
  std::ofstream(tmp.path()).close();
  const Error e = open_error(tmp.path());
  EXPECT_EQ(e.status(), TSR_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(std::string(e.what()), "truncated"));
}

// ---- hand-built malformed files -----------------------------------------------------------

TEST(GgufMalformed, Header) {
  EXPECT_PARSE_ERROR(std::vector<uint8_t>{},
                     "truncated file: unexpected end of file reading magic");
  EXPECT_PARSE_ERROR(RawGguf().u32(0x46554748).u32(3).u64(0).u64(0).bytes(), "bad magic");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 0, 1).bytes(), "version 1 is not supported");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 0, 99).bytes(), "unsupported GGUF version 99");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 0, 0x03000000).bytes(), "big-endian");
  EXPECT_PARSE_ERROR(RawGguf().u32(0x46554747).u32(3).u64(0).bytes(),
                     "end of file reading metadata count");
  EXPECT_EQ(GgufFile::from_bytes(RawGguf().header(0, 0, 2).bytes(), "v2")->version(), 2u);
}

TEST(GgufMalformed, AbsurdCounts) {
  for (const uint64_t n : {uint64_t{1} << 31, ~uint64_t{0}, uint64_t{1000}}) {
    EXPECT_PARSE_ERROR(RawGguf().header(0, n).kv_u32("a", 1).bytes(),
                       std::to_string(n) + " metadata entries and 0 tensor infos cannot fit");
  }
  EXPECT_PARSE_ERROR(RawGguf().header(1000, 0).tensor("w", {8}, 0, 0).bytes(),
                     "1000 tensor infos cannot fit");
  EXPECT_PARSE_ERROR(RawGguf().header(~uint64_t{0}, 0).bytes(),
                     "tensor count 18446744073709551615 exceeds the limit of 1048576");
  EXPECT_PARSE_ERROR(RawGguf().header((1 << 20) + 1, 0).bytes(), "exceeds the limit");
}

// Values cost far more memory parsed than in the file, so their number is capped even when
// the file holds them: here 2 keys + 2 elements + 2^22 - 1 elements, one over the limit.
TEST(GgufMalformed, MetadataValueLimit) {
  const uint64_t n = (uint64_t{1} << 22) - 1;
  RawGguf r;
  r.header(0, 2).str("a").u32(9).u32(0).u64(2).zeros(2).str("b").u32(9).u32(0).u64(n).zeros(n);
  EXPECT_PARSE_ERROR(r.bytes(), "metadata holds more than 4194304 values");
}

TEST(GgufMalformed, StringsAndArrays) {
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).u64(1000).zeros(16).bytes(),
                     "metadata key of 1000 bytes runs past the end of file (16 bytes left)");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).u64(~uint64_t{0}).zeros(16).bytes(),
                     "metadata key of 18446744073709551615 bytes is longer than the limit");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(8).u64(100).str("short").bytes(),
                     "string of 100 bytes runs past the end of file");
  // An array of uint32 whose count needs 4 bytes per element; 16 bytes follow.
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(9).u32(4).u64(5).zeros(16).bytes(),
                     "array of 5 uint32 elements cannot fit in the 16 bytes left");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(9).u32(8).u64(uint64_t{1} << 61).bytes(),
                     "cannot fit");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(9).u32(8).u64(1).u64(5).u8('a').bytes(),
                     "string of 5 bytes runs past the end of file");
}

TEST(GgufMalformed, ValueTypes) {
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(13).zeros(8).bytes(),
                     "invalid metadata value type 13");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(9).u32(0xFFFFFFFF).u64(0).bytes(),
                     "invalid metadata value type 4294967295");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("k").u32(7).u8(2).bytes(), "invalid bool value 2");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("").u32(0).u8(0).bytes(), "empty metadata key");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 2).kv_u32("a", 1).kv_u32("a", 2).bytes(),
                     "duplicate metadata key 'a'");
}

// `levels` arrays nested inside each other around one uint8.
std::vector<uint8_t> nested_arrays(int levels) {
  RawGguf r;
  r.header(0, 1).str("deep").u32(9);
  for (int i = 1; i < levels; ++i) r.u32(9).u64(1);
  return r.u32(0).u64(1).u8(42).bytes();
}

TEST(GgufMalformed, NestingDepth) {
  EXPECT_EQ(GgufFile::from_bytes(nested_arrays(16), "ok")->metadata().size(), 1u);
  EXPECT_PARSE_ERROR(nested_arrays(17), "arrays nested deeper than 16 levels");
  EXPECT_PARSE_ERROR(nested_arrays(100000), "nested deeper");
}

TEST(GgufMalformed, Alignment) {
  for (const uint32_t a : {0u, 3u, 48u, 2u << 20}) {
    EXPECT_PARSE_ERROR(
        RawGguf().header(0, 1).kv_u32("general.alignment", a).bytes(),
        "general.alignment must be a power of two from 1 to 1048576, got uint32 " + std::to_string(a));
  }
  EXPECT_PARSE_ERROR(
      RawGguf().header(0, 1).str("general.alignment").u32(10).u64(uint64_t{1} << 32).bytes(),
      "alignment");
  EXPECT_PARSE_ERROR(RawGguf().header(0, 1).str("general.alignment").u32(8).str("32").bytes(),
                     "general.alignment must be a power of two from 1 to 1048576, got string");
  const auto f = GgufFile::from_bytes(RawGguf()
                                          .header(1, 1)
                                          .kv_u32("general.alignment", 64)
                                          .tensor("w", {4}, 0, 64)
                                          .pad(64)
                                          .zeros(128)
                                          .bytes(),
                                      "aligned64");
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->tensors()[0].offset, 64u);
}

TEST(GgufMalformed, Dimensions) {
  EXPECT_PARSE_ERROR(one_tensor_file({}), "tensor 'w': dimension count 0 is not in 1..4");
  EXPECT_PARSE_ERROR(one_tensor_file({1, 1, 1, 1, 1}), "dimension count 5");
  EXPECT_PARSE_ERROR(RawGguf().header(1, 0).str("w").u32(0xFFFFFFFF).zeros(64).bytes(),
                     "dimension count");
  EXPECT_PARSE_ERROR(one_tensor_file({4, 0}), "tensor 'w': dimension 1 is 0, must be positive");
  EXPECT_PARSE_ERROR(one_tensor_file({-4}), "dimension 0 is -4, must be positive");
  EXPECT_PARSE_ERROR(one_tensor_file({int64_t{1} << 32, int64_t{1} << 32}),
                     "element count overflows");
  EXPECT_PARSE_ERROR(one_tensor_file({int64_t{1} << 31, int64_t{1} << 31}), "byte size overflows");
  EXPECT_PARSE_ERROR(one_tensor_file({33}, static_cast<uint32_t>(GgmlType::Q8_0)),
                     "ne[0] = 33 is not a multiple of the Q8_0 block size 32");
  EXPECT_PARSE_ERROR(one_tensor_file({128}, static_cast<uint32_t>(GgmlType::Q4_K)),
                     "block size 256");
}

TEST(GgufMalformed, TensorTypes) {
  EXPECT_PARSE_ERROR(one_tensor_file({8}, 4), "tensor 'w' has unknown type 4");
  EXPECT_PARSE_ERROR(one_tensor_file({8}, 99), "tensor 'w' has unknown type 99");
  EXPECT_PARSE_ERROR(one_tensor_file({8}, 0xFFFFFFFF), "unknown type 4294967295");
}

TEST(GgufMalformed, TypeTraits) {
  const std::vector<std::tuple<GgmlType, uint32_t, uint32_t>> expected = {
      {GgmlType::F32, 1, 4},      {GgmlType::F16, 1, 2},      {GgmlType::BF16, 1, 2},
      {GgmlType::Q4_0, 32, 18},   {GgmlType::Q4_1, 32, 20},   {GgmlType::Q5_0, 32, 22},
      {GgmlType::Q5_1, 32, 24},   {GgmlType::Q8_0, 32, 34},   {GgmlType::Q8_1, 32, 36},
      {GgmlType::Q2_K, 256, 84},  {GgmlType::Q3_K, 256, 110}, {GgmlType::Q4_K, 256, 144},
      {GgmlType::Q5_K, 256, 176}, {GgmlType::Q6_K, 256, 210}, {GgmlType::Q8_K, 256, 292},
      {GgmlType::I8, 1, 1},       {GgmlType::I16, 1, 2},      {GgmlType::I32, 1, 4},
      {GgmlType::I64, 1, 8},      {GgmlType::F64, 1, 8},      {GgmlType::IQ4_NL, 32, 18},
      {GgmlType::IQ4_XS, 256, 136}, {GgmlType::MXFP4, 32, 17},
  };
  for (const auto& [type, elems, bytes] : expected) {
    const auto traits = ggml_type_traits(static_cast<uint32_t>(type));
    ASSERT_TRUE(traits.has_value()) << static_cast<uint32_t>(type);
    EXPECT_EQ(traits->block_elems, elems) << traits->name;
    EXPECT_EQ(traits->block_bytes, bytes) << traits->name;
  }
  EXPECT_FALSE(ggml_type_traits(5).has_value());
  EXPECT_FALSE(ggml_type_traits(29).has_value());
}

TEST(GgufMalformed, Offsets) {
  EXPECT_PARSE_ERROR(one_tensor_file({4}, 0, 4),
                     "tensor 'w': data offset 4 is not a multiple of the alignment 32");
  EXPECT_PARSE_ERROR(one_tensor_file({1000}),
                     "tensor 'w': data at offset 0 of 4000 bytes runs past the end of file");
  EXPECT_PARSE_ERROR(one_tensor_file({4}, 0, 64), "runs past the end of file");
  EXPECT_PARSE_ERROR(one_tensor_file({4}, 0, uint64_t{1} << 63), "runs past the end of file");
  EXPECT_PARSE_ERROR(one_tensor_file({4}, 0, ~uint64_t{31}), "runs past the end of file");
  // The tensor infos end unaligned at the end of the file: the data section is past it.
  EXPECT_PARSE_ERROR(RawGguf().header(1, 0).tensor("w", {4}, 0, 0).bytes(),
                     "data section starts at");
  // Exactly at the end is fine.
  EXPECT_EQ(GgufFile::from_bytes(one_tensor_file({16}), "exact")->tensors()[0].nbytes, 64u);
}

TEST(GgufMalformed, OverlappingTensorsAreAllowedDuplicateNamesAreNot) {
  const auto f = GgufFile::from_bytes(RawGguf()
                                          .header(2, 0)
                                          .tensor("a", {16}, 0, 0)
                                          .tensor("b", {8}, 0, 32)
                                          .pad(32)
                                          .zeros(64)
                                          .bytes(),
                                      "overlap");
  EXPECT_EQ(f->tensor_data(*f->find_tensor("a")) + 32, f->tensor_data(*f->find_tensor("b")));
  EXPECT_PARSE_ERROR(RawGguf()
                         .header(2, 0)
                         .tensor("a", {8}, 0, 0)
                         .tensor("a", {8}, 0, 0)
                         .pad(32)
                         .zeros(32)
                         .bytes(),
                     "duplicate tensor name 'a'");
}

// ---- real files -----------------------------------------------------------------------------

#define SKIP_IF_ABSENT(path)                                                      \
  if (!std::filesystem::exists(path)) {                                           \
    GTEST_SKIP() << (path)                                                        \
                 << " is absent: the shared test data (../shared/models) is not " \
                    "available next to this checkout";                            \
  }

TEST(GgufRealFiles, Stories260K) {
  SKIP_IF_ABSENT(kStories);
  const auto f = GgufFile::open(kStories);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(f->get_u32("llama.block_count"), 5u);
  EXPECT_EQ(f->get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float("llama.attention.layer_norm_rms_epsilon")),
                  1e-5f);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(f->get_i32_array("tokenizer.ggml.token_type")->size(), 512u);
  EXPECT_EQ(f->tensors().size(), 48u);
  const GgufTensorInfo* embd = f->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->ne, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(embd->type, GgmlType::F32);
  EXPECT_EQ(embd->nbytes, 64u * 512 * 4);
  const GgufTensorInfo* last = f->find_tensor("blk.4.ffn_norm.weight");
  ASSERT_NE(last, nullptr);
  // The data section (aligned after the infos at 14282) runs to the end of the file.
  EXPECT_EQ(last->offset + last->nbytes, 1171200u);
  const std::vector<uint8_t> raw = read_file(kStories);
  ASSERT_EQ(raw.size(), f->file_size());
  EXPECT_EQ(std::memcmp(f->tensor_data(*embd), raw.data() + 14304, embd->nbytes), 0);
}

TEST(GgufRealFiles, TinyRandom) {
  SKIP_IF_ABSENT(kTinyRandom);
  const auto f = GgufFile::open(kTinyRandom);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_u32("llama.embedding_length"), 8u);
  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(tokens->size(), 32000u);
  EXPECT_EQ((*tokens)[1], "<s>");
  const GgufTensorInfo* embd = f->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GgmlType::F16);
  EXPECT_EQ(embd->ne, (std::vector<int64_t>{8, 32000}));
  EXPECT_EQ(f->find_tensor("output_norm.weight")->type, GgmlType::F32);
}

// ---- corruption fuzz ----------------------------------------------------------------------

// A fixed-width field of a GGUF file: a count, length, type, dimension or offset.
struct Field {
  size_t pos;
  size_t width;
};

struct GgufLayout {
  std::vector<Field> fields;           // structural fields outside array elements
  std::vector<Field> element_lengths;  // lengths of strings inside arrays (vocabularies)
  std::vector<Field> tensor_offsets;
  size_t header_end = 0;  // end of the tensor infos
};

// Walks a well-formed GGUF file independently of the reader and records where each
// structural field lies, so that the fuzz can corrupt exactly those.
class LayoutScanner {
 public:
  explicit LayoutScanner(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}

  GgufLayout scan() {
    pos_ = 8;  // magic and version are corrupted separately
    const uint64_t n_tensors = field(8);
    const uint64_t n_kv = field(8);
    for (uint64_t i = 0; i < n_kv; ++i) {
      pos_ += field(8);  // key
      value(static_cast<uint32_t>(field(4)), false);
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
      pos_ += field(8);  // name
      const uint64_t n_dims = field(4);
      for (uint64_t d = 0; d < n_dims; ++d) field(8);
      field(4);
      layout_.tensor_offsets.push_back({pos_, 8});
      field(8);
    }
    layout_.header_end = pos_;
    return layout_;
  }

 private:
  uint64_t field(size_t width, bool array_element = false) {
    (array_element ? layout_.element_lengths : layout_.fields).push_back({pos_, width});
    if (pos_ + width > bytes_.size()) throw std::runtime_error("layout scan ran off the file");
    uint64_t v = 0;
    std::memcpy(&v, bytes_.data() + pos_, width);
    pos_ += width;
    return v;
  }

  void value(uint32_t type, bool array_element) {
    static constexpr size_t kScalarSizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == static_cast<uint32_t>(GgufType::STRING)) {
      pos_ += field(8, array_element);
    } else if (type == static_cast<uint32_t>(GgufType::ARRAY)) {
      const auto element_type = static_cast<uint32_t>(field(4));
      const uint64_t count = field(8);
      for (uint64_t i = 0; i < count; ++i) value(element_type, true);
    } else {
      pos_ += kScalarSizes[type];
    }
  }

  const std::vector<uint8_t>& bytes_;
  GgufLayout layout_;
  size_t pos_ = 0;
};

// How many variants of each kind. A variant costs about one parse up to the corruption;
// the tiny-random file's metadata is 60 times larger (a 32000-token vocabulary), so it gets
// fewer variants past its header, to keep the fuzz within seconds under ASan.
struct FuzzPlan {
  size_t dense_truncation;             // every length up to this
  int sampled_truncations;             // then this many random lengths
  int byte_flips;                      // random bytes in the header region xored
  int word_writes;                     // random 4/8-byte words in the header region overwritten
  size_t fields;                       // structural fields overwritten (all when there are fewer)
  int element_lengths;                 // string lengths inside arrays overwritten
  std::vector<uint64_t> field_values;  // written into each chosen field
};

const std::vector<uint64_t> kManyFieldValues = {~uint64_t{0}, uint64_t{1} << 63, uint64_t{1} << 31,
                                                0};
const std::vector<uint64_t> kFewFieldValues = {~uint64_t{0}, uint64_t{1} << 31, 0};

class CorruptionFuzz : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string path = kShared + "/models/" + GetParam();
    SKIP_IF_ABSENT(path);
    original_ = read_file(path);
    work_ = original_;
    layout_ = LayoutScanner(original_).scan();
    plan_ = GetParam() == "stories260K.gguf"
                ? FuzzPlan{2048, 400, 800, 300, SIZE_MAX, 64, kManyFieldValues}
                : FuzzPlan{2048, 60, 60, 20, 40, 8, kFewFieldValues};
  }

  void TearDown() override {
    if (parsed_ + rejected_ == 0) return;
    std::cout << "[ fuzz     ] " << GetParam() << ": " << parsed_ + rejected_ << " variants, "
              << rejected_ << " rejected, " << parsed_ << " parsed\n";
  }

  // A variant must parse or be refused with tsr::Error; anything else fails the test.
  void check(std::span<const uint8_t> bytes, const std::string& what) {
    try {
      const auto f = GgufFile::from_bytes(bytes, "fuzz.gguf");
      use(*f);
      ++parsed_;
    } catch (const Error&) {
      ++rejected_;
    } catch (const std::bad_alloc&) {
      ADD_FAILURE() << what << ": std::bad_alloc";
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": unexpected exception: " << e.what();
    }
  }

  // Writes `value` (low `width` bytes) at `pos`, checks the variant, restores the bytes.
  void check_overwrite(size_t pos, size_t width, uint64_t value, const std::string& what) {
    width = std::min(width, work_.size() - pos);
    std::memcpy(work_.data() + pos, &value, width);
    check(work_, what + " at byte " + std::to_string(pos));
    std::memcpy(work_.data() + pos, original_.data() + pos, width);
  }

  size_t random_below(size_t n) { return static_cast<size_t>(rng_() % n); }

  std::vector<uint8_t> original_;
  std::vector<uint8_t> work_;
  GgufLayout layout_;
  FuzzPlan plan_;
  std::mt19937_64 rng_{20240229};
  int parsed_ = 0;
  int rejected_ = 0;

 private:
  // Reads every tensor's first and last byte and renders the metadata, so that ASan sees
  // any pointer a successful parse hands out that leaves the image.
  static void use(const GgufFile& f) {
    unsigned sum = 0;
    for (const GgufTensorInfo& t : f.tensors()) {
      sum += f.tensor_data(t)[0] + f.tensor_data(t)[t.nbytes - 1];
    }
    for (const GgufKv& kv : f.metadata()) sum += gguf_value_to_string(kv.value).size();
    volatile unsigned sink = sum;
    (void)sink;
  }
};

TEST_P(CorruptionFuzz, LayoutScanMatchesReader) {
  const auto f = GgufFile::from_bytes(original_, GetParam());
  ASSERT_EQ(layout_.tensor_offsets.size(), f->tensors().size());
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    uint64_t offset = 0;
    std::memcpy(&offset, original_.data() + layout_.tensor_offsets[i].pos, 8);
    EXPECT_EQ(offset, f->tensors()[i].offset);
  }
}

TEST_P(CorruptionFuzz, Truncation) {
  const std::span<const uint8_t> all(original_);
  for (size_t n = 0; n <= std::min(plan_.dense_truncation, original_.size() - 1); ++n) {
    check(all.first(n), "truncated to " + std::to_string(n));
  }
  for (int i = 0; i < plan_.sampled_truncations; ++i) {
    // Three in four inside the header region, the rest inside the tensor data.
    const size_t n = i % 4 != 3
                         ? random_below(layout_.header_end)
                         : layout_.header_end + random_below(original_.size() - layout_.header_end);
    check(all.first(n), "truncated to " + std::to_string(n));
  }
  EXPECT_EQ(parsed_, 0) << "a truncated file parsed";
}

TEST_P(CorruptionFuzz, MagicAndVersion) {
  for (const uint32_t magic : {0u, 0x46554746u, 0x47475546u, 0xFFFFFFFFu}) {
    check_overwrite(0, 4, magic, "magic " + std::to_string(magic));
  }
  for (const uint32_t version : {0u, 1u, 2u, 4u, 99u, 0x03000000u, 0xFFFFFFFFu}) {
    check_overwrite(4, 4, version, "version " + std::to_string(version));
  }
  EXPECT_EQ(parsed_, 1) << "only version 2 should parse";
}

TEST_P(CorruptionFuzz, StructuralFieldsOverwritten) {
  const bool all = plan_.fields >= layout_.fields.size();
  for (size_t i = 0; i < std::min(plan_.fields, layout_.fields.size()); ++i) {
    const Field& f = layout_.fields[all ? i : random_below(layout_.fields.size())];
    for (const uint64_t v : plan_.field_values) {
      check_overwrite(f.pos, f.width, v, "field " + std::to_string(v));
    }
  }
  for (int i = 0; i < plan_.element_lengths; ++i) {
    const Field& f = layout_.element_lengths[random_below(layout_.element_lengths.size())];
    for (const uint64_t v : plan_.field_values) check_overwrite(f.pos, f.width, v, "string length");
  }
  EXPECT_GT(rejected_, 0);
}

TEST_P(CorruptionFuzz, RandomBytesAndWords) {
  for (int i = 0; i < plan_.byte_flips; ++i) {
    const size_t pos = random_below(layout_.header_end);
    check_overwrite(pos, 1, original_[pos] ^ (1 + random_below(255)), "byte flip");
  }
  for (int i = 0; i < plan_.word_writes; ++i) {
    const size_t width = i % 2 == 0 ? 4 : 8;
    check_overwrite(random_below(layout_.header_end), width, rng_(), "random word");
  }
  EXPECT_GT(rejected_, 0);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, CorruptionFuzz,
                         ::testing::Values("stories260K.gguf", "llama-2-tiny-random.gguf"),
                         [](const auto& info) {
                           return std::string(info.param == "stories260K.gguf" ? "stories260K"
                                                                               : "tiny_random");
                         });

}  // namespace
}  // namespace tsr
