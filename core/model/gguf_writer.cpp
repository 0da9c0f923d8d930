// GGUF writer. Everything is validated when added, so that to_bytes() only serializes and
// the reader accepts whatever the writer produces.
#include "core/model/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "core/error.h"

namespace tsr {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" as a little-endian u32
constexpr uint32_t kVersion = 3;
constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 16;  // as deep as the reader accepts
constexpr const char* kAlignmentKey = "general.alignment";

[[noreturn]] void fail(const std::string& problem) {
  throw Error("GGUF writer: " + problem);
}

class ByteSink {
 public:
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof v);
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void put_bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void pad_to(uint64_t alignment) {
    out_.resize((out_.size() + alignment - 1) / alignment * alignment);
  }
  size_t size() const { return out_.size(); }
  void resize(size_t n) { out_.resize(n); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

template <class T>
bool fits(uint64_t u) {
  return u <= std::numeric_limits<T>::max();
}
template <class T>
bool fits(int64_t i) {
  return i >= std::numeric_limits<T>::min() && i <= std::numeric_limits<T>::max();
}

// Refuses values that the file could not hold as given (e.g. UINT8 holding 300), and arrays
// whose elements do not all have the array's element type or that nest too deep.
void check_value(const std::string& key, const GgufValue& v, int depth = 0) {
  bool ok = true;
  switch (v.type) {
    case GgufType::UINT8: ok = fits<uint8_t>(v.u64); break;
    case GgufType::UINT16: ok = fits<uint16_t>(v.u64); break;
    case GgufType::UINT32: ok = fits<uint32_t>(v.u64); break;
    case GgufType::INT8: ok = fits<int8_t>(v.i64); break;
    case GgufType::INT16: ok = fits<int16_t>(v.i64); break;
    case GgufType::INT32: ok = fits<int32_t>(v.i64); break;
    case GgufType::BOOL: ok = v.u64 <= 1; break;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT32:
    case GgufType::FLOAT64:
    case GgufType::STRING: break;
    case GgufType::ARRAY:
      if (depth >= kMaxArrayDepth) {
        fail(fmt::format("key '{}': arrays nested deeper than {} levels", key, kMaxArrayDepth));
      }
      for (const GgufValue& e : v.array) {
        if (e.type != v.array_type) {
          fail(fmt::format("key '{}': array of {} holds a {} element", key,
                           gguf_type_name(v.array_type), gguf_type_name(e.type)));
        }
        check_value(key, e, depth + 1);
      }
      break;
    default:
      fail(fmt::format("key '{}': invalid value type {}", key, static_cast<uint32_t>(v.type)));
  }
  if (!ok) fail(fmt::format("key '{}': value out of range for {}", key, gguf_type_name(v.type)));
}

void put_value(ByteSink& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::UINT8: out.put(static_cast<uint8_t>(v.u64)); break;
    case GgufType::INT8: out.put(static_cast<int8_t>(v.i64)); break;
    case GgufType::UINT16: out.put(static_cast<uint16_t>(v.u64)); break;
    case GgufType::INT16: out.put(static_cast<int16_t>(v.i64)); break;
    case GgufType::UINT32: out.put(static_cast<uint32_t>(v.u64)); break;
    case GgufType::INT32: out.put(static_cast<int32_t>(v.i64)); break;
    case GgufType::UINT64: out.put(v.u64); break;
    case GgufType::INT64: out.put(v.i64); break;
    case GgufType::FLOAT32: out.put(static_cast<float>(v.f64)); break;
    case GgufType::FLOAT64: out.put(v.f64); break;
    case GgufType::BOOL: out.put(static_cast<uint8_t>(v.u64)); break;
    case GgufType::STRING: out.put_string(v.str); break;
    case GgufType::ARRAY:
      out.put(static_cast<uint32_t>(v.array_type));
      out.put<uint64_t>(v.array.size());
      for (const GgufValue& e : v.array) put_value(out, e);
      break;
  }
}

void put_kv(ByteSink& out, const GgufKv& kv) {
  out.put_string(kv.key);
  out.put(static_cast<uint32_t>(kv.value.type));
  put_value(out, kv.value);
}

// Byte size of a tensor of `type` and shape `ne`, validating the shape.
uint64_t tensor_nbytes(const std::string& name, GgmlType type, const std::vector<int64_t>& ne) {
  const std::optional<GgmlTypeTraits> traits = ggml_type_traits(static_cast<uint32_t>(type));
  if (!traits) fail(fmt::format("tensor '{}': unknown type {}", name, static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > kMaxDims) {
    fail(fmt::format("tensor '{}': dimension count {} is not in 1..{}", name, ne.size(), kMaxDims));
  }
  int64_t n = 1;
  for (const int64_t d : ne) {
    if (d <= 0) fail(fmt::format("tensor '{}': dimension {} must be positive", name, d));
    if (__builtin_mul_overflow(n, d, &n)) {
      fail(fmt::format("tensor '{}': element count overflows", name));
    }
  }
  if (ne[0] % traits->block_elems != 0) {
    fail(fmt::format("tensor '{}': ne[0] = {} is not a multiple of the {} block size {}", name,
                     ne[0], traits->name, traits->block_elems));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n) / traits->block_elems,
                             uint64_t{traits->block_bytes}, &nbytes)) {
    fail(fmt::format("tensor '{}': byte size overflows", name));
  }
  return nbytes;
}

GgufValue scalar_u64(GgufType type, uint64_t v) {
  GgufValue out;
  out.type = type;
  out.u64 = v;
  return out;
}

}  // namespace

struct GgufWriter::Impl {
  struct Tensor {
    GgufTensorInfo info;  // offset is assigned when serializing
    std::vector<uint8_t> data;
  };
  uint32_t alignment = kDefaultAlignment;
  std::vector<GgufKv> metadata;
  std::set<std::string, std::less<>> keys;
  std::vector<Tensor> tensors;
  std::set<std::string, std::less<>> tensor_names;

  std::vector<GgufKv> all_metadata() const;
};

// The user's metadata in insertion order, then general.alignment when it is not the default.
std::vector<GgufKv> GgufWriter::Impl::all_metadata() const {
  std::vector<GgufKv> all = metadata;
  if (alignment != kDefaultAlignment) {
    all.push_back({kAlignmentKey, scalar_u64(GgufType::UINT32, alignment)});
  }
  return all;
}

GgufWriter::GgufWriter() : impl_(std::make_unique<Impl>()) {}
GgufWriter::~GgufWriter() = default;

void GgufWriter::set_alignment(uint32_t alignment) {
  if (!std::has_single_bit(alignment)) {
    fail(fmt::format("alignment {} is not a nonzero power of two", alignment));
  }
  impl_->alignment = alignment;
}

void GgufWriter::add(std::string key, GgufValue value) {
  if (key.empty()) fail("empty metadata key");
  // The alignment has one source of truth, set_alignment(), so that it cannot disagree
  // with the layout the writer produces.
  if (key == kAlignmentKey) fail(fmt::format("set {} with set_alignment()", kAlignmentKey));
  if (impl_->keys.contains(key)) fail(fmt::format("duplicate metadata key '{}'", key));
  check_value(key, value);
  impl_->keys.insert(key);
  impl_->metadata.push_back({std::move(key), std::move(value)});
}

void GgufWriter::add_string(std::string key, std::string v) {
  GgufValue value;
  value.type = GgufType::STRING;
  value.str = std::move(v);
  add(std::move(key), std::move(value));
}

void GgufWriter::add_u32(std::string key, uint32_t v) {
  add(std::move(key), scalar_u64(GgufType::UINT32, v));
}

void GgufWriter::add_i32(std::string key, int32_t v) {
  GgufValue value;
  value.type = GgufType::INT32;
  value.i64 = v;
  add(std::move(key), std::move(value));
}

void GgufWriter::add_f32(std::string key, float v) {
  GgufValue value;
  value.type = GgufType::FLOAT32;
  value.f64 = v;
  add(std::move(key), std::move(value));
}

void GgufWriter::add_bool(std::string key, bool v) {
  add(std::move(key), scalar_u64(GgufType::BOOL, v ? 1 : 0));
}

void GgufWriter::add_string_array(std::string key, const std::vector<std::string>& v) {
  GgufValue value;
  value.type = GgufType::ARRAY;
  value.array_type = GgufType::STRING;
  value.array.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    value.array[i].type = GgufType::STRING;
    value.array[i].str = v[i];
  }
  add(std::move(key), std::move(value));
}

void GgufWriter::add_f32_array(std::string key, const std::vector<float>& v) {
  GgufValue value;
  value.type = GgufType::ARRAY;
  value.array_type = GgufType::FLOAT32;
  value.array.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    value.array[i].type = GgufType::FLOAT32;
    value.array[i].f64 = v[i];
  }
  add(std::move(key), std::move(value));
}

void GgufWriter::add_i32_array(std::string key, const std::vector<int32_t>& v) {
  GgufValue value;
  value.type = GgufType::ARRAY;
  value.array_type = GgufType::INT32;
  value.array.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    value.array[i].type = GgufType::INT32;
    value.array[i].i64 = v[i];
  }
  add(std::move(key), std::move(value));
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne,
                            std::span<const uint8_t> data) {
  if (impl_->tensor_names.contains(name)) fail(fmt::format("duplicate tensor name '{}'", name));
  const uint64_t nbytes = tensor_nbytes(name, type, ne);
  if (data.size() != nbytes) {
    fail(fmt::format("tensor '{}': shape needs {} bytes of {}, data has {}", name, nbytes,
                     ggml_type_traits(static_cast<uint32_t>(type))->name, data.size()));
  }
  Impl::Tensor t;
  t.info.name = name;
  t.info.type = type;
  t.info.nbytes = nbytes;
  t.info.nelements = 1;
  for (const int64_t d : ne) t.info.nelements *= d;
  t.info.ne = std::move(ne);
  t.data.assign(data.begin(), data.end());
  impl_->tensor_names.insert(std::move(name));
  impl_->tensors.push_back(std::move(t));
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  const std::vector<GgufKv> metadata = impl_->all_metadata();
  const uint64_t alignment = impl_->alignment;
  ByteSink out;
  out.put(kMagic);
  out.put(kVersion);
  out.put<uint64_t>(impl_->tensors.size());
  out.put<uint64_t>(metadata.size());
  for (const GgufKv& kv : metadata) put_kv(out, kv);

  // Each tensor's data starts aligned, relative to the (aligned) data section.
  std::vector<uint64_t> offsets;
  uint64_t end = 0;
  for (const Impl::Tensor& t : impl_->tensors) {
    offsets.push_back((end + alignment - 1) / alignment * alignment);
    end = offsets.back() + t.info.nbytes;
  }
  for (size_t i = 0; i < impl_->tensors.size(); ++i) {
    const GgufTensorInfo& info = impl_->tensors[i].info;
    out.put_string(info.name);
    out.put(static_cast<uint32_t>(info.ne.size()));
    for (const int64_t d : info.ne) out.put(d);
    out.put(static_cast<uint32_t>(info.type));
    out.put(offsets[i]);
  }
  out.pad_to(alignment);
  const size_t data_start = out.size();
  for (size_t i = 0; i < impl_->tensors.size(); ++i) {
    out.resize(data_start + offsets[i]);
    out.put_bytes(impl_->tensors[i].data);
  }
  out.pad_to(alignment);
  return out.take();
}

void GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> bytes = to_bytes();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    throw Error(fmt::format("{}: cannot create: {}", path, std::strerror(errno)),
                TSR_STATUS_IO_ERROR);
  }
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    throw Error(
        fmt::format("{}: cannot write: {}", path, std::strerror(written ? errno : write_errno)),
        TSR_STATUS_IO_ERROR);
  }
}

}  // namespace tsr
