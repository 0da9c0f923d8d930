// GGUF reader (versions 2 and 3) over a read-only mmap of the file.
//
// Every length, count, offset and shape read from the file is validated before use:
// a malformed file throws tsr::Error naming the file and the problem, never crashes.
// Thread-safety: a GgufFile is immutable after open(); all const methods are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tsr {

// Metadata value types, numbered as in the GGUF specification.
enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* gguf_type_name(GgufType t);

// Tensor element types, numbered as ggml's ggml_type.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ4_NL = 20, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30, MXFP4 = 39,
};

// Block geometry of a tensor type: `block_elems` elements take `block_bytes` bytes.
struct GgmlTypeTraits {
  const char* name;
  uint32_t block_elems;
  uint32_t block_bytes;
};
// nullopt for a type number this reader does not know.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type);

// One metadata value. Scalars use the field matching `type`; arrays hold elements in
// `array` (all of type `array_type`, nested arrays allowed).
struct GgufValue {
  GgufType type = GgufType::UINT8;
  uint64_t u64 = 0;   // UINT8, UINT16, UINT32, UINT64, BOOL
  int64_t i64 = 0;    // INT8, INT16, INT32, INT64
  double f64 = 0;     // FLOAT32, FLOAT64
  std::string str;    // STRING
  GgufType array_type = GgufType::UINT8;
  std::vector<GgufValue> array;  // ARRAY
};

struct GgufKv {
  std::string key;
  GgufValue value;
};

// The largest general.alignment read or written (files use 32 or 64).
inline constexpr uint32_t kGgufMaxAlignment = 1u << 20;

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;    // GGUF order: ne[0] is the innermost (contiguous) dimension
  uint64_t offset = 0;        // relative to the start of the data section
  uint64_t nbytes = 0;
  int64_t nelements = 0;
};

class GgufFile {
 public:
  // Maps and parses `path`. Throws tsr::Error (naming the path) on any problem.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses an in-memory image (copied); `name` is used in error messages. For tests.
  static std::unique_ptr<GgufFile> from_bytes(std::span<const uint8_t> bytes,
                                              const std::string& name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const;
  uint32_t version() const;
  uint64_t alignment() const;
  uint64_t file_size() const;

  const std::vector<GgufKv>& metadata() const;   // in file order
  const GgufValue* find(std::string_view key) const;  // NULL when absent

  // Typed getters: nullopt when the key is absent; throw tsr::Error when present with an
  // incompatible type or out of range (integers convert between widths when they fit).
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<uint32_t> get_u32(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_f32_array(std::string_view key) const;
  std::optional<std::vector<int32_t>> get_i32_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // NULL when absent
  // Start of the tensor's bytes inside the mapping (valid for the file's lifetime).
  const uint8_t* tensor_data(const GgufTensorInfo& t) const;
  // A hint that the tensor's bytes will not be read again (a copy lives elsewhere): the
  // pages wholly inside them leave the process's resident memory, and are read from the
  // file again should they be touched.
  void release(const GgufTensorInfo& t) const;

 private:
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A 64-bit identity of a GGUF file's contents, cheap for any size: its metadata and tensor
// layout, and the first and last 4 KiB of every tensor's bytes (fine-tunes of one base
// differ in every tensor). Names what a cache of computed KV (the disk tier) depends on.
uint64_t gguf_content_fingerprint(const GgufFile& file);

// Renders a value for `tessera inspect` (long arrays abbreviated).
std::string gguf_value_to_string(const GgufValue& v, size_t max_array_items = 8);

}  // namespace tsr
