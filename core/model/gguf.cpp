// GGUF reader. The file is parsed once, front to back, through a bounds-checked cursor;
// every count and length is checked against the bytes that remain before anything is
// allocated for it, so a corrupt header cannot crash the reader. Memory stays bounded too:
// strings copy file bytes at most once, and the number of metadata values and tensors is
// capped, because each parsed value costs ~100 bytes however few bytes it took in the file.
#include "core/model/gguf.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <new>

#include <fmt/format.h>

#include "base/error.h"

namespace tsr {

// Values are read by memcpy from the little-endian file; a big-endian host would need swaps.
static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 16;
constexpr uint32_t kMaxDims = 4;
// Limits far above real files (a 256K-token vocabulary with scores, types and merges is ~1M
// values; large MoE models have ~100K tensors) that bound a corrupt file's cost to ~500 MB.
constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 22;
constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
constexpr uint64_t kMaxStringBytes = uint64_t{256} << 20;
constexpr const char* kAlignmentKey = "general.alignment";
// Images copied by from_bytes start page-aligned, like a mapping, so that tensor data is
// as aligned in memory as it is in the file (SIMD kernels rely on it).
constexpr std::align_val_t kImageAlignment{4096};

// Smallest encodings, used to bound counts by the bytes left: a key-value pair is at least
// a key length, a type and a one-byte value; a tensor info at least a name length, n_dims,
// one dimension, a type and an offset.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

bool is_valid_type(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::FLOAT64);
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64: return true;
    default: return false;
  }
}

bool is_unsigned(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 ||
         t == GgufType::UINT64 || t == GgufType::BOOL;
}

// Bytes one element of type `t` takes at least in an array (strings and arrays: their header).
uint64_t min_encoded_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL: return 1;
    case GgufType::UINT16:
    case GgufType::INT16: return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32: return 4;
    case GgufType::STRING: return 8;
    case GgufType::ARRAY: return 4 + 8;
    default: return 8;
  }
}

// Integer value of an integer-typed value; nullopt when it does not fit in int64.
std::optional<int64_t> to_int64(const GgufValue& v) {
  if (!is_unsigned(v.type)) return v.i64;
  if (v.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(v.u64);
}

class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }

  void read_string(const char* what, std::string& out) {
    const uint64_t len = read<uint64_t>(what);
    if (len > kMaxStringBytes) {
      fail(fmt::format("{} of {} bytes is longer than the limit of {} bytes", what, len,
                       kMaxStringBytes));
    }
    if (len > remaining()) {
      fail(fmt::format("{} of {} bytes runs past the end of file ({} bytes left)", what, len,
                       remaining()));
    }
    out.assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw Error(fmt::format("{}: {} (at byte {})", name_, problem, pos_));
  }

 private:
  void need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      fail(fmt::format("truncated file: unexpected end of file reading {}", what));
    }
  }

  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& name_;
};

GgufType read_type(Cursor& c, const char* what) {
  const uint32_t t = c.read<uint32_t>(what);
  if (!is_valid_type(t)) c.fail(fmt::format("invalid metadata value type {}", t));
  return static_cast<GgufType>(t);
}

// Reads metadata values, charging each against kMaxMetadataValues.
class ValueReader {
 public:
  explicit ValueReader(Cursor& c) : c_(c) {}

  void charge(uint64_t n) {
    if (n > values_left_) {
      c_.fail(fmt::format("metadata holds more than {} values", kMaxMetadataValues));
    }
    values_left_ -= n;
  }

  void read(GgufType type, int depth, GgufValue& v) {
    v.type = type;
    switch (type) {
      case GgufType::UINT8: v.u64 = c_.read<uint8_t>("uint8 value"); break;
      case GgufType::INT8: v.i64 = c_.read<int8_t>("int8 value"); break;
      case GgufType::UINT16: v.u64 = c_.read<uint16_t>("uint16 value"); break;
      case GgufType::INT16: v.i64 = c_.read<int16_t>("int16 value"); break;
      case GgufType::UINT32: v.u64 = c_.read<uint32_t>("uint32 value"); break;
      case GgufType::INT32: v.i64 = c_.read<int32_t>("int32 value"); break;
      case GgufType::UINT64: v.u64 = c_.read<uint64_t>("uint64 value"); break;
      case GgufType::INT64: v.i64 = c_.read<int64_t>("int64 value"); break;
      case GgufType::FLOAT32: v.f64 = c_.read<float>("float32 value"); break;
      case GgufType::FLOAT64: v.f64 = c_.read<double>("float64 value"); break;
      case GgufType::BOOL:
        v.u64 = c_.read<uint8_t>("bool value");
        if (v.u64 > 1) c_.fail(fmt::format("invalid bool value {}", v.u64));
        break;
      case GgufType::STRING: c_.read_string("string", v.str); break;
      case GgufType::ARRAY: read_array(v, depth); break;
    }
  }

 private:
  void read_array(GgufValue& v, int depth) {
    if (depth >= kMaxArrayDepth) {
      c_.fail(fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
    }
    v.array_type = read_type(c_, "array element type");
    const uint64_t count = c_.read<uint64_t>("array length");
    if (count > c_.remaining() / min_encoded_size(v.array_type)) {
      c_.fail(fmt::format("array of {} {} elements cannot fit in the {} bytes left before end "
                          "of file",
                          count, gguf_type_name(v.array_type), c_.remaining()));
    }
    charge(count);
    // Elements are parsed in place: vocabularies hold tens of thousands of them.
    v.array.resize(count);
    for (GgufValue& e : v.array) read(v.array_type, depth + 1, e);
  }

  Cursor& c_;
  uint64_t values_left_ = kMaxMetadataValues;
};

uint64_t align_up(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) & ~(alignment - 1);
}

struct AlignedFree {
  void operator()(uint8_t* p) const { ::operator delete[](p, kImageAlignment); }
};

}  // namespace

struct GgufFile::Impl {
  std::string path;
  std::unique_ptr<uint8_t[], AlignedFree> owned;  // the image for from_bytes
  void* mapping = nullptr;                        // the image for open
  size_t mapping_size = 0;
  const uint8_t* data = nullptr;
  uint64_t size = 0;

  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;  // start of the data section in the file
  std::vector<GgufKv> metadata;
  std::map<std::string, size_t, std::less<>> metadata_index;
  std::vector<GgufTensorInfo> tensors;
  std::map<std::string, size_t, std::less<>> tensor_index;

  ~Impl() {
    if (mapping != nullptr) munmap(mapping, mapping_size);
  }

  void parse();
  void parse_header(Cursor& c, uint64_t& n_tensors, uint64_t& n_kv);
  void parse_metadata(Cursor& c, uint64_t n_kv);
  void read_alignment(Cursor& c);
  GgufTensorInfo parse_tensor_info(Cursor& c);
  void place_tensors(Cursor& c);

  const GgufValue* find(std::string_view key) const;
  const GgufValue* find_typed(std::string_view key, GgufType type, const char* expected) const;
  [[noreturn]] void key_error(std::string_view key, const std::string& problem) const;
};

void GgufFile::Impl::parse() {
  Cursor c(data, size, path);
  uint64_t n_tensors = 0, n_kv = 0;
  parse_header(c, n_tensors, n_kv);
  parse_metadata(c, n_kv);
  read_alignment(c);
  tensors.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t = parse_tensor_info(c);
    if (!tensor_index.emplace(t.name, tensors.size()).second) {
      c.fail(fmt::format("duplicate tensor name '{}'", t.name));
    }
    tensors.push_back(std::move(t));
  }
  place_tensors(c);
}

void GgufFile::Impl::parse_header(Cursor& c, uint64_t& n_tensors, uint64_t& n_kv) {
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) c.fail(fmt::format("bad magic 0x{:08x}: not a GGUF file", magic));
  version = c.read<uint32_t>("version");
  if (version == 1) c.fail("GGUF version 1 is not supported (only versions 2 and 3)");
  if (version != 2 && version != 3) {
    // A big-endian file shows its version byte-swapped.
    const uint32_t swapped_version = __builtin_bswap32(version);
    const bool swapped = swapped_version == 2 || swapped_version == 3;
    c.fail(swapped ? std::string("big-endian GGUF files are not supported")
                   : fmt::format("unsupported GGUF version {} (only 2 and 3)", version));
  }
  n_tensors = c.read<uint64_t>("tensor count");
  n_kv = c.read<uint64_t>("metadata count");
  if (n_tensors > kMaxTensors) {
    c.fail(fmt::format("tensor count {} exceeds the limit of {}", n_tensors, kMaxTensors));
  }
  // Bound both counts by the bytes left before reserving anything for them.
  if (n_kv > c.remaining() / kMinKvBytes || n_tensors > c.remaining() / kMinTensorInfoBytes ||
      n_kv * kMinKvBytes + n_tensors * kMinTensorInfoBytes > c.remaining()) {
    c.fail(
        fmt::format("{} metadata entries and {} tensor infos cannot fit in the {} bytes left "
                    "before end of file",
                    n_kv, n_tensors, c.remaining()));
  }
}

void GgufFile::Impl::parse_metadata(Cursor& c, uint64_t n_kv) {
  ValueReader values(c);
  values.charge(n_kv);
  metadata.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    GgufKv kv;
    c.read_string("metadata key", kv.key);
    if (kv.key.empty()) c.fail("empty metadata key");
    if (metadata_index.contains(kv.key)) {
      c.fail(fmt::format("duplicate metadata key '{}'", kv.key));
    }
    values.read(read_type(c, "metadata value type"), 0, kv.value);
    metadata_index.emplace(kv.key, metadata.size());
    metadata.push_back(std::move(kv));
  }
}

void GgufFile::Impl::read_alignment(Cursor& c) {
  const GgufValue* v = find(kAlignmentKey);
  if (v == nullptr) return;
  const std::optional<int64_t> a = is_integer(v->type) ? to_int64(*v) : std::nullopt;
  // Capped at 1 MiB (real files use 32 or 64) so that rounding offsets up cannot overflow
  // and a copy of the file (tessera quantize) cannot be made to pad gigabytes.
  if (!a || *a <= 0 || *a > kGgufMaxAlignment ||
      !std::has_single_bit(static_cast<uint64_t>(*a))) {
    c.fail(fmt::format("{} must be a power of two from 1 to {}, got {} {}", kAlignmentKey, kGgufMaxAlignment,
                       gguf_type_name(v->type), gguf_value_to_string(*v, 4)));
  }
  alignment = static_cast<uint64_t>(*a);
}

GgufTensorInfo GgufFile::Impl::parse_tensor_info(Cursor& c) {
  GgufTensorInfo t;
  c.read_string("tensor name", t.name);
  const uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
  if (n_dims == 0 || n_dims > kMaxDims) {
    c.fail(
        fmt::format("tensor '{}': dimension count {} is not in 1..{}", t.name, n_dims, kMaxDims));
  }
  int64_t n = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const int64_t ne = c.read<int64_t>("tensor dimension");
    if (ne <= 0) {
      c.fail(fmt::format("tensor '{}': dimension {} is {}, must be positive", t.name, d, ne));
    }
    if (__builtin_mul_overflow(n, ne, &n)) {
      c.fail(
          fmt::format("tensor '{}': element count overflows (dimension {} is {})", t.name, d, ne));
    }
    t.ne.push_back(ne);
  }
  t.nelements = n;

  const uint32_t type = c.read<uint32_t>("tensor type");
  const std::optional<GgmlTypeTraits> traits = ggml_type_traits(type);
  if (!traits) c.fail(fmt::format("tensor '{}' has unknown type {}", t.name, type));
  t.type = static_cast<GgmlType>(type);
  if (t.ne[0] % traits->block_elems != 0) {
    c.fail(fmt::format("tensor '{}': ne[0] = {} is not a multiple of the {} block size {}", t.name,
                       t.ne[0], traits->name, traits->block_elems));
  }
  const uint64_t blocks = static_cast<uint64_t>(t.nelements) / traits->block_elems;
  if (__builtin_mul_overflow(blocks, uint64_t{traits->block_bytes}, &t.nbytes)) {
    c.fail(fmt::format("tensor '{}': byte size overflows", t.name));
  }

  t.offset = c.read<uint64_t>("tensor data offset");
  if (t.offset % alignment != 0) {
    c.fail(fmt::format("tensor '{}': data offset {} is not a multiple of the alignment {}", t.name,
                       t.offset, alignment));
  }
  return t;
}

// The data section starts at the first aligned position after the tensor infos. Tensors may
// share or overlap bytes there, but each must lie inside the file.
void GgufFile::Impl::place_tensors(Cursor& c) {
  data_offset = align_up(c.pos(), alignment);
  if (tensors.empty()) return;
  if (data_offset > size) {
    c.fail(fmt::format("data section starts at {}, past the end of file ({} bytes)", data_offset,
                       size));
  }
  const uint64_t data_size = size - data_offset;
  for (const GgufTensorInfo& t : tensors) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      c.fail(
          fmt::format("tensor '{}': data at offset {} of {} bytes runs past the end of file "
                      "(the data section holds {} bytes)",
                      t.name, t.offset, t.nbytes, data_size));
    }
  }
}

const GgufValue* GgufFile::Impl::find(std::string_view key) const {
  const auto it = metadata_index.find(key);
  return it == metadata_index.end() ? nullptr : &metadata[it->second].value;
}

const GgufValue* GgufFile::Impl::find_typed(std::string_view key, GgufType type,
                                            const char* expected) const {
  const GgufValue* v = find(key);
  if (v != nullptr && v->type != type) {
    key_error(key, fmt::format("has type {}, expected {}", gguf_type_name(v->type), expected));
  }
  return v;
}

void GgufFile::Impl::key_error(std::string_view key, const std::string& problem) const {
  throw Error(fmt::format("{}: metadata key '{}' {}", path, key, problem));
}

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::~GgufFile() = default;

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer, forever; it is then
  // refused as not a regular file (regular files ignore the flag).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)),
                TSR_STATUS_IO_ERROR);
  }
  struct stat st {};
  const bool stat_ok = fstat(fd, &st) == 0;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    const std::string why = stat_ok ? "not a regular file" : std::strerror(errno);
    ::close(fd);
    throw Error(fmt::format("{}: cannot read: {}", path, why), TSR_STATUS_IO_ERROR);
  }
  // mmap refuses a zero-length mapping; an empty file is then reported as truncated.
  if (st.st_size > 0) {
    impl->mapping_size = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, impl->mapping_size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
      throw Error(fmt::format("{}: cannot mmap: {}", path, std::strerror(err)),
                  TSR_STATUS_IO_ERROR);
    }
    impl->mapping = p;
    impl->data = static_cast<const uint8_t*>(p);
    impl->size = impl->mapping_size;
  } else {
    ::close(fd);
  }
  impl->parse();
  return std::unique_ptr<GgufFile>(new GgufFile(std::move(impl)));
}

std::unique_ptr<GgufFile> GgufFile::from_bytes(std::span<const uint8_t> bytes,
                                               const std::string& name) {
  auto impl = std::make_unique<Impl>();
  impl->path = name;
  impl->owned.reset(static_cast<uint8_t*>(::operator new[](bytes.size(), kImageAlignment)));
  if (!bytes.empty()) std::memcpy(impl->owned.get(), bytes.data(), bytes.size());
  impl->data = impl->owned.get();
  impl->size = bytes.size();
  impl->parse();
  return std::unique_ptr<GgufFile>(new GgufFile(std::move(impl)));
}

const std::string& GgufFile::path() const {
  return impl_->path;
}
uint32_t GgufFile::version() const {
  return impl_->version;
}
uint64_t GgufFile::alignment() const {
  return impl_->alignment;
}
uint64_t GgufFile::file_size() const {
  return impl_->size;
}
const std::vector<GgufKv>& GgufFile::metadata() const {
  return impl_->metadata;
}
const GgufValue* GgufFile::find(std::string_view key) const {
  return impl_->find(key);
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = impl_->find_typed(key, GgufType::STRING, "string");
  if (v == nullptr) return std::nullopt;
  return v->str;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!is_integer(v->type)) {
    impl_->key_error(key, fmt::format("has type {}, expected an integer", gguf_type_name(v->type)));
  }
  const std::optional<int64_t> i = to_int64(*v);
  if (!i) impl_->key_error(key, fmt::format("value {} does not fit in int64", v->u64));
  return i;
}

std::optional<uint32_t> GgufFile::get_u32(std::string_view key) const {
  const std::optional<int64_t> i = get_int(key);
  if (!i) return std::nullopt;
  if (*i < 0 || *i > std::numeric_limits<uint32_t>::max()) {
    impl_->key_error(key, fmt::format("value {} does not fit in uint32", *i));
  }
  return static_cast<uint32_t>(*i);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::FLOAT32 && v->type != GgufType::FLOAT64) {
    impl_->key_error(key, fmt::format("has type {}, expected a float", gguf_type_name(v->type)));
  }
  return v->f64;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = impl_->find_typed(key, GgufType::BOOL, "bool");
  if (v == nullptr) return std::nullopt;
  return v->u64 != 0;
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = impl_->find_typed(key, GgufType::ARRAY, "array of string");
  if (v == nullptr) return std::nullopt;
  if (v->array_type != GgufType::STRING) {
    impl_->key_error(key, fmt::format("is an array of {}, expected an array of string",
                                      gguf_type_name(v->array_type)));
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) out.push_back(e.str);
  return out;
}

std::optional<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  const GgufValue* v = impl_->find_typed(key, GgufType::ARRAY, "array of float32");
  if (v == nullptr) return std::nullopt;
  if (v->array_type != GgufType::FLOAT32) {
    impl_->key_error(key, fmt::format("is an array of {}, expected an array of float32",
                                      gguf_type_name(v->array_type)));
  }
  std::vector<float> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) out.push_back(static_cast<float>(e.f64));
  return out;
}

std::optional<std::vector<int32_t>> GgufFile::get_i32_array(std::string_view key) const {
  const GgufValue* v = impl_->find_typed(key, GgufType::ARRAY, "array of integers");
  if (v == nullptr) return std::nullopt;
  if (!is_integer(v->array_type)) {
    impl_->key_error(key, fmt::format("is an array of {}, expected an array of integers",
                                      gguf_type_name(v->array_type)));
  }
  std::vector<int32_t> out;
  out.reserve(v->array.size());
  for (size_t i = 0; i < v->array.size(); ++i) {
    const std::optional<int64_t> x = to_int64(v->array[i]);
    if (!x || *x < std::numeric_limits<int32_t>::min() ||
        *x > std::numeric_limits<int32_t>::max()) {
      impl_->key_error(key, fmt::format("element {} ({}) does not fit in int32", i,
                                        gguf_value_to_string(v->array[i])));
    }
    out.push_back(static_cast<int32_t>(*x));
  }
  return out;
}

const std::vector<GgufTensorInfo>& GgufFile::tensors() const {
  return impl_->tensors;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& t) const {
  return impl_->data + impl_->data_offset + t.offset;
}

void GgufFile::release(const GgufTensorInfo& t) const {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(tensor_data(t));
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + t.nbytes) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);  // a hint: errors are harmless
}

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "uint8";
    case GgufType::INT8: return "int8";
    case GgufType::UINT16: return "uint16";
    case GgufType::INT16: return "int16";
    case GgufType::UINT32: return "uint32";
    case GgufType::INT32: return "int32";
    case GgufType::FLOAT32: return "float32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::UINT64: return "uint64";
    case GgufType::INT64: return "int64";
    case GgufType::FLOAT64: return "float64";
  }
  return "unknown";
}

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: return GgmlTypeTraits{"F32", 1, 4};
    case GgmlType::F16: return GgmlTypeTraits{"F16", 1, 2};
    case GgmlType::Q4_0: return GgmlTypeTraits{"Q4_0", 32, 18};
    case GgmlType::Q4_1: return GgmlTypeTraits{"Q4_1", 32, 20};
    case GgmlType::Q5_0: return GgmlTypeTraits{"Q5_0", 32, 22};
    case GgmlType::Q5_1: return GgmlTypeTraits{"Q5_1", 32, 24};
    case GgmlType::Q8_0: return GgmlTypeTraits{"Q8_0", 32, 34};
    case GgmlType::Q8_1: return GgmlTypeTraits{"Q8_1", 32, 36};
    case GgmlType::Q2_K: return GgmlTypeTraits{"Q2_K", 256, 84};
    case GgmlType::Q3_K: return GgmlTypeTraits{"Q3_K", 256, 110};
    case GgmlType::Q4_K: return GgmlTypeTraits{"Q4_K", 256, 144};
    case GgmlType::Q5_K: return GgmlTypeTraits{"Q5_K", 256, 176};
    case GgmlType::Q6_K: return GgmlTypeTraits{"Q6_K", 256, 210};
    case GgmlType::Q8_K: return GgmlTypeTraits{"Q8_K", 256, 292};
    case GgmlType::IQ4_NL: return GgmlTypeTraits{"IQ4_NL", 32, 18};
    case GgmlType::IQ4_XS: return GgmlTypeTraits{"IQ4_XS", 256, 136};
    case GgmlType::MXFP4: return GgmlTypeTraits{"MXFP4", 32, 17};
    case GgmlType::I8: return GgmlTypeTraits{"I8", 1, 1};
    case GgmlType::I16: return GgmlTypeTraits{"I16", 1, 2};
    case GgmlType::I32: return GgmlTypeTraits{"I32", 1, 4};
    case GgmlType::I64: return GgmlTypeTraits{"I64", 1, 8};
    case GgmlType::F64: return GgmlTypeTraits{"F64", 1, 8};
    case GgmlType::BF16: return GgmlTypeTraits{"BF16", 1, 2};
  }
  return std::nullopt;
}

namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += fmt::format("\\x{:02x}", u);
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string gguf_value_to_string(const GgufValue& v, size_t max_array_items) {
  switch (v.type) {
    case GgufType::UINT8:
    case GgufType::UINT16:
    case GgufType::UINT32:
    case GgufType::UINT64: return fmt::format("{}", v.u64);
    case GgufType::INT8:
    case GgufType::INT16:
    case GgufType::INT32:
    case GgufType::INT64: return fmt::format("{}", v.i64);
    case GgufType::FLOAT32: return fmt::format("{}", static_cast<float>(v.f64));
    case GgufType::FLOAT64: return fmt::format("{}", v.f64);
    case GgufType::BOOL: return v.u64 != 0 ? "true" : "false";
    case GgufType::STRING: return quote(v.str);
    case GgufType::ARRAY: break;
  }
  std::string out = "[";
  const size_t shown = std::min(v.array.size(), max_array_items);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += gguf_value_to_string(v.array[i], max_array_items);
  }
  if (shown < v.array.size()) {
    out += fmt::format("{}... ({} items)", shown > 0 ? ", " : "", v.array.size());
  }
  return out + "]";
}

uint64_t gguf_content_fingerprint(const GgufFile& file) {
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) throw Error("out of memory", TSR_STATUS_OUT_OF_MEMORY);
  XXH3_64bits_reset(state);
  const auto add = [&](const void* p, size_t n) { XXH3_64bits_update(state, p, n); };
  for (const GgufKv& kv : file.metadata()) {
    add(kv.key.data(), kv.key.size());
    const std::string v = gguf_value_to_string(kv.value, 16);
    add(v.data(), v.size());
  }
  constexpr uint64_t kSample = 4096;
  for (const GgufTensorInfo& t : file.tensors()) {
    add(t.name.data(), t.name.size());
    add(&t.type, sizeof(t.type));
    add(t.ne.data(), t.ne.size() * sizeof(int64_t));
    const uint8_t* data = file.tensor_data(t);
    add(data, std::min(t.nbytes, kSample));
    if (t.nbytes > kSample) add(data + t.nbytes - kSample, kSample);
  }
  const uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return h;
}

}  // namespace tsr
