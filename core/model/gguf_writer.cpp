// GGUF writer. Everything is validated when added, so that to_bytes() only serializes and
// the reader accepts whatever the writer produces.
#include "core/model/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "base/error.h"

namespace tsr {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" as a little-endian u32
constexpr uint32_t kVersion = 3;
constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 16;  // as deep as the reader accepts
constexpr const char* kAlignmentKey = "general.alignment";

uint64_t align_up(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

[[noreturn]] void fail(const std::string& problem) {
  throw Error("GGUF writer: " + problem);
}

class ByteSink {
 public:
  template <class T>
  void put(T v) {
    put_bytes({reinterpret_cast<const uint8_t*>(&v), sizeof v});
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    put_bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  }
  // resize + memcpy rather than insert(): GCC 12 warns falsely about insert into an
  // empty vector (-Wstringop-overflow).
  void put_bytes(std::span<const uint8_t> b) {
    const size_t at = out_.size();
    out_.resize(at + b.size());
    if (!b.empty()) std::memcpy(out_.data() + at, b.data(), b.size());
  }
  void pad_to(uint64_t alignment) { out_.resize(align_up(out_.size(), alignment)); }
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

// The info of a tensor of `type` and shape `ne` (offset left 0), validating the shape.
GgufTensorInfo tensor_info(std::string name, GgmlType type, std::vector<int64_t> ne) {
  const std::optional<GgmlTypeTraits> traits = ggml_type_traits(static_cast<uint32_t>(type));
  if (!traits) fail(fmt::format("tensor '{}': unknown type {}", name, static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > kMaxDims) {
    fail(fmt::format("tensor '{}': dimension count {} is not in 1..{}", name, ne.size(), kMaxDims));
  }
  GgufTensorInfo t;
  t.nelements = 1;
  for (const int64_t d : ne) {
    if (d <= 0) fail(fmt::format("tensor '{}': dimension {} must be positive", name, d));
    if (__builtin_mul_overflow(t.nelements, d, &t.nelements)) {
      fail(fmt::format("tensor '{}': element count overflows", name));
    }
  }
  if (ne[0] % traits->block_elems != 0) {
    fail(fmt::format("tensor '{}': ne[0] = {} is not a multiple of the {} block size {}", name,
                     ne[0], traits->name, traits->block_elems));
  }
  if (__builtin_mul_overflow(static_cast<uint64_t>(t.nelements) / traits->block_elems,
                             uint64_t{traits->block_bytes}, &t.nbytes)) {
    fail(fmt::format("tensor '{}': byte size overflows", name));
  }
  t.name = std::move(name);
  t.type = type;
  t.ne = std::move(ne);
  return t;
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

  using Sink = std::function<void(std::span<const uint8_t>)>;
  void emit(const Sink& sink) const;
  std::vector<uint8_t> header(const std::vector<uint64_t>& offsets) const;
};

// Everything before the data section, padded to the alignment: the user's metadata in
// insertion order, then general.alignment when it is not the default.
std::vector<uint8_t> GgufWriter::Impl::header(const std::vector<uint64_t>& offsets) const {
  const bool alignment_key = alignment != kDefaultAlignment;
  ByteSink out;
  out.put(kMagic);
  out.put(kVersion);
  out.put<uint64_t>(tensors.size());
  out.put<uint64_t>(metadata.size() + (alignment_key ? 1 : 0));
  for (const GgufKv& kv : metadata) put_kv(out, kv);
  if (alignment_key) put_kv(out, {kAlignmentKey, scalar_u64(GgufType::UINT32, alignment)});
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& info = tensors[i].info;
    out.put_string(info.name);
    out.put(static_cast<uint32_t>(info.ne.size()));
    for (const int64_t d : info.ne) out.put(d);
    out.put(static_cast<uint32_t>(info.type));
    out.put(offsets[i]);
  }
  out.pad_to(alignment);
  return out.take();
}

// Hands the file to `sink` piece by piece, so that write() never holds a second copy of
// the tensor data.
void GgufWriter::Impl::emit(const Sink& sink) const {
  std::vector<uint64_t> offsets;  // in the data section, each aligned
  uint64_t end = 0;
  for (const Tensor& t : tensors) {
    offsets.push_back(align_up(end, alignment));
    end = offsets.back() + t.info.nbytes;
  }
  sink(header(offsets));
  static constexpr uint8_t kZeros[4096] = {};
  const auto pad = [&](uint64_t n) {
    for (; n > 0; n -= std::min<uint64_t>(n, sizeof kZeros)) {
      sink({kZeros, std::min<uint64_t>(n, sizeof kZeros)});
    }
  };
  uint64_t pos = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    pad(offsets[i] - pos);
    sink(tensors[i].data);
    pos = offsets[i] + tensors[i].info.nbytes;
  }
  pad(align_up(pos, alignment) - pos);
}

GgufWriter::GgufWriter() : impl_(std::make_unique<Impl>()) {}
GgufWriter::~GgufWriter() = default;

void GgufWriter::set_alignment(uint32_t alignment) {
  if (!std::has_single_bit(alignment) || alignment > kGgufMaxAlignment) {
    fail(fmt::format("alignment {} is not a power of two from 1 to {}", alignment, kGgufMaxAlignment));
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
  Impl::Tensor t{tensor_info(name, type, std::move(ne)), {}};
  if (data.size() != t.info.nbytes) {
    fail(fmt::format("tensor '{}': shape needs {} bytes of {}, data has {}", name, t.info.nbytes,
                     ggml_type_traits(static_cast<uint32_t>(type))->name, data.size()));
  }
  t.data.assign(data.begin(), data.end());
  impl_->tensor_names.insert(std::move(name));
  impl_->tensors.push_back(std::move(t));
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  ByteSink out;
  impl_->emit([&](std::span<const uint8_t> bytes) { out.put_bytes(bytes); });
  return out.take();
}

void GgufWriter::write(const std::string& path) const {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    throw Error(fmt::format("{}: cannot create: {}", path, std::strerror(errno)),
                TSR_STATUS_IO_ERROR);
  }
  int error = 0;  // the first failure's errno; later writes are skipped
  impl_->emit([&](std::span<const uint8_t> bytes) {
    if (error != 0) return;
    errno = 0;
    if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
      error = errno != 0 ? errno : EIO;
    }
  });
  if (std::fclose(f) != 0 && error == 0) error = errno;
  if (error != 0) {
    throw Error(fmt::format("{}: cannot write: {}", path, std::strerror(error)),
                TSR_STATUS_IO_ERROR);
  }
}

}  // namespace tsr
