// Backend checks: devices, buffers, streams and events; every op against naive
// double-precision references written from tessera/backend.h (ported from the CPU
// backend's own tests), on random shapes and on every weight dtype the plugin says it
// supports; and bad arguments, which must fail with an error object, never crash.
//
// Error measure: max|ours - ref| / max(1, max|ref|) < 1e-4. Tensors start as 0xFF bytes
// (NaN as f32), so reading an unwritten byte shows as NaN and writing into row padding
// shows in pad_untouched().
#include <cctype>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "conformance.h"
#include "tessera/quant.h"
#include "tessera/backend.h"
#include "tessera/host_memory.h"

namespace tsr::conformance {
namespace {

constexpr double kTol = 1e-4;
// Matmul with low-precision weights (F16, BF16, Q8_0, Q4_0) may round the activations to
// a like precision, as llama.cpp does (int8 blocks for quantized weights, bf16 GEMMs):
// that costs up to ~7e-3 on the kit's shapes. A wrong layout or block decode costs O(1).
constexpr double kLowPrecisionTol = 1e-2;

// ---- element formats (the kit's own, independent of the plugin's) ----

// Round to nearest even; the kit only encodes zero and normal f16 values.
uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  if ((x & 0x7fffffff) == 0 || exp <= 0) return sign;
  const uint32_t mant = x & 0x7fffff, rest = mant & 0x1fff;
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

double f16_value(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const double mag = exp == 0 ? std::ldexp(h & 0x3ff, -24) : std::ldexp(1024 + (h & 0x3ff), exp - 25);
  return (h & 0x8000) ? -mag : mag;
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

double bf16_value(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool is_quant(tsr_dtype d) { return d == TSR_DTYPE_Q8_0 || d == TSR_DTYPE_Q4_0; }

int64_t unit_bytes(tsr_dtype d) {
  int64_t bytes = 0;
  if (!tsr_dtype_block(d, nullptr, &bytes)) throw std::logic_error("no unit size for dtype " + std::to_string(d));
  return bytes;
}

int64_t row_bytes(tsr_dtype d, int64_t n) { return tsr_dtype_row_bytes(d, n); }

// Upper case, as test names spell dtypes ("Q8_0").
std::string dtype_name(tsr_dtype d) {
  const char* name = tsr_dtype_name(d);
  std::string s = name != nullptr ? name : "other";
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Weights in `dtype` and the exact values they decode to.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<double> value;
};

void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// GGUF Q8_0 (d = max|x| / 127, q = round(x / d)) and Q4_0 (quantize_row_q4_0_ref).
void quantize_block(tsr_dtype d, const float* x, uint8_t* block, double* value) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::abs(x[j])) max = x[j], amax = std::abs(x[j]);
  }
  const float scale = d == TSR_DTYPE_Q8_0 ? amax / 127 : max / -8;
  const float inv = scale != 0 ? 1 / scale : 0;
  const uint16_t sh = f32_to_f16(scale);
  put_u16(block, sh);
  for (int j = 0; j < 32; ++j) {
    if (d == TSR_DTYPE_Q8_0) {
      const auto q = static_cast<int8_t>(std::round(x[j] * inv));
      block[2 + j] = static_cast<uint8_t>(q);
      value[j] = f16_value(sh) * q;
    } else {
      const int q = std::min(15, int(static_cast<int8_t>(x[j] * inv + 8.5f)));
      block[2 + j % 16] = static_cast<uint8_t>(j < 16 ? q : (block[2 + j % 16] | q << 4));
      value[j] = f16_value(sh) * (q - 8);
    }
  }
}

// Q8_0 allows -128, which llama.cpp's quantizer never writes but another may: every third
// block gets one, so that a kernel negating weights (a sign trick) shows its overflow.
void add_q8_minimum(Weights& w) {
  for (size_t b = 0; b * 34 < w.bytes.size(); b += 3) {
    const size_t j = b % 32;
    uint16_t scale;
    std::memcpy(&scale, &w.bytes[b * 34], 2);
    w.bytes[b * 34 + 2 + j] = 0x80;
    w.value[b * 32 + j] = f16_value(scale) * -128;
  }
}

Weights encode(tsr_dtype d, const std::vector<float>& src) {
  Weights w;
  w.value.resize(src.size());
  w.bytes.resize(static_cast<size_t>(row_bytes(d, static_cast<int64_t>(src.size()))));
  for (size_t i = 0; i < src.size(); ++i) {
    uint8_t* out = w.bytes.data();
    if (d == TSR_DTYPE_F32) std::memcpy(out + 4 * i, &src[i], 4), w.value[i] = src[i];
    if (d == TSR_DTYPE_F16) put_u16(out + 2 * i, f32_to_f16(src[i])), w.value[i] = f16_value(f32_to_f16(src[i]));
    if (d == TSR_DTYPE_BF16) put_u16(out + 2 * i, f32_to_bf16(src[i])), w.value[i] = bf16_value(f32_to_bf16(src[i]));
    if (is_quant(d) && i % 32 == 0) quantize_block(d, &src[i], out + i / 32 * unit_bytes(d), &w.value[i]);
  }
  return w;
}

const tsr_dtype kWeightDtypes[] = {TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_BF16, TSR_DTYPE_Q8_0,
                                   TSR_DTYPE_Q4_0};

std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

double norm_err(const std::vector<float>& ours, const std::vector<double>& ref) {
  if (ours.size() != ref.size()) return INFINITY;
  double diff = 0, mag = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    if (!std::isfinite(ours[i])) return INFINITY;
    diff = std::max(diff, std::abs(ours[i] - ref[i]));
    mag = std::max(mag, std::abs(ref[i]));
  }
  return diff / std::max(1.0, mag);
}

// ---- a backend handle and tensors in its buffers ----

const tsr_backend_reg_iface& reg_of(const LoadedPlugin& p) { return *p.backend_reg; }

// Throws (failing the test with the plugin's message) unless the call succeeded.
// Takes the error slot, not its value: the slot is read after the call has filled it
// (the order in which arguments are evaluated is unspecified).
void check(tsr_status status, tsr_error** slot, const std::string& what) {
  tsr_error* error = slot ? *slot : nullptr;
  if (slot) *slot = nullptr;
  if (status == TSR_STATUS_OK) {
    EXPECT_EQ(error, nullptr) << what << " succeeded but stored an error";
    take_error(error);
    return;
  }
  throw std::runtime_error(what + " failed: " + take_error(error));
}

// The op of each params struct, so that a test names an op by what it passes.
constexpr tsr_op op_of(const tsr_get_rows_params*) { return TSR_OP_GET_ROWS; }
constexpr tsr_op op_of(const tsr_rms_norm_params*) { return TSR_OP_RMS_NORM; }
constexpr tsr_op op_of(const tsr_matmul_params*) { return TSR_OP_MATMUL; }
constexpr tsr_op op_of(const tsr_rope_params*) { return TSR_OP_ROPE; }
constexpr tsr_op op_of(const tsr_kv_write_params*) { return TSR_OP_KV_WRITE; }
constexpr tsr_op op_of(const tsr_attention_params*) { return TSR_OP_ATTENTION; }
constexpr tsr_op op_of(const tsr_silu_mul_params*) { return TSR_OP_SILU_MUL; }
constexpr tsr_op op_of(const tsr_add_params*) { return TSR_OP_ADD; }
constexpr tsr_op op_of(const tsr_copy_blocks_params*) { return TSR_OP_COPY_BLOCKS; }
constexpr tsr_op op_of(const tsr_mul_params*) { return TSR_OP_MUL; }
constexpr tsr_op op_of(const tsr_scale_params*) { return TSR_OP_SCALE; }
constexpr tsr_op op_of(const tsr_gelu_params*) { return TSR_OP_GELU; }  // GELU_MUL is enqueued by its id
constexpr tsr_op op_of(const tsr_layer_norm_params*) { return TSR_OP_LAYER_NORM; }
constexpr tsr_op op_of(const tsr_bias_add_params*) { return TSR_OP_BIAS_ADD; }
constexpr tsr_op op_of(const tsr_softmax_params*) { return TSR_OP_SOFTMAX; }
constexpr tsr_op op_of(const tsr_top_k_params*) { return TSR_OP_TOP_K; }
constexpr tsr_op op_of(const tsr_matmul_id_params*) { return TSR_OP_MATMUL_ID; }
constexpr tsr_op op_of(const tsr_softcap_params*) { return TSR_OP_SOFTCAP; }
constexpr tsr_op op_of(const tsr_cast_params*) { return TSR_OP_CAST; }
constexpr tsr_op op_of(const tsr_moe_combine_params*) { return TSR_OP_MOE_COMBINE; }
constexpr tsr_op op_of(const tsr_swiglu_oai_params*) { return TSR_OP_SWIGLU_OAI; }

// A backend handle of the plugin with a stream of its own, and the entries the tests call,
// each with its args struct filled in. The *_status forms return what the plugin did.
class Device {
 public:
  explicit Device(const LoadedPlugin& p) : r(reg_of(p)), t(*r.backend) {
    const tsr_backend_params params{sizeof(tsr_backend_params), 0, 1, nullptr};
    tsr_backend_create_args create{sizeof(create), &r, &params, nullptr};
    tsr_error* e = nullptr;
    check(r.backend_create(&create, &e), &e, "backend_create");
    b = create.backend;
    s = new_stream();
  }
  ~Device() {
    t.stream_destroy(b, s);
    t.backend_destroy(b);
  }

  bool supports(tsr_op op, tsr_dtype d, const void* params = nullptr) const {
    const tsr_op_support_query q{sizeof(q), op, 1, &d, params};
    return t.supports(b, &q) != 0;
  }

  std::shared_ptr<tsr_buffer> alloc(uint64_t size) {
    tsr_buffer_alloc_args a{sizeof(a), b, size, nullptr};
    tsr_error* e = nullptr;
    check(t.buffer_alloc(&a, &e), &e, "buffer_alloc");
    return {a.buffer, [this](tsr_buffer* x) { t.buffer_free(b, x); }};
  }
  tsr_status write_status(tsr_stream* st, tsr_buffer* buf, uint64_t off, const void* src, uint64_t n,
                          tsr_error** e) {
    const tsr_buffer_write_args a{sizeof(a), b, st, buf, off, src, n};
    return t.buffer_write(&a, e);
  }
  tsr_status read_status(tsr_stream* st, const tsr_buffer* buf, uint64_t off, void* dst, uint64_t n,
                         tsr_error** e) {
    const tsr_buffer_read_args a{sizeof(a), b, st, buf, off, dst, n};
    return t.buffer_read(&a, e);
  }
  tsr_status memset_status(tsr_stream* st, tsr_buffer* buf, uint64_t off, int v, uint64_t n, tsr_error** e) {
    const tsr_buffer_memset_args a{sizeof(a), b, st, buf, off, n, v, 0};
    return t.buffer_memset(&a, e);
  }
  void write(tsr_buffer* buf, uint64_t off, const void* src, uint64_t n) {
    tsr_error* e = nullptr;
    check(write_status(s, buf, off, src, n, &e), &e, "buffer_write");
  }
  void read(const tsr_buffer* buf, uint64_t off, void* dst, uint64_t n) {
    tsr_error* e = nullptr;
    check(read_status(s, buf, off, dst, n, &e), &e, "buffer_read");
    sync();
  }
  void memset(tsr_buffer* buf, uint64_t off, int v, uint64_t n) {
    tsr_error* e = nullptr;
    check(memset_status(s, buf, off, v, n, &e), &e, "buffer_memset");
  }
  tsr_status sync_status(tsr_stream* st, tsr_error** e) {
    const tsr_stream_args a{sizeof(a), b, st};
    return t.stream_synchronize(&a, e);
  }
  void sync() {
    tsr_error* e = nullptr;
    check(sync_status(s, &e), &e, "stream_synchronize");
  }
  tsr_stream* new_stream() {
    tsr_stream_args a{sizeof(a), b, nullptr};
    tsr_error* e = nullptr;
    check(t.stream_create(&a, &e), &e, "stream_create");
    return a.stream;
  }
  tsr_status event_status(tsr_status (*entry)(const tsr_event_args*, tsr_error**), tsr_event* ev,
                          tsr_stream* st, tsr_error** e) {
    const tsr_event_args a{sizeof(a), b, ev, st};
    return entry(&a, e);
  }
  template <class P>
  tsr_status enqueue_status(const P* p, tsr_error** e, tsr_backend* backend, tsr_stream* st) {
    const tsr_op_desc d{sizeof(d), op_of(p), 0, p, nullptr};
    return t.enqueue(backend, st, &d, e);
  }
  template <class P>
  void run(const P& p, const char* what) {
    tsr_error* e = nullptr;
    check(enqueue_status(&p, &e, b, s), &e, what);
  }
  tsr_status graph_begin_status(tsr_stream* st, tsr_error** e) {
    const tsr_stream_args a{sizeof(a), b, st};
    return t.graph_begin(&a, e);
  }
  tsr_status graph_end_status(tsr_graph** g, tsr_error** e) {
    tsr_graph_args a{sizeof(a), b, s, nullptr};
    const tsr_status status = t.graph_end(&a, e);
    *g = a.graph;
    return status;
  }
  tsr_status graph_launch_status(const tsr_graph* g, tsr_error** e) {
    const tsr_graph_args a{sizeof(a), b, s, const_cast<tsr_graph*>(g)};
    return t.graph_launch(&a, e);
  }

  const tsr_backend_reg_iface& r;
  const tsr_backend_iface& t;
  tsr_backend* b = nullptr;
  tsr_stream* s = nullptr;
};

Device& dut() {
  static Device d(plugin());
  return d;
}

Device* ref_device() {
  static std::unique_ptr<Device> d = reference() ? std::make_unique<Device>(*reference()) : nullptr;
  return d.get();
}

// A tensor in its own buffer, rows padded by `pad` bytes.
struct DevTensor {
  Device* dev = nullptr;
  std::shared_ptr<tsr_buffer> buf;
  uint64_t size = 0;
  tsr_tensor t{};
  int64_t rows = 0, packed = 0, stride = 0;

  const tsr_tensor* get() const { return &t; }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> all(size);
    dev->read(buf.get(), 0, all.data(), size);
    return all;
  }
  template <class T = float>
  std::vector<T> packed_rows() const {
    const std::vector<uint8_t> all = bytes();
    std::vector<T> v(static_cast<size_t>(rows * packed) / sizeof(T));
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(reinterpret_cast<uint8_t*>(v.data()) + r * packed, &all[r * stride], packed);
    }
    return v;
  }
  bool pad_untouched() const {
    const std::vector<uint8_t> all = bytes();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = packed; i < stride; ++i) {
        if (all[r * stride + i] != 0xFF) return false;
      }
    }
    return true;
  }
};

DevTensor make_tensor(Device& dev, tsr_dtype dtype, std::vector<int64_t> shape,
                      const void* host = nullptr, int64_t pad = 0) {
  DevTensor d;
  d.dev = &dev;
  tsr_tensor& t = d.t;
  t.struct_size = sizeof(tsr_tensor);
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), t.shape);
  int64_t stride = row_bytes(dtype, shape.back());
  t.strides[t.ndim - 1] = is_quant(dtype) || dtype == TSR_DTYPE_FP8_E4M3 ? 1 : unit_bytes(dtype);
  for (int i = t.ndim - 2; i >= 0; --i) t.strides[i] = stride, stride *= shape[i];
  const bool one_d = t.ndim == 1;
  d.rows = one_d ? 1 : shape[0];
  d.packed = one_d ? row_bytes(dtype, shape[0]) : t.strides[0];
  d.stride = d.packed + pad;
  if (!one_d) t.strides[0] = d.stride;
  d.size = static_cast<uint64_t>(std::max<int64_t>(d.rows * d.stride, 1));
  d.buf = dev.alloc(d.size);
  dev.memset(d.buf.get(), 0, 0xFF, d.size);
  t.data = dev.t.buffer_base(d.buf.get());
  for (int64_t r = 0; host != nullptr && r < d.rows; ++r) {
    dev.write(d.buf.get(), r * d.stride, static_cast<const uint8_t*>(host) + r * d.packed, d.packed);
  }
  return d;
}

template <class T>
DevTensor upload(Device& dev, const std::vector<T>& v, tsr_dtype dtype, std::vector<int64_t> shape,
                 int64_t pad = 0) {
  return make_tensor(dev, dtype, std::move(shape), v.data(), pad);
}

DevTensor upload_i32(Device& dev, const std::vector<int32_t>& v) {
  return upload(dev, v, TSR_DTYPE_I32, {static_cast<int64_t>(v.size())});
}

// Runs `run` on the plugin (and the reference plugin, if any) and compares its output
// with the double-precision reference.
void expect_matches(const std::vector<double>& ref, const std::function<std::vector<float>(Device&)>& run,
                    double tol = kTol) {
  const std::vector<float> ours = run(dut());
  EXPECT_LT(norm_err(ours, ref), tol) << "against the double-precision reference";
  if (Device* other = ref_device()) {
    const std::vector<float> theirs = run(*other);
    EXPECT_LT(norm_err(ours, std::vector<double>(theirs.begin(), theirs.end())), tol)
        << "against the --reference plugin";
  }
}

// Whether the plugin sees a device; asked before dut() creates a backend, which needs one.
bool has_device(std::string* reason = nullptr) {
  tsr_device_count_args a{sizeof(a), &reg_of(plugin()), 0, 0};
  tsr_error* e = nullptr;
  const tsr_status status = reg_of(plugin()).device_count(&a, &e);
  const std::string error = take_error(e);
  if (reason) *reason = status != TSR_STATUS_OK ? error : "device_count is 0";
  return status == TSR_STATUS_OK && a.count >= 1;
}

class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!has_device(&reason)) GTEST_SKIP() << "no device: " << reason;
  }
  std::mt19937 rng{20240601};
};

// A device backend on a machine without its device (e.g. CUDA without a GPU) must refuse
// with DEVICE_ERROR and a message, from device_count and from backend_create, never crash.
TEST(BackendNoDevice, IsRefusedCleanly) {
  if (has_device()) GTEST_SKIP() << "a device is present";
  const tsr_backend_reg_iface& r = reg_of(plugin());
  tsr_device_count_args count{sizeof(count), &r, 0, 0};
  tsr_error* e = nullptr;
  const tsr_status status = r.device_count(&count, &e);
  if (status == TSR_STATUS_OK) {
    EXPECT_EQ(e, nullptr);
  } else {
    EXPECT_EQ(status, TSR_STATUS_DEVICE_ERROR);
    ASSERT_NE(e, nullptr) << "no error object";
    EXPECT_GT(std::strlen(host_api()->error_message(e)), 0u) << "empty message";
    std::printf("refused: %s\n", host_api()->error_message(e));
    take_error(e);
  }
  const tsr_backend_params params{sizeof(tsr_backend_params), 0, 1, nullptr};
  tsr_backend_create_args create{sizeof(create), &r, &params, nullptr};
  EXPECT_NE(r.backend_create(&create, &e), TSR_STATUS_OK);
  EXPECT_EQ(create.backend, nullptr);
  ASSERT_NE(e, nullptr) << "backend_create without a device stored no error";
  take_error(e);
  EXPECT_NE(r.backend_create(&create, nullptr), TSR_STATUS_OK) << "without an error pointer";
}

// ---- devices, handles, buffers, streams, events ----

TEST_F(BackendTest, DevicePropsAreWellFormed) {
  const tsr_backend_reg_iface& r = dut().r;
  tsr_device_count_args count{sizeof(count), &r, 0, 0};
  check(r.device_count(&count, nullptr), nullptr, "device_count");
  tsr_device_props props{};
  props.struct_size = sizeof(props);
  tsr_device_props_args pa{sizeof(pa), &r, 0, 0, &props};
  tsr_error* e = nullptr;
  check(r.device_props(&pa, &e), &e, "device_props");
  EXPECT_NE(std::memchr(props.name, 0, sizeof(props.name)), nullptr) << "name not NUL-terminated";
  EXPECT_GE(props.struct_size, sizeof(props));
}

TEST_F(BackendTest, BufferRoundTrips) {
  Device& d = dut();
  const uint64_t n = 1000;
  auto buf = d.alloc(n);
  std::vector<uint8_t> data(n), back(n);
  std::iota(data.begin(), data.end(), uint8_t{7});
  d.write(buf.get(), 0, data.data(), n);
  d.read(buf.get(), 0, back.data(), n);
  EXPECT_EQ(back, data);
  d.memset(buf.get(), 100, 0xA5, 50);
  std::fill_n(data.begin() + 100, 50, 0xA5);
  d.write(buf.get(), 997, data.data() + 997, 3);  // the last bytes, unaligned
  d.read(buf.get(), 0, back.data(), n);
  EXPECT_EQ(back, data);
  std::vector<uint8_t> part(10);
  d.read(buf.get(), 95, part.data(), 10);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + 95));
  auto empty = d.alloc(0);  // zero bytes is a valid buffer
  d.write(empty.get(), 0, data.data(), 0);
}

TEST_F(BackendTest, BufferFromHostSeesHostBytes) {
  Device& d = dut();
  if (d.t.buffer_from_host == nullptr) GTEST_SKIP() << "buffer_from_host is optional and absent";
  std::vector<uint8_t> host(256);
  std::iota(host.begin(), host.end(), uint8_t{0});
  tsr_buffer_from_host_args a{sizeof(a), d.b, host.data(), host.size(), nullptr};
  tsr_error* e = nullptr;
  check(d.t.buffer_from_host(&a, &e), &e, "buffer_from_host");
  std::vector<uint8_t> back(host.size());
  d.read(a.buffer, 0, back.data(), back.size());
  EXPECT_EQ(back, host);
  d.t.buffer_free(d.b, a.buffer);
}

TEST_F(BackendTest, EventsOrderStreams) {
  Device& d = dut();
  const tsr_backend_iface& t = d.t;
  tsr_stream* other = d.new_stream();
  tsr_event_args created{sizeof(created), d.b, nullptr, nullptr};
  tsr_error* e = nullptr;
  check(t.event_create(&created, &e), &e, "event_create");
  tsr_event* event = created.event;
  auto buf = d.alloc(4096);
  std::vector<uint8_t> data(4096, 0x3C), back(4096);
  d.write(buf.get(), 0, data.data(), data.size());
  check(d.event_status(t.event_record, event, d.s, &e), &e, "event_record");
  check(d.event_status(t.event_wait, event, other, &e), &e, "event_wait");
  check(d.read_status(other, buf.get(), 0, back.data(), back.size(), &e), &e, "buffer_read");
  check(d.sync_status(other, &e), &e, "stream_synchronize");
  EXPECT_EQ(back, data);
  check(d.event_status(t.event_synchronize, event, nullptr, &e), &e, "event_synchronize");
  t.event_destroy(d.b, event);
  t.stream_destroy(d.b, other);
}

// The optional feature "tsr_host_memory" (host_memory.h): page-aligned memory that a write
// reads from and a read writes into on a stream, each in flight until the stream is
// synchronized, and a size of 0 that allocates nothing.
TEST_F(BackendTest, HostMemoryCopiesBothWays) {
  Device& d = dut();
  const auto* hm = d.r.get_proc != nullptr
                       ? static_cast<const tsr_host_memory_iface*>(d.r.get_proc(&d.r, TSR_HOST_MEMORY_PROC))
                       : nullptr;
  if (hm == nullptr) GTEST_SKIP() << "the feature " TSR_HOST_MEMORY_PROC " is optional and absent";
  ASSERT_GE(hm->struct_size, sizeof(tsr_host_memory_iface));
  const uint64_t n = 3 * 4096 + 17;
  tsr_host_alloc_args a{sizeof(a), d.b, n, nullptr};
  tsr_error* e = nullptr;
  check(hm->host_alloc(&a, &e), &e, "host_alloc");
  ASSERT_NE(a.ptr, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.ptr) % 4096, 0u);
  auto* host = static_cast<uint8_t*>(a.ptr);
  for (uint64_t i = 0; i < n; ++i) host[i] = uint8_t(i * 31 + 5);
  const std::vector<uint8_t> want(host, host + n);
  auto buf = d.alloc(n);
  check(d.write_status(d.s, buf.get(), 0, host, n, &e), &e, "buffer_write");
  d.sync();  // the source may be read until here
  std::memset(host, 0, n);
  check(d.read_status(d.s, buf.get(), 0, host, n, &e), &e, "buffer_read");
  d.sync();
  EXPECT_TRUE(std::equal(want.begin(), want.end(), host));
  hm->host_free(d.b, a.ptr);
  hm->host_free(d.b, nullptr);  // ignored
  tsr_host_alloc_args none{sizeof(none), d.b, 0, reinterpret_cast<void*>(uintptr_t{1})};
  check(hm->host_alloc(&none, &e), &e, "host_alloc of 0 bytes");
  EXPECT_EQ(none.ptr, nullptr);
}

TEST_F(BackendTest, SupportsWhatAModelNeeds) {
  for (int op = 0; op <= TSR_OP_COPY_BLOCKS; ++op) {  // a Llama forward's; later ops are optional
    if (op == TSR_OP_MATMUL || op == TSR_OP_GET_ROWS) continue;
    EXPECT_TRUE(dut().supports(static_cast<tsr_op>(op), TSR_DTYPE_F32)) << "op " << op << " F32";
  }
  EXPECT_TRUE(dut().supports(TSR_OP_MATMUL, TSR_DTYPE_F32) || dut().supports(TSR_OP_MATMUL, TSR_DTYPE_F16))
      << "matmul supports neither F32 nor F16 weights";
  // An unassigned dtype that every kept minor's enum can hold (the gap between I8 and Q8_0;
  // 1.0's enum spans 0..31, and a value outside a plugin's enum range is undefined
  // behaviour in its C++).
  const auto bogus = static_cast<tsr_dtype>(12);
  EXPECT_FALSE(dut().supports(TSR_OP_MATMUL, bogus));
  const tsr_op_support_query none{sizeof(none), TSR_OP_MATMUL, 0, nullptr, nullptr};
  EXPECT_EQ(dut().t.supports(dut().b, &none), 0);
  // An op this ABI does not define is unsupported, and enqueuing it fails cleanly. A C
  // caller can pass any int; the kit writes it as bytes (a tsr_op of 1000 is not valid C++).
  const int32_t unknown = 1000;
  tsr_op_support_query q{sizeof(q), TSR_OP_MATMUL, 1, &bogus, nullptr};
  const tsr_dtype f32 = TSR_DTYPE_F32;
  q.dtypes = &f32;
  std::memcpy(&q.op, &unknown, sizeof(unknown));
  EXPECT_EQ(dut().t.supports(dut().b, &q), 0);
  tsr_op_desc desc{sizeof(desc), TSR_OP_MATMUL, 0, nullptr, nullptr};
  std::memcpy(&desc.op, &unknown, sizeof(unknown));
  tsr_error* e = nullptr;
  EXPECT_EQ(dut().t.enqueue(dut().b, dut().s, &desc, &e), TSR_STATUS_UNSUPPORTED);
  EXPECT_NE(e, nullptr) << "an unknown op refused without an error object";
  take_error(e);
}

// ---- ops against double-precision references ----

class WeightOpTest : public BackendTest, public ::testing::WithParamInterface<tsr_dtype> {
 protected:
  void require_support(tsr_op op) {
    if (!dut().supports(op, GetParam())) GTEST_SKIP() << "the plugin does not support this dtype";
  }
};

TEST_P(WeightOpTest, MatmulMatchesReference) {
  require_support(TSR_OP_MATMUL);
  for (int round = 0; round < 6; ++round) {
    const int64_t n = round < 2 ? round + 1 : pick(rng, 2, 40), k = 32 * pick(rng, 1, 6), m = pick(rng, 1, 45);
    const int64_t pad = round % 2 == 0 ? 0 : 20;  // strides no multiple of 16 bytes
    SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
    const std::vector<float> x = random_floats(static_cast<size_t>(n * k), rng);
    Weights w = encode(GetParam(), random_floats(static_cast<size_t>(m * k), rng));
    if (GetParam() == TSR_DTYPE_Q8_0) add_q8_minimum(w);
    std::vector<double> ref(static_cast<size_t>(n * m));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        for (int64_t c = 0; c < k; ++c) ref[i * m + j] += double(x[i * k + c]) * w.value[j * k + c];
      }
    }
    expect_matches(ref, [&](Device& dev) {
      const DevTensor dx = upload(dev, x, TSR_DTYPE_F32, {n, k}, pad);
      const DevTensor dw = upload(dev, w.bytes, GetParam(), {m, k});
      const DevTensor out = make_tensor(dev, TSR_DTYPE_F32, {n, m}, nullptr, pad / 5 * 4);
      dev.run(tsr_matmul_params{sizeof(tsr_matmul_params), out.get(), dx.get(), dw.get()}, "matmul");
      EXPECT_TRUE(out.pad_untouched());
      return out.packed_rows();
    }, GetParam() == TSR_DTYPE_F32 ? kTol : kLowPrecisionTol);
  }
}

// ---- weight packing (ABI 1.3, optional) ----

bool has_weight_pack(const tsr_backend_iface& t) { return t.weight_pack != nullptr; }

// A weight the backend packs multiplies as the stored one; one it does not pack comes back
// UNSUPPORTED with nothing allocated and no error. Rows in and out of groups of 16 and 8.
TEST_P(WeightOpTest, PackedWeightsMultiplyAsStored) {
  require_support(TSR_OP_MATMUL);
  Device& d = dut();
  if (!has_weight_pack(d.t)) GTEST_SKIP() << "weight_pack is optional (ABI 1.3) and absent";
  int packed_count = 0;
  for (const int64_t m : {16, 32, 24, 5}) {
    const int64_t n = pick(rng, 1, 20), k = 32 * pick(rng, 1, 6);
    SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
    const std::vector<float> x = random_floats(static_cast<size_t>(n * k), rng);
    Weights w = encode(GetParam(), random_floats(static_cast<size_t>(m * k), rng));
    if (GetParam() == TSR_DTYPE_Q8_0) add_q8_minimum(w);
    const DevTensor dw = upload(d, w.bytes, GetParam(), {m, k});
    tsr_tensor packed{};
    packed.struct_size = sizeof(packed);
    tsr_weight_pack_args args{sizeof(args), d.b, dw.get(), &packed, nullptr};
    tsr_error* e = nullptr;
    const tsr_status status = d.t.weight_pack(&args, &e);
    tsr_buffer* buffer = args.buffer;
    if (status == TSR_STATUS_UNSUPPORTED && e == nullptr) {
      EXPECT_EQ(buffer, nullptr) << "UNSUPPORTED with a buffer";
      continue;
    }
    check(status, &e, "weight_pack");
    ASSERT_NE(buffer, nullptr) << "weight_pack succeeded without a buffer";
    ++packed_count;
    EXPECT_EQ(packed.dtype, TSR_DTYPE_PACKED);
    EXPECT_EQ(packed.ndim, 2);
    EXPECT_EQ(packed.shape[0], m);
    EXPECT_EQ(packed.shape[1], k);
    std::vector<double> ref(static_cast<size_t>(n * m));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        for (int64_t c = 0; c < k; ++c) ref[i * m + j] += double(x[i * k + c]) * w.value[j * k + c];
      }
    }
    const DevTensor dx = upload(d, x, TSR_DTYPE_F32, {n, k});
    const DevTensor out = make_tensor(d, TSR_DTYPE_F32, {n, m});
    d.run(tsr_matmul_params{sizeof(tsr_matmul_params), out.get(), dx.get(), &packed}, "matmul (packed)");
    EXPECT_LT(norm_err(out.packed_rows(), ref), GetParam() == TSR_DTYPE_F32 ? kTol : kLowPrecisionTol);
    d.t.buffer_free(d.b, buffer);
  }
  RecordProperty("packed", packed_count);
}

TEST_P(WeightOpTest, GetRowsDecodesSelectedRows) {
  require_support(TSR_OP_GET_ROWS);
  const int64_t rows = pick(rng, 2, 20), d = 32 * pick(rng, 1, 4);
  const Weights table = encode(GetParam(), random_floats(static_cast<size_t>(rows * d), rng, -3, 3));
  std::vector<int32_t> ids(static_cast<size_t>(pick(rng, 1, 9)));
  for (int32_t& id : ids) id = static_cast<int32_t>(pick(rng, 0, rows - 1));
  std::vector<double> ref;
  for (const int32_t id : ids) ref.insert(ref.end(), table.value.begin() + id * d, table.value.begin() + (id + 1) * d);
  expect_matches(ref, [&](Device& dev) {
    const DevTensor dt = upload(dev, table.bytes, GetParam(), {rows, d});
    const DevTensor di = upload_i32(dev, ids);
    const DevTensor out = make_tensor(dev, TSR_DTYPE_F32, {static_cast<int64_t>(ids.size()), d}, nullptr, 12);
    dev.run(tsr_get_rows_params{sizeof(tsr_get_rows_params), out.get(), dt.get(), di.get()}, "get_rows");
    EXPECT_TRUE(out.pad_untouched());
    return out.packed_rows();
  });
}

INSTANTIATE_TEST_SUITE_P(Backend, WeightOpTest, ::testing::ValuesIn(kWeightDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST_F(BackendTest, RmsNormMatchesReference) {
  for (int round = 0; round < 4; ++round) {
    const int64_t n = pick(rng, 1, 6), d = pick(rng, 1, 300);
    const bool in_place = round % 2 == 1;
    const float amp = round == 2 ? 0.005f : 2.0f;  // tiny inputs make eps matter
    const float eps = 1e-5f;
    const std::vector<float> x = random_floats(static_cast<size_t>(n * d), rng, -amp, amp);
    const std::vector<float> w = random_floats(static_cast<size_t>(d), rng, 0.5f, 1.5f);
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < n; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < d; ++c) ss += double(x[r * d + c]) * x[r * d + c];
      const double scale = 1 / std::sqrt(ss / double(d) + eps);
      for (int64_t c = 0; c < d; ++c) ref[r * d + c] = x[r * d + c] * scale * w[c];
    }
    expect_matches(ref, [&](Device& dev) {
      const DevTensor dx = upload(dev, x, TSR_DTYPE_F32, {n, d}, 8);
      const DevTensor dw = upload(dev, w, TSR_DTYPE_F32, {d});
      const DevTensor fresh = make_tensor(dev, TSR_DTYPE_F32, {n, d}, nullptr, 4);
      const DevTensor& out = in_place ? dx : fresh;
      dev.run(tsr_rms_norm_params{sizeof(tsr_rms_norm_params), out.get(), dx.get(), dw.get(), eps, 0}, "rms_norm");
      EXPECT_TRUE(out.pad_untouched());
      return out.packed_rows();
    });
  }
}


// ---- graphs (ABI 1.2, optional: all four entries or none) ----

bool has_graphs(const tsr_backend_iface& t) { return t.graph_begin != nullptr; }

// Records add then silu_mul: out = silu(a + b) * b.
tsr_graph* record_add_silu(Device& d, const DevTensor& out, const DevTensor& a, const DevTensor& b) {
  tsr_error* e = nullptr;
  check(d.graph_begin_status(d.s, &e), &e, "graph_begin");
  d.run(tsr_add_params{sizeof(tsr_add_params), out.get(), a.get(), b.get()}, "add");
  d.run(tsr_silu_mul_params{sizeof(tsr_silu_mul_params), out.get(), out.get(), b.get()}, "silu_mul");
  tsr_graph* g = nullptr;
  check(d.graph_end_status(&g, &e), &e, "graph_end");
  return g;
}

// Recording runs nothing; each launch computes from what the inputs hold at that time.
TEST_F(BackendTest, GraphsReplayWithTheInputsOfTheirLaunch) {
  Device& d = dut();
  if (!has_graphs(d.t)) GTEST_SKIP() << "graphs are optional (ABI 1.2) and absent";
  const int64_t n = 3, w = 100;
  std::vector<float> a = random_floats(n * w, rng, -3, 3);
  const std::vector<float> b = random_floats(n * w, rng, -2, 2);
  const DevTensor da = upload(d, a, TSR_DTYPE_F32, {n, w}), db = upload(d, b, TSR_DTYPE_F32, {n, w});
  const DevTensor out = make_tensor(d, TSR_DTYPE_F32, {n, w});
  tsr_graph* g = record_add_silu(d, out, da, db);
  ASSERT_NE(g, nullptr);
  for (const float v : out.packed_rows()) ASSERT_TRUE(std::isnan(v)) << "recording ran an op";
  for (int launch = 0; launch < 3; ++launch) {
    a = random_floats(n * w, rng, -3, 3);
    d.write(da.buf.get(), 0, a.data(), a.size() * sizeof(float));
    tsr_error* e = nullptr;
    check(d.graph_launch_status(g, &e), &e, "graph_launch");
    std::vector<double> ref(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const double x = double(a[i]) + b[i];
      ref[i] = x / (1 + std::exp(-x)) * b[i];
    }
    EXPECT_LT(norm_err(out.packed_rows(), ref), kTol) << "launch " << launch;
  }
  d.t.graph_destroy(d.b, g);
  d.t.graph_destroy(d.b, nullptr);  // ignored
}

// While recording only ops may be enqueued; a bad op fails the recording or the launch;
// either way the recording ends and the stream runs eagerly again.
TEST_F(BackendTest, GraphRecordingRefusesWhatItCannotReplay) {
  Device& d = dut();
  if (!has_graphs(d.t)) GTEST_SKIP() << "graphs are optional (ABI 1.2) and absent";
  const std::vector<float> a(64, 1.0f), b(64, 2.0f);
  const DevTensor da = upload(d, a, TSR_DTYPE_F32, {2, 32}), db = upload(d, b, TSR_DTYPE_F32, {2, 32});
  const DevTensor wide = make_tensor(d, TSR_DTYPE_F32, {2, 64});
  tsr_error* e = nullptr;
  check(d.graph_begin_status(d.s, &e), &e, "graph_begin");
  EXPECT_NE(d.graph_begin_status(d.s, &e), TSR_STATUS_OK) << "graph_begin while recording";
  take_error(std::exchange(e, nullptr));
  EXPECT_NE(d.write_status(d.s, da.buf.get(), 0, a.data(), 16, &e), TSR_STATUS_OK)
      << "buffer_write while recording";
  take_error(std::exchange(e, nullptr));
  // A backend checks operands when it records or when it launches (backend.h).
  const tsr_add_params bad{sizeof(tsr_add_params), wide.get(), da.get(), db.get()};
  const tsr_status added = d.enqueue_status(&bad, &e, d.b, d.s);
  take_error(std::exchange(e, nullptr));
  tsr_graph* g = nullptr;
  const tsr_status ended = d.graph_end_status(&g, &e);
  take_error(std::exchange(e, nullptr));
  if (added != TSR_STATUS_OK) {
    EXPECT_NE(ended, TSR_STATUS_OK) << "graph_end after a refused op";
    EXPECT_EQ(g, nullptr);
  } else {
    ASSERT_EQ(ended, TSR_STATUS_OK) << "an op recorded without complaint";
    EXPECT_NE(d.graph_launch_status(g, &e), TSR_STATUS_OK) << "launching a bad op";
    take_error(std::exchange(e, nullptr));
    d.t.graph_destroy(d.b, g);
  }
  EXPECT_NE(d.graph_end_status(&g, &e), TSR_STATUS_OK) << "graph_end without graph_begin";
  take_error(std::exchange(e, nullptr));
  const DevTensor out = make_tensor(d, TSR_DTYPE_F32, {2, 32});
  d.run(tsr_add_params{sizeof(tsr_add_params), out.get(), da.get(), db.get()}, "add");
  for (const float v : out.packed_rows()) EXPECT_EQ(v, 3.0f) << "the stream no longer runs eagerly";
  EXPECT_NE(d.graph_begin_status(nullptr, &e), TSR_STATUS_OK) << "graph_begin on the NULL stream";
  take_error(std::exchange(e, nullptr));
}

// Rotary embedding in double precision; `factors` (n_rot / 2 divisors, ABI 1.4) can be empty.
struct RopeCase {
  int64_t n, heads, hd;
  int32_t n_rot;
  tsr_rope_mode mode;
  float base, scale;
  std::vector<int32_t> pos;
  std::vector<float> x, factors;
  float ext = 0, attn = 0, corr_low = 0, corr_high = 0;  // YaRN (ABI 2.0): off

  RopeCase(std::mt19937& rng, tsr_rope_mode m, bool with_factors)
      : n(pick(rng, 1, 6)), heads(pick(rng, 1, 4)), hd(8 * pick(rng, 1, 8)), mode(m) {
    n_rot = static_cast<int32_t>(2 * pick(rng, 1, hd / 2));  // partial rotary too
    base = pick(rng, 0, 1) ? 10000.0f : 1e6f;
    scale = 1.0f / static_cast<float>(pick(rng, 1, 4));
    for (int64_t r = 0; r < n; ++r) pos.push_back(static_cast<int32_t>(pick(rng, 0, 2047)));
    x = random_floats(static_cast<size_t>(n * heads * hd), rng);
    for (int i = 0; with_factors && i < n_rot / 2; ++i) factors.push_back(1.0f + static_cast<float>(pick(rng, 0, 31)) / 4);
  }

  std::vector<double> reference() const {
    std::vector<double> ref(x.begin(), x.end());
    const int half = n_rot / 2;
    for (int64_t r = 0; r < n * heads; ++r) {
      double* v = &ref[static_cast<size_t>(r * hd)];
      for (int i = 0; i < half; ++i) {
        const double extrap = pos[r / heads] * std::pow(double(base), -2.0 * i / n_rot) /
                              (factors.empty() ? 1.0 : double(factors[size_t(i)]));
        double theta = extrap * scale, mscale = attn == 0 ? 1.0 : attn;
        if (ext != 0) {  // llama.cpp's rope_yarn
          const double y = (i - corr_low) / std::max(0.001, double(corr_high - corr_low));
          const double mix = (1 - std::min(1.0, std::max(0.0, y))) * ext;
          theta = theta * (1 - mix) + extrap * mix;
          mscale *= 1 + 0.1 * std::log(1.0 / scale);
        }
        const int a = mode == TSR_ROPE_NORMAL ? 2 * i : i, b = mode == TSR_ROPE_NORMAL ? 2 * i + 1 : i + half;
        const double x0 = v[a], x1 = v[b];
        v[a] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * mscale;
        v[b] = (x0 * std::sin(theta) + x1 * std::cos(theta)) * mscale;
      }
    }
    return ref;
  }

  std::vector<float> run(Device& dev) const {
    const DevTensor dx = upload(dev, x, TSR_DTYPE_F32, {n, heads, hd}, 4);
    const DevTensor dp = upload_i32(dev, pos);
    const DevTensor df = factors.empty() ? DevTensor{} : upload(dev, factors, TSR_DTYPE_F32, {int64_t(factors.size())});
    const tsr_rope_params p{sizeof(tsr_rope_params), dx.get(), dp.get(), n_rot, mode, base, scale,
                            factors.empty() ? nullptr : df.get(), ext, attn, corr_low, corr_high};
    dev.run(p, "rope");
    EXPECT_TRUE(dx.pad_untouched());
    return dx.packed_rows();
  }
};

TEST_F(BackendTest, RopeMatchesReference) {
  for (const tsr_rope_mode mode : {TSR_ROPE_NORMAL, TSR_ROPE_NEOX, TSR_ROPE_NORMAL, TSR_ROPE_NEOX}) {
    const RopeCase c(rng, mode, false);
    SCOPED_TRACE("mode " + std::to_string(mode) + " n_rot " + std::to_string(c.n_rot) + " head_dim " + std::to_string(c.hd));
    expect_matches(c.reference(), [&](Device& dev) { return c.run(dev); });
  }
}

// YaRN context extension (Qwen, DeepSeek, gpt-oss): the interpolated and extrapolated
// angles mixed by the ramp between corr_low and corr_high, cos and sin scaled; partial
// rotary included (n_rot < head_dim in most cases).
TEST_F(BackendTest, RopeYarnMatchesReference) {
  for (const tsr_rope_mode mode : {TSR_ROPE_NORMAL, TSR_ROPE_NEOX, TSR_ROPE_NEOX}) {
    RopeCase c(rng, mode, mode == TSR_ROPE_NORMAL);
    c.scale = 0.25f;
    c.ext = 1.0f;
    c.attn = 0.9f;
    c.corr_low = static_cast<float>(pick(rng, 0, c.n_rot / 4));
    c.corr_high = static_cast<float>(pick(rng, c.n_rot / 4 + 1, c.n_rot / 2 + 1));
    const tsr_rope_params probe{sizeof(probe), nullptr, nullptr, c.n_rot, mode, c.base, c.scale, nullptr,
                                c.ext, c.attn, c.corr_low, c.corr_high};
    if (!dut().supports(TSR_OP_ROPE, TSR_DTYPE_F32, &probe)) GTEST_SKIP() << "YaRN RoPE is not supported (optional)";
    SCOPED_TRACE("mode " + std::to_string(mode) + " n_rot " + std::to_string(c.n_rot) + " corr " +
                 std::to_string(c.corr_low) + ".." + std::to_string(c.corr_high));
    expect_matches(c.reference(), [&](Device& dev) { return c.run(dev); });
  }
}

// Llama 3.1's per-pair divisors of the angle (rope_freqs.weight). A backend that does not
// read them says so through supports() (a 1.x plugin built before 1.4, behind the adapter),
// and then enqueuing them must fail rather than rotate without them.
TEST_F(BackendTest, RopeFreqFactorsMatchReference) {
  const tsr_tensor any{};
  const tsr_rope_params probe{sizeof(probe), nullptr, nullptr, 0, TSR_ROPE_NORMAL, 0, 0, &any};
  if (!dut().supports(TSR_OP_ROPE, TSR_DTYPE_F32, &probe)) {
    const RopeCase c(rng, TSR_ROPE_NORMAL, true);
    EXPECT_THROW(c.run(dut()), std::runtime_error) << "freq_factors unsupported, yet enqueued";
    GTEST_SKIP() << "the backend does not read rope freq_factors (ABI 1.4 added them)";
  }
  for (const tsr_rope_mode mode : {TSR_ROPE_NORMAL, TSR_ROPE_NEOX, TSR_ROPE_NORMAL, TSR_ROPE_NEOX}) {
    const RopeCase c(rng, mode, true);
    SCOPED_TRACE("mode " + std::to_string(mode) + " n_rot " + std::to_string(c.n_rot) + " head_dim " + std::to_string(c.hd));
    EXPECT_LT(norm_err(c.run(dut()), c.reference()), kTol) << "against the double-precision reference";
  }
}

// ---- paged KV: kv_write, attention, copy_blocks ----

// Sequences' keys and values kept contiguously for the reference, written by kv_write
// into a paged cache through shuffled block tables, with -1 rows that must land nowhere.
struct Paged {
  int32_t block_size = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, max_blocks = 0, slots = 0;
  std::vector<int32_t> lens, tables;
  std::vector<std::vector<float>> k, v;
  int64_t row() const { return kv_heads * head_dim; }
  int64_t slot(size_t s, int64_t t) const {
    return int64_t(tables[s * max_blocks + t / block_size]) * block_size + t % block_size;
  }
};

// head_dim 0: a random one of 8, 16 and 24.
Paged make_paged(std::mt19937& rng, int32_t block_size, int64_t head_dim = 0) {
  Paged c;
  c.block_size = block_size;
  c.kv_heads = pick(rng, 1, 2);
  c.head_dim = head_dim > 0 ? head_dim : 8 * pick(rng, 1, 3);
  c.heads = c.kv_heads * pick(rng, 1, 4);
  c.lens = {static_cast<int32_t>(pick(rng, 1, 9)), static_cast<int32_t>(pick(rng, 10, 40)),
            static_cast<int32_t>(pick(rng, 1, 20))};
  int64_t used = 0;
  for (const int32_t len : c.lens) {
    c.max_blocks = std::max<int64_t>(c.max_blocks, (len + block_size - 1) / block_size + 1);
    used += (len + block_size - 1) / block_size;
  }
  std::vector<int32_t> ids(static_cast<size_t>(2 * used + 1));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  c.slots = static_cast<int64_t>(ids.size()) * block_size;
  c.tables.assign(c.lens.size() * c.max_blocks, -1);
  size_t next = 0;
  for (size_t s = 0; s < c.lens.size(); ++s) {
    for (int64_t b = 0; b * block_size < c.lens[s]; ++b) c.tables[s * c.max_blocks + b] = ids[next++];
    c.k.push_back(random_floats(static_cast<size_t>(c.lens[s] * c.row()), rng));
    c.v.push_back(random_floats(static_cast<size_t>(c.lens[s] * c.row()), rng));
  }
  return c;
}

struct DevCache {
  DevTensor k, v;
};

DevCache write_cache(Device& dev, const Paged& c, tsr_dtype dtype = TSR_DTYPE_F32) {
  std::vector<float> k_rows, v_rows;
  std::vector<int32_t> mapping;
  for (size_t s = 0; s < c.lens.size(); ++s) {
    for (int64_t t = 0; t < c.lens[s]; ++t) {
      k_rows.insert(k_rows.end(), c.k[s].begin() + t * c.row(), c.k[s].begin() + (t + 1) * c.row());
      v_rows.insert(v_rows.end(), c.v[s].begin() + t * c.row(), c.v[s].begin() + (t + 1) * c.row());
      mapping.push_back(static_cast<int32_t>(c.slot(s, t)));
      if (t % 3 == 0) {  // a skipped row with data that must not land anywhere
        k_rows.insert(k_rows.end(), c.row(), 1e30f);
        v_rows.insert(v_rows.end(), c.row(), 1e30f);
        mapping.push_back(-1);
      }
    }
  }
  const auto n = static_cast<int64_t>(mapping.size());
  DevCache cache{make_tensor(dev, dtype, {c.slots, c.kv_heads, c.head_dim}),
                 make_tensor(dev, dtype, {c.slots, c.kv_heads, c.head_dim})};
  const DevTensor dk = upload(dev, k_rows, TSR_DTYPE_F32, {n, c.kv_heads, c.head_dim}, 4);
  const DevTensor dv = upload(dev, v_rows, TSR_DTYPE_F32, {n, c.kv_heads, c.head_dim});
  const DevTensor dm = upload_i32(dev, mapping);
  dev.run(tsr_kv_write_params{sizeof(tsr_kv_write_params), cache.k.get(), cache.v.get(), dk.get(), dv.get(), dm.get()}, "kv_write");
  return cache;
}

TEST_F(BackendTest, KvWriteFillsMappedSlots) {
  const Paged c = make_paged(rng, 4);
  std::vector<double> ref;
  for (const auto* kv : {&c.k, &c.v}) {
    std::vector<double> cache(static_cast<size_t>(c.slots * c.row()), NAN);
    for (size_t s = 0; s < c.lens.size(); ++s) {
      for (int64_t t = 0; t < c.lens[s]; ++t) {
        std::copy_n((*kv)[s].begin() + t * c.row(), c.row(), cache.begin() + c.slot(s, t) * c.row());
      }
    }
    ref.insert(ref.end(), cache.begin(), cache.end());
  }
  // Unwritten slots stay 0xFF (NaN): compare written slots only.
  std::vector<bool> unwritten(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    unwritten[i] = std::isnan(ref[i]);
    if (unwritten[i]) ref[i] = 0;
  }
  const auto written = [&](std::vector<float> got) {
    for (size_t i = 0; i < got.size() && i < unwritten.size(); ++i) {
      if (unwritten[i]) got[i] = 0;
    }
    return got;
  };
  expect_matches(ref, [&](Device& dev) {
    const DevCache cache = write_cache(dev, c);
    std::vector<float> got = cache.k.packed_rows();
    const std::vector<float> v = cache.v.packed_rows();
    got.insert(got.end(), v.begin(), v.end());
    return written(got);
  });
}

// Batch: sequence 0 prefills from scratch, 1 continues a chunked prefill, 2 decodes.
struct Batch {
  std::vector<int32_t> tables, lens, qsl{0}, pos;
  int64_t rows() const { return static_cast<int64_t>(pos.size()); }
};

Batch mixed_batch(const Paged& c) {
  Batch b;
  const int32_t from[] = {0, c.lens[1] / 2, c.lens[2] - 1};
  for (size_t s = 0; s < c.lens.size(); ++s) {
    b.tables.insert(b.tables.end(), c.tables.begin() + s * c.max_blocks, c.tables.begin() + (s + 1) * c.max_blocks);
    b.lens.push_back(c.lens[s]);
    for (int32_t p = from[s]; p < c.lens[s]; ++p) b.pos.push_back(p);
    b.qsl.push_back(static_cast<int32_t>(b.pos.size()));
  }
  return b;
}

// Attention's optional parts (ABI 2.0): all off by default.
struct AttentionExtras {
  int32_t window = 0;
  float softcap = 0;
  std::vector<float> sinks;  // [heads], empty for none
};

std::vector<double> ref_attention(const Paged& c, const Batch& b, const std::vector<float>& q,
                                  const AttentionExtras& x = {}) {
  const double scale = 1 / std::sqrt(double(c.head_dim));
  std::vector<double> out;
  for (size_t s = 0; s < c.lens.size(); ++s) {
    for (int32_t r = b.qsl[s]; r < b.qsl[s + 1]; ++r) {
      for (int64_t h = 0; h < c.heads; ++h) {
        const float* qv = &q[(r * c.heads + h) * c.head_dim];
        const int64_t off = h / (c.heads / c.kv_heads) * c.head_dim;
        const int64_t first = x.window > 0 ? std::max<int64_t>(0, b.pos[r] + 1 - x.window) : 0;
        std::vector<double> w(static_cast<size_t>(b.pos[r] + 1), -INFINITY);
        for (int64_t t = first; t <= b.pos[r]; ++t) {
          w[t] = 0;
          for (int64_t d = 0; d < c.head_dim; ++d) w[t] += double(qv[d]) * c.k[s][t * c.row() + off + d];
          w[t] *= scale;
          if (x.softcap > 0) w[t] = x.softcap * std::tanh(w[t] / x.softcap);
        }
        const double sink = x.sinks.empty() ? -INFINITY : double(x.sinks[size_t(h)]);
        const double mx = std::max(sink, *std::max_element(w.begin(), w.end()));
        double denom = x.sinks.empty() ? 0.0 : std::exp(sink - mx);
        for (double& v : w) denom += (v = std::exp(v - mx));
        for (int64_t d = 0; d < c.head_dim; ++d) {
          double acc = 0;
          for (int64_t t = 0; t <= b.pos[r]; ++t) acc += w[t] * c.v[s][t * c.row() + off + d];
          out.push_back(acc / denom);
        }
      }
    }
  }
  return out;
}

// The operands of one attention call.
struct AttentionCall {
  DevCache cache;
  DevTensor out, q, tables, lens, qsl, pos;
  int32_t block_size;
  float scale;
  tsr_attention_params params() const {
    return {sizeof(tsr_attention_params), out.get(), q.get(), cache.k.get(), cache.v.get(), tables.get(),
            lens.get(), qsl.get(), pos.get(), block_size, scale};
  }
};

AttentionCall make_attention(Device& dev, const Paged& c, const Batch& b, const std::vector<float>& q,
                             tsr_dtype cache_dtype = TSR_DTYPE_F32) {
  const int64_t n = b.rows(), seqs = static_cast<int64_t>(b.lens.size());
  return {write_cache(dev, c, cache_dtype),
          make_tensor(dev, TSR_DTYPE_F32, {n, c.heads, c.head_dim}, nullptr, 4),
          upload(dev, q, TSR_DTYPE_F32, {n, c.heads, c.head_dim}, 12),
          upload(dev, b.tables, TSR_DTYPE_I32, {seqs, c.max_blocks}),
          upload_i32(dev, b.lens), upload_i32(dev, b.qsl), upload_i32(dev, b.pos),
          c.block_size, static_cast<float>(1 / std::sqrt(double(c.head_dim)))};
}

class AttentionTest : public BackendTest, public ::testing::WithParamInterface<int32_t> {};

TEST_P(AttentionTest, PagedGqaMatchesContiguousReference) {
  for (int round = 0; round < 3; ++round) {
    const Paged c = make_paged(rng, GetParam());
    const Batch b = mixed_batch(c);
    SCOPED_TRACE("heads " + std::to_string(c.heads) + " kv_heads " + std::to_string(c.kv_heads) +
                 " head_dim " + std::to_string(c.head_dim));
    const std::vector<float> q = random_floats(static_cast<size_t>(b.rows() * c.heads * c.head_dim), rng);
    expect_matches(ref_attention(c, b, q), [&](Device& dev) {
      const AttentionCall a = make_attention(dev, c, b, q);
      dev.run(a.params(), "attention");
      EXPECT_TRUE(a.out.pad_untouched());
      return a.out.packed_rows();
    });
  }
}

// Sliding window, logit softcap and per-head sinks, alone and together, where supports()
// says the backend implements them for these operands.
TEST_P(AttentionTest, WindowSoftcapAndSinksMatchReference) {
  const Paged c = make_paged(rng, GetParam());
  const Batch b = mixed_batch(c);
  const std::vector<float> q = random_floats(static_cast<size_t>(b.rows() * c.heads * c.head_dim), rng);
  const std::vector<float> sinks = random_floats(static_cast<size_t>(c.heads), rng, -2, 2);
  const AttentionExtras cases[] = {{3, 0, {}}, {0, 1.5f, {}}, {0, 0, sinks}, {5, 2.0f, sinks}};
  int ran = 0;
  for (const AttentionExtras& x : cases) {
    SCOPED_TRACE("window " + std::to_string(x.window) + " softcap " + std::to_string(x.softcap) + " sinks " +
                 std::to_string(x.sinks.size()));
    const tsr_tensor any{};  // supports() is asked about the params' presence only
    tsr_attention_params probe{};
    probe.struct_size = sizeof(probe);
    probe.window = x.window;
    probe.softcap = x.softcap;
    probe.sinks = x.sinks.empty() ? nullptr : &any;
    if (!dut().supports(TSR_OP_ATTENTION, TSR_DTYPE_F32, &probe)) continue;
    ++ran;
    expect_matches(ref_attention(c, b, q, x), [&](Device& dev) {
      const AttentionCall a = make_attention(dev, c, b, q);
      const DevTensor ds = x.sinks.empty() ? DevTensor{} : upload(dev, x.sinks, TSR_DTYPE_F32, {c.heads});
      tsr_attention_params p = a.params();
      p.window = x.window;
      p.softcap = x.softcap;
      p.sinks = x.sinks.empty() ? nullptr : ds.get();
      dev.run(p, "attention");
      return a.out.packed_rows();
    });
  }
  if (ran == 0) GTEST_SKIP() << "the backend implements none of attention's optional parts";
}

// The values a row of `dtype` holds (the decoders of `encode`).
// An E4M3 byte (OCP "fn": bias 7, 3 mantissa bits, 0x7f / 0xff NaN).
double e4m3_value(uint8_t b) {
  const int exp = (b >> 3) & 0x0f, m = b & 0x07;
  if (exp == 0x0f && m == 0x07) return std::nan("");
  const double a = exp == 0 ? m * std::ldexp(1.0, -9) : std::ldexp(1.0 + m / 8.0, exp - 7);
  return (b & 0x80) ? -a : a;
}

// One row of n elements of `d` (abi.h's layouts; FP8_E4M3: an f32 scale, then a byte per
// element, multiplied in f32 as a kernel does).
std::vector<double> decode(tsr_dtype d, const uint8_t* row, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  float fp8_scale = 0;
  if (d == TSR_DTYPE_FP8_E4M3) std::memcpy(&fp8_scale, row, 4);
  for (int64_t i = 0; i < n; ++i) {
    if (d == TSR_DTYPE_FP8_E4M3) v[i] = static_cast<float>(e4m3_value(row[4 + i])) * fp8_scale;
    uint16_t h = 0;
    if (d == TSR_DTYPE_F16 || d == TSR_DTYPE_BF16) std::memcpy(&h, row + 2 * i, 2);
    if (d == TSR_DTYPE_F16) v[i] = f16_value(h);
    if (d == TSR_DTYPE_BF16) v[i] = bf16_value(h);
    if (!is_quant(d)) continue;
    const uint8_t* block = row + i / 32 * unit_bytes(d);
    std::memcpy(&h, block, 2);
    const int j = int(i % 32);
    const int q = d == TSR_DTYPE_Q8_0 ? int(static_cast<int8_t>(block[2 + j]))
                                      : (j < 16 ? block[2 + j] & 0x0f : block[2 + j - 16] >> 4) - 8;
    v[i] = f16_value(h) * q;
  }
  return v;
}

// The keys and values a cache written by write_cache holds, as a Paged of those values.
Paged stored_values(const Paged& c, const DevCache& cache, tsr_dtype d) {
  Paged stored = c;
  for (auto [dev, kv] : {std::pair{&cache.k, &stored.k}, {&cache.v, &stored.v}}) {
    const std::vector<uint8_t> bytes = dev->packed_rows<uint8_t>();
    const int64_t head = row_bytes(d, c.head_dim), row = c.kv_heads * head;  // a row per head
    for (size_t s = 0; s < c.lens.size(); ++s) {
      for (int64_t t = 0; t < c.lens[s]; ++t) {
        for (int64_t h = 0; h < c.kv_heads; ++h) {
          const std::vector<double> v = decode(d, &bytes[c.slot(s, t) * row + h * head], c.head_dim);
          std::copy(v.begin(), v.end(), (*kv)[s].begin() + t * c.row() + h * c.head_dim);
        }
      }
    }
  }
  return stored;
}

// KV caches of the low-precision dtypes a backend supports (ABI 2.0: kv_write and attention
// take the cache's dtype; 2.3 adds FP8_E4M3, a scaled row per head): kv_write stores each
// row close to its floats (to within the dtype's precision), and attention reads exactly
// the values the cache holds.
TEST_P(AttentionTest, LowPrecisionKvCachesStoreAndReadTheirValues) {
  const std::pair<tsr_dtype, double> dtypes[] = {{TSR_DTYPE_F16, 1e-3}, {TSR_DTYPE_BF16, 8e-3},
                                                 {TSR_DTYPE_Q8_0, 1e-2}, {TSR_DTYPE_Q4_0, 0.15},
                                                 {TSR_DTYPE_FP8_E4M3, 0.05}};
  int ran = 0;
  for (const auto& [dtype, store_tol] : dtypes) {
    if (!dut().supports(TSR_OP_KV_WRITE, dtype) || !dut().supports(TSR_OP_ATTENTION, dtype)) continue;
    ++ran;
    SCOPED_TRACE(dtype_name(dtype));
    const Paged c = make_paged(rng, GetParam(), 32 * pick(rng, 1, 2));
    const Batch b = mixed_batch(c);
    const std::vector<float> q = random_floats(static_cast<size_t>(b.rows() * c.heads * c.head_dim), rng);
    const AttentionCall a = make_attention(dut(), c, b, q, dtype);
    const Paged stored = stored_values(c, a.cache, dtype);
    for (size_t s = 0; s < c.lens.size(); ++s) {
      EXPECT_LT(norm_err(c.k[s], std::vector<double>(stored.k[s].begin(), stored.k[s].end())), store_tol);
      EXPECT_LT(norm_err(c.v[s], std::vector<double>(stored.v[s].begin(), stored.v[s].end())), store_tol);
    }
    dut().run(a.params(), "attention");
    EXPECT_LT(norm_err(a.out.packed_rows(), ref_attention(stored, b, q)), kTol);
  }
  if (ran == 0) GTEST_SKIP() << "the backend has no KV cache of a low-precision dtype";
}

INSTANTIATE_TEST_SUITE_P(Backend, AttentionTest, ::testing::Values(4, 16),
                         [](const auto& info) { return "block" + std::to_string(info.param); });

TEST_F(BackendTest, CopyBlocksCopiesEveryCache) {
  const int32_t block_size = 4, num_blocks = 6, slots = block_size * num_blocks;
  const std::vector<int32_t> pairs = {0, 3, 5, 1, 2, 4};  // disjoint: order cannot matter
  for (const tsr_dtype dtype : {TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_BF16, TSR_DTYPE_Q8_0, TSR_DTYPE_FP8_E4M3}) {
    if (!dut().supports(TSR_OP_COPY_BLOCKS, dtype)) continue;
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t heads = 2, dim = 32, row = heads * row_bytes(dtype, dim);
    std::vector<uint8_t> bytes(static_cast<size_t>(slots * row));
    for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng());
    std::vector<uint8_t> want = bytes;
    for (size_t p = 0; p < pairs.size(); p += 2) {
      std::memmove(&want[pairs[p + 1] * block_size * row], &bytes[pairs[p] * block_size * row], block_size * row);
    }
    const DevTensor cache = upload(dut(), bytes, dtype, {slots, heads, dim});
    const DevTensor dp = upload(dut(), pairs, TSR_DTYPE_I32, {3, 2});
    const tsr_tensor* caches[] = {cache.get()};
    dut().run(tsr_copy_blocks_params{sizeof(tsr_copy_blocks_params), caches, 1, block_size, dp.get()}, "copy_blocks");
    EXPECT_EQ(cache.packed_rows<uint8_t>(), want);
  }
}

// ---- bad arguments: an error status with an error object, never a crash ----

// The call must fail with a non-OK status and an error object whose status matches, and
// must also fail cleanly when the caller passes no error pointer.
template <class Call>
void expect_refused(Call call, const std::string& what) {
  SCOPED_TRACE(what);
  tsr_error* error = nullptr;
  const tsr_status status = call(&error);
  EXPECT_NE(status, TSR_STATUS_OK);
  ASSERT_NE(error, nullptr) << "no error object";
  EXPECT_EQ(host_api()->error_status(error), status);
  EXPECT_GT(std::strlen(host_api()->error_message(error)), 0u) << "empty message";
  take_error(error);
  EXPECT_NE(call(nullptr), TSR_STATUS_OK) << "without an error pointer";
}

template <class P>
void expect_op_refused(const P* p, const std::string& what, tsr_backend* b = dut().b) {
  expect_refused([&](tsr_error** e) { return dut().enqueue_status(p, e, b, dut().s); }, what);
}

// ---- kernels of quant plugins (optional: kernel_register) ----

// A quant plugin's matmul, as the kit's stand-in: it records what reached it.
struct SeenKernel {
  static inline int calls = 0;
  static inline tsr_dtype w_dtype = TSR_DTYPE_F32;
  static inline int64_t w_rows = 0;
  static tsr_status matmul(const tsr_quant_matmul_args* a, tsr_error**) {
    ++calls;
    w_dtype = a->params->w->dtype;
    w_rows = a->params->w->shape[0];
    return TSR_STATUS_OK;
  }
};

// Registered kernels make supports() answer for their dtype, a matmul of that dtype
// reaches them with the op's operands, and a dtype the backend multiplies itself is refused.
TEST_F(BackendTest, QuantKernelsRunAsTheBackendsMatmul) {
  if (dut().t.kernel_register == nullptr) GTEST_SKIP() << "kernel_register is optional and absent";
  Device d(plugin());  // a backend of its own: what is registered lasts as long as the backend
  static const tsr_quant_kernels kernels{sizeof(tsr_quant_kernels), plugin().desc->name, SeenKernel::matmul};
  EXPECT_FALSE(d.supports(TSR_OP_MATMUL, TSR_DTYPE_PLUGIN));
  tsr_kernel_register_args args{sizeof(args), d.b, TSR_DTYPE_PLUGIN, 0, &kernels};
  tsr_error* e = nullptr;
  check(d.t.kernel_register(&args, &e), &e, "kernel_register");
  EXPECT_TRUE(d.supports(TSR_OP_MATMUL, TSR_DTYPE_PLUGIN));
  const DevTensor x = upload(d, random_floats(32, rng), TSR_DTYPE_F32, {1, 32});
  DevTensor w = upload(d, random_floats(3 * 32, rng), TSR_DTYPE_F32, {3, 32});
  w.t.dtype = TSR_DTYPE_PLUGIN;
  const DevTensor out = make_tensor(d, TSR_DTYPE_F32, {1, 3});
  SeenKernel::calls = 0;
  d.run(tsr_matmul_params{sizeof(tsr_matmul_params), out.get(), x.get(), w.get()}, "matmul (plugin kernels)");
  d.sync();
  EXPECT_EQ(SeenKernel::calls, 1);
  EXPECT_EQ(SeenKernel::w_dtype, TSR_DTYPE_PLUGIN);
  EXPECT_EQ(SeenKernel::w_rows, 3);
  args.dtype = TSR_DTYPE_F32;
  expect_refused([&](tsr_error** err) { return d.t.kernel_register(&args, err); }, "kernel_register of F32");
}

TEST_F(BackendTest, BadHandlesAndBuffersAreRefused) {
  Device& d = dut();
  const tsr_backend_reg_iface& r = d.r;
  const tsr_backend_iface& t = d.t;
  tsr_device_props props{};
  props.struct_size = sizeof(props);
  tsr_device_count_args count{sizeof(count), &r, 0, 0};
  r.device_count(&count, nullptr);
  tsr_device_props_args pa{sizeof(pa), &r, count.count, 0, &props};
  expect_refused([&](tsr_error** e) { return r.device_props(&pa, e); }, "device_props past the last device");
  pa = {sizeof(pa), &r, 0, 0, nullptr};
  expect_refused([&](tsr_error** e) { return r.device_props(&pa, e); }, "device_props NULL");
  tsr_backend_params params{sizeof(params), 0, 1, nullptr};
  tsr_backend_create_args create{sizeof(create), &r, nullptr, nullptr};
  expect_refused([&](tsr_error** e) { return r.backend_create(&create, e); }, "backend_create NULL params");
  expect_refused([&](tsr_error** e) { return r.backend_create(nullptr, e); }, "backend_create NULL args");
  create.params = &params;
  params.device = count.count;
  expect_refused([&](tsr_error** e) { return r.backend_create(&create, e); }, "backend_create bad device");
  params = {8, 0, 1, nullptr};
  expect_refused([&](tsr_error** e) { return r.backend_create(&create, e); }, "backend_create small struct");

  auto buf = d.alloc(64);
  uint8_t host[128] = {};
  expect_refused([&](tsr_error** e) { return d.write_status(d.s, buf.get(), 60, host, 8, e); }, "write past the end");
  expect_refused([&](tsr_error** e) { return d.read_status(d.s, buf.get(), 0, host, 65, e); }, "read past the end");
  expect_refused([&](tsr_error** e) { return d.memset_status(d.s, buf.get(), 65, 0, 0, e); }, "memset past the end");
  expect_refused([&](tsr_error** e) { return d.write_status(d.s, buf.get(), UINT64_MAX, host, 2, e); }, "offset overflow");
  expect_refused([&](tsr_error** e) { return d.read_status(d.s, nullptr, 0, host, 1, e); }, "read NULL buffer");
  expect_refused([&](tsr_error** e) { return t.stream_create(nullptr, e); }, "stream_create NULL args");
  expect_refused([&](tsr_error** e) { return t.event_create(nullptr, e); }, "event_create NULL args");
  tsr_buffer_write_args small{8, d.b, d.s, buf.get(), 0, host, 1};
  expect_refused([&](tsr_error** e) { return t.buffer_write(&small, e); }, "buffer_write args struct_size too small");
  t.buffer_free(d.b, nullptr);  // NULL is ignored
  t.backend_destroy(nullptr);
}

TEST_F(BackendTest, NullParamsAreRefused) {
  expect_op_refused(static_cast<const tsr_get_rows_params*>(nullptr), "get_rows");
  expect_op_refused(static_cast<const tsr_rms_norm_params*>(nullptr), "rms_norm");
  expect_op_refused(static_cast<const tsr_matmul_params*>(nullptr), "matmul");
  expect_op_refused(static_cast<const tsr_rope_params*>(nullptr), "rope");
  expect_op_refused(static_cast<const tsr_kv_write_params*>(nullptr), "kv_write");
  expect_op_refused(static_cast<const tsr_attention_params*>(nullptr), "attention");
  expect_op_refused(static_cast<const tsr_silu_mul_params*>(nullptr), "silu_mul");
  expect_op_refused(static_cast<const tsr_add_params*>(nullptr), "add");
  expect_op_refused(static_cast<const tsr_copy_blocks_params*>(nullptr), "copy_blocks");
  tsr_attention_params empty{};  // every operand NULL
  empty.struct_size = sizeof(empty);
  expect_op_refused(&empty, "attention with NULL operands");
}

TEST_F(BackendTest, BadOperandsAreRefused) {
  Device& d = dut();
  const DevTensor x = upload(d, random_floats(3 * 64, rng), TSR_DTYPE_F32, {3, 64});
  const DevTensor w = upload(d, random_floats(5 * 64, rng), TSR_DTYPE_F32, {5, 64});
  const DevTensor out = make_tensor(d, TSR_DTYPE_F32, {3, 5});
  const DevTensor x_i32 = make_tensor(d, TSR_DTYPE_I32, {3, 64});
  const DevTensor out_bad = make_tensor(d, TSR_DTYPE_F32, {3, 6});
  tsr_matmul_params mp{sizeof(mp), out.get(), x.get(), w.get()};
  expect_op_refused(&mp, "matmul NULL backend", nullptr);
  mp.struct_size = 8;
  expect_op_refused(&mp, "matmul small struct_size");
  mp = {sizeof(mp), nullptr, x.get(), w.get()};
  expect_op_refused(&mp, "matmul out NULL");
  mp = {sizeof(mp), out.get(), x_i32.get(), w.get()};
  expect_op_refused(&mp, "matmul x of dtype I32");
  mp = {sizeof(mp), out.get(), x.get(), x_i32.get()};
  expect_op_refused(&mp, "matmul w of dtype I32");
  mp = {sizeof(mp), out_bad.get(), x.get(), w.get()};
  expect_op_refused(&mp, "matmul out of the wrong shape");
  tsr_tensor small = *x.get();
  small.struct_size = 16;
  mp = {sizeof(mp), out.get(), &small, w.get()};
  expect_op_refused(&mp, "tensor struct_size too small");

  const tsr_add_params ap{sizeof(ap), x.get(), x.get(), w.get()};
  expect_op_refused(&ap, "add of different shapes");
  const DevTensor xr = make_tensor(d, TSR_DTYPE_F32, {2, 2, 16});
  const DevTensor pos = upload_i32(d, {0, 1});
  const tsr_rope_params rp{sizeof(rp), xr.get(), pos.get(), 7, TSR_ROPE_NORMAL, 10000, 1, nullptr};
  expect_op_refused(&rp, "rope odd n_rot");
}

TEST_F(BackendTest, OutOfRangeIdsAndSlotsAreRefused) {
  Device& d = dut();
  const DevTensor table = upload(d, random_floats(4 * 32, rng), TSR_DTYPE_F32, {4, 32});
  const DevTensor out = make_tensor(d, TSR_DTYPE_F32, {2, 32});
  for (const int32_t bad : {4, -1}) {
    const DevTensor ids = upload_i32(d, {0, bad});
    const tsr_get_rows_params p{sizeof(p), out.get(), table.get(), ids.get()};
    expect_op_refused(&p, "get_rows id " + std::to_string(bad));
  }
  const Paged c = make_paged(rng, 4);
  const Batch b = mixed_batch(c);
  const std::vector<float> q = random_floats(static_cast<size_t>(b.rows() * c.heads * c.head_dim), rng);
  AttentionCall a = make_attention(d, c, b, q);
  const DevTensor k = make_tensor(d, TSR_DTYPE_F32, {2, c.kv_heads, c.head_dim});
  for (const int32_t bad : {static_cast<int32_t>(c.slots), -2}) {
    const DevTensor map = upload_i32(d, {0, bad});
    const tsr_kv_write_params p{sizeof(p), a.cache.k.get(), a.cache.v.get(), k.get(), k.get(), map.get()};
    expect_op_refused(&p, "kv_write slot " + std::to_string(bad));
  }
  Batch far = b;
  far.tables[0] = static_cast<int32_t>(c.slots / c.block_size);
  a.tables = upload(d, far.tables, TSR_DTYPE_I32, {3, c.max_blocks});
  tsr_attention_params ap = a.params();
  expect_op_refused(&ap, "attention block id outside the cache");
  Batch late = b;
  late.pos.back() = late.lens.back();
  a = make_attention(d, c, late, q);
  ap = a.params();
  expect_op_refused(&ap, "attention position at seq_len");
  const DevTensor pairs = upload(d, std::vector<int32_t>{0, static_cast<int32_t>(c.slots / 4)}, TSR_DTYPE_I32, {1, 2});
  const tsr_tensor* caches[] = {a.cache.k.get()};
  const tsr_copy_blocks_params cp{sizeof(cp), caches, 1, 4, pairs.get()};
  expect_op_refused(&cp, "copy_blocks block id out of range");
}

// ---- the ops ABI 2.0 added, each where supports() says the backend has it ----

// Skips the test unless the backend runs `op` on f32 rows.
#define TSR_REQUIRE_OP(op)                                                                  \
  if (!dut().supports(op, TSR_DTYPE_F32)) GTEST_SKIP() << #op " is not supported (optional)"

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// An elementwise op over [n, d] rows with the output fresh or aliasing either operand;
// `enqueue` runs it on (out, a, b).
void check_elementwise(std::mt19937& rng, const std::function<double(double, double)>& f,
                       const std::function<void(Device&, const DevTensor&, const DevTensor&, const DevTensor&)>& enqueue,
                       double tol = kTol) {
  for (int alias = 0; alias < 3; ++alias) {
    const int64_t n = pick(rng, 1, 6), d = pick(rng, 1, 300);
    const std::vector<float> a = random_floats(static_cast<size_t>(n * d), rng, -4, 4);
    const std::vector<float> b = random_floats(static_cast<size_t>(n * d), rng, -2, 2);
    std::vector<double> ref(a.size());
    for (size_t i = 0; i < a.size(); ++i) ref[i] = f(a[i], b[i]);
    expect_matches(ref, [&](Device& dev) {
      const DevTensor da = upload(dev, a, TSR_DTYPE_F32, {n, d}, 4);
      const DevTensor db = upload(dev, b, TSR_DTYPE_F32, {n, d});
      const DevTensor fresh = make_tensor(dev, TSR_DTYPE_F32, {n, d}, nullptr, 8);
      const DevTensor& out = alias == 1 ? da : alias == 2 ? db : fresh;
      enqueue(dev, out, da, db);
      EXPECT_TRUE(out.pad_untouched());
      return out.packed_rows();
    }, tol);
  }
}

TEST_F(BackendTest, AddMatchesReference) {
  check_elementwise(rng, [](double a, double b) { return a + b; }, [](Device& dev, auto& o, auto& a, auto& b) {
    dev.run(tsr_add_params{sizeof(tsr_add_params), o.get(), a.get(), b.get()}, "add");
  });
}

TEST_F(BackendTest, SiluMulMatchesReference) {
  check_elementwise(rng, [](double g, double u) { return g / (1 + std::exp(-g)) * u; },
                    [](Device& dev, auto& o, auto& a, auto& b) {
                      dev.run(tsr_silu_mul_params{sizeof(tsr_silu_mul_params), o.get(), a.get(), b.get()}, "silu_mul");
                    });
}

TEST_F(BackendTest, MulMatchesReference) {
  TSR_REQUIRE_OP(TSR_OP_MUL);
  check_elementwise(rng, [](double a, double b) { return a * b; }, [](Device& dev, auto& o, auto& a, auto& b) {
    dev.run(tsr_mul_params{sizeof(tsr_mul_params), o.get(), a.get(), b.get()}, "mul");
  });
}

TEST_F(BackendTest, ScaleMatchesReference) {
  TSR_REQUIRE_OP(TSR_OP_SCALE);
  check_elementwise(rng, [](double a, double) { return a * -0.37; }, [](Device& dev, auto& o, auto& a, auto&) {
    dev.run(tsr_scale_params{sizeof(tsr_scale_params), o.get(), a.get(), -0.37f, 0}, "scale");
  });
}

// A backend may evaluate GELU at f16 precision, as llama.cpp's CPU backend does (its
// input and result rounded to f16): up to ~1e-3 of the largest value.
constexpr double kGeluTol = 2e-3;

TEST_F(BackendTest, GeluMatchesReference) {
  TSR_REQUIRE_OP(TSR_OP_GELU);
  check_elementwise(rng, [](double a, double) { return gelu_ref(a); }, [](Device& dev, auto& o, auto& a, auto&) {
    dev.run(tsr_gelu_params{sizeof(tsr_gelu_params), o.get(), a.get(), nullptr}, "gelu");
  }, kGeluTol);
}

TEST_F(BackendTest, GeluMulMatchesReference) {
  TSR_REQUIRE_OP(TSR_OP_GELU_MUL);
  check_elementwise(rng, [](double a, double b) { return gelu_ref(a) * b; }, [](Device& dev, auto& o, auto& a, auto& b) {
    const tsr_gelu_params p{sizeof(tsr_gelu_params), o.get(), a.get(), b.get()};
    const tsr_op_desc desc{sizeof(desc), TSR_OP_GELU_MUL, 0, &p, nullptr};
    tsr_error* e = nullptr;
    check(dev.t.enqueue(dev.b, dev.s, &desc, &e), &e, "gelu_mul");
  }, kGeluTol);
}

TEST_F(BackendTest, SoftcapMatchesReference) {
  TSR_REQUIRE_OP(TSR_OP_SOFTCAP);
  check_elementwise(rng, [](double a, double) { return 3.0 * std::tanh(a / 3.0); }, [](Device& dev, auto& o, auto& a, auto&) {
    dev.run(tsr_softcap_params{sizeof(tsr_softcap_params), o.get(), a.get(), 3.0f, 0}, "softcap");
  });
  const DevTensor x = upload(dut(), random_floats(8, rng), TSR_DTYPE_F32, {1, 8});
  tsr_softcap_params bad{sizeof(bad), x.get(), x.get(), 0.0f, 0};
  expect_refused([&](tsr_error** e) { return dut().enqueue_status(&bad, e, dut().b, dut().s); }, "softcap cap 0");
}

// moe_combine (ABI 2.1): each token's slots weighted (normalized and scaled, each optional)
// and summed; a bad scale is refused.
TEST_F(BackendTest, MoeCombineMatchesReference) {
  TSR_REQUIRE_OP(TSR_OP_MOE_COMBINE);
  for (const auto [normalize, scale] : {std::pair{0, 0.0f}, {1, 0.0f}, {1, 2.5f}, {0, -0.5f}}) {
    const int64_t n = pick(rng, 1, 6), n_used = pick(rng, 1, 8), d = pick(rng, 1, 300);
    SCOPED_TRACE("n=" + std::to_string(n) + " used=" + std::to_string(n_used) + " normalize=" + std::to_string(normalize));
    const std::vector<float> x = random_floats(static_cast<size_t>(n * n_used * d), rng);
    const std::vector<float> w = random_floats(static_cast<size_t>(n * n_used), rng, 0.05f, 1.0f);
    std::vector<double> ref(static_cast<size_t>(n * d));
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int64_t s = 0; s < n_used; ++s) sum += w[i * n_used + s];
      for (int64_t s = 0; s < n_used; ++s) {
        const double ws = (normalize ? w[i * n_used + s] / sum : w[i * n_used + s]) * (scale != 0 ? scale : 1.0f);
        for (int64_t c = 0; c < d; ++c) ref[i * d + c] += ws * x[(i * n_used + s) * d + c];
      }
    }
    expect_matches(ref, [&](Device& dev) {
      const DevTensor dx = upload(dev, x, TSR_DTYPE_F32, {n, n_used, d}), dw = upload(dev, w, TSR_DTYPE_F32, {n, n_used});
      const DevTensor out = make_tensor(dev, TSR_DTYPE_F32, {n, d}, nullptr, 4);
      dev.run(tsr_moe_combine_params{sizeof(tsr_moe_combine_params), out.get(), dx.get(), dw.get(), normalize, scale},
              "moe_combine");
      EXPECT_TRUE(out.pad_untouched());
      return out.packed_rows();
    });
  }
  const DevTensor x = upload(dut(), random_floats(8, rng), TSR_DTYPE_F32, {1, 2, 4});
  const DevTensor w = upload(dut(), random_floats(2, rng), TSR_DTYPE_F32, {1, 2});
  const DevTensor out = make_tensor(dut(), TSR_DTYPE_F32, {1, 4});
  tsr_moe_combine_params bad{sizeof(bad), out.get(), x.get(), w.get(), 0, INFINITY};
  expect_refused([&](tsr_error** e) { return dut().enqueue_status(&bad, e, dut().b, dut().s); }, "moe_combine scale inf");
  const DevTensor wrong = make_tensor(dut(), TSR_DTYPE_F32, {1, 3});
  tsr_moe_combine_params mismatched{sizeof(mismatched), wrong.get(), x.get(), w.get(), 0, 0.0f};
  expect_refused([&](tsr_error** e) { return dut().enqueue_status(&mismatched, e, dut().b, dut().s); },
                 "moe_combine out of the wrong width");
}

// swiglu_oai (ABI 2.4): gpt-oss's clamped SwiGLU; a limit of 1.5, within the inputs' spread,
// clamps some gates and ups on both sides. A limit of 0 is refused.
TEST_F(BackendTest, SwigluOaiMatchesReference) {
  TSR_REQUIRE_OP(TSR_OP_SWIGLU_OAI);
  constexpr float kAlpha = 1.702f, kLimit = 1.5f;
  const auto ref = [](double g, double u) {
    const double x = std::min(g, double(kLimit)), y = std::clamp(u, -double(kLimit), double(kLimit));
    return x / (1.0 + std::exp(-kAlpha * x)) * (y + 1.0);
  };
  check_elementwise(rng, ref, [](Device& dev, auto& o, auto& a, auto& b) {
    dev.run(tsr_swiglu_oai_params{sizeof(tsr_swiglu_oai_params), o.get(), a.get(), b.get(), kAlpha, kLimit}, "swiglu_oai");
  });
  const DevTensor x = upload(dut(), random_floats(8, rng), TSR_DTYPE_F32, {1, 8});
  tsr_swiglu_oai_params bad{sizeof(bad), x.get(), x.get(), x.get(), kAlpha, 0.0f};
  expect_refused([&](tsr_error** e) { return dut().enqueue_status(&bad, e, dut().b, dut().s); }, "swiglu_oai limit 0");
}

TEST_F(BackendTest, BiasAddMatchesReference) {
  TSR_REQUIRE_OP(TSR_OP_BIAS_ADD);
  const int64_t n = pick(rng, 1, 6), d = pick(rng, 1, 300);
  const std::vector<float> x = random_floats(static_cast<size_t>(n * d), rng), bias = random_floats(static_cast<size_t>(d), rng);
  std::vector<double> ref(x.size());
  for (int64_t i = 0; i < n * d; ++i) ref[i] = double(x[i]) + bias[i % d];
  expect_matches(ref, [&](Device& dev) {
    const DevTensor dx = upload(dev, x, TSR_DTYPE_F32, {n, d}, 4), db = upload(dev, bias, TSR_DTYPE_F32, {d});
    dev.run(tsr_bias_add_params{sizeof(tsr_bias_add_params), dx.get(), dx.get(), db.get()}, "bias_add");
    return dx.packed_rows();
  });
}

TEST_F(BackendTest, LayerNormMatchesReference) {
  TSR_REQUIRE_OP(TSR_OP_LAYER_NORM);
  for (const bool with_bias : {false, true}) {
    const int64_t n = pick(rng, 1, 6), d = pick(rng, 2, 300);
    const float eps = 1e-5f;
    const std::vector<float> x = random_floats(static_cast<size_t>(n * d), rng, -3, 5);
    const std::vector<float> w = random_floats(static_cast<size_t>(d), rng, 0.5f, 1.5f), b = random_floats(static_cast<size_t>(d), rng);
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < n; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < d; ++c) mean += x[r * d + c];
      mean /= double(d);
      for (int64_t c = 0; c < d; ++c) var += (x[r * d + c] - mean) * (x[r * d + c] - mean);
      const double inv = 1 / std::sqrt(var / double(d) + eps);
      for (int64_t c = 0; c < d; ++c) ref[r * d + c] = (x[r * d + c] - mean) * inv * w[c] + (with_bias ? b[c] : 0.0);
    }
    expect_matches(ref, [&](Device& dev) {
      const DevTensor dx = upload(dev, x, TSR_DTYPE_F32, {n, d}, 8), dw = upload(dev, w, TSR_DTYPE_F32, {d});
      const DevTensor db = upload(dev, b, TSR_DTYPE_F32, {d});
      const DevTensor out = make_tensor(dev, TSR_DTYPE_F32, {n, d}, nullptr, 4);
      dev.run(tsr_layer_norm_params{sizeof(tsr_layer_norm_params), out.get(), dx.get(), dw.get(),
                                    with_bias ? db.get() : nullptr, eps, 0},
              "layer_norm");
      EXPECT_TRUE(out.pad_untouched());
      return out.packed_rows();
    });
  }
}

TEST_F(BackendTest, SoftmaxMatchesReference) {
  TSR_REQUIRE_OP(TSR_OP_SOFTMAX);
  const int64_t n = pick(rng, 1, 6), d = pick(rng, 1, 500);
  const float scale = 0.75f;
  const std::vector<float> x = random_floats(static_cast<size_t>(n * d), rng, -20, 20);
  std::vector<double> ref(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < d; ++c) mx = std::max(mx, double(x[r * d + c]) * scale);
    for (int64_t c = 0; c < d; ++c) sum += std::exp(double(x[r * d + c]) * scale - mx);
    for (int64_t c = 0; c < d; ++c) ref[r * d + c] = std::exp(double(x[r * d + c]) * scale - mx) / sum;
  }
  expect_matches(ref, [&](Device& dev) {
    const DevTensor dx = upload(dev, x, TSR_DTYPE_F32, {n, d}, 4);
    dev.run(tsr_softmax_params{sizeof(tsr_softmax_params), dx.get(), dx.get(), scale, 0}, "softmax");
    return dx.packed_rows();
  });
}

// MoE routing: the k largest per row, largest first, the lower index first among equals.
TEST_F(BackendTest, TopKPicksTheLargestLowerIndexFirst) {
  TSR_REQUIRE_OP(TSR_OP_TOP_K);
  const int64_t n = 5, d = pick(rng, 8, 64);
  const int32_t k = static_cast<int32_t>(pick(rng, 1, 8));
  std::vector<float> x = random_floats(static_cast<size_t>(n * d), rng);
  for (int64_t c = 0; c < d; ++c) x[c] = float(c % 3);  // row 0: ties everywhere
  std::vector<int32_t> want_ids;
  std::vector<float> want_values;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int32_t> order(static_cast<size_t>(d));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[r * d + a] > x[r * d + b]; });
    for (int32_t j = 0; j < k; ++j) {
      want_ids.push_back(order[size_t(j)]);
      want_values.push_back(x[r * d + order[size_t(j)]]);
    }
  }
  const DevTensor dx = upload(dut(), x, TSR_DTYPE_F32, {n, d});
  const DevTensor ids = make_tensor(dut(), TSR_DTYPE_I32, {n, k}), values = make_tensor(dut(), TSR_DTYPE_F32, {n, k});
  dut().run(tsr_top_k_params{sizeof(tsr_top_k_params), ids.get(), values.get(), dx.get(), k, 0}, "top_k");
  EXPECT_EQ(ids.packed_rows<int32_t>(), want_ids);
  EXPECT_EQ(values.packed_rows(), want_values);
  tsr_top_k_params bad{sizeof(bad), ids.get(), values.get(), dx.get(), static_cast<int32_t>(d + 1), 0};
  expect_refused([&](tsr_error** e) { return dut().enqueue_status(&bad, e, dut().b, dut().s); }, "top_k k > d");
}

// The grouped matmul of MoE layers, with x shared by a token's slots or one row per slot,
// and an expert id out of range refused.
TEST_P(WeightOpTest, MatmulIdMatchesReference) {
  if (!dut().supports(TSR_OP_MATMUL_ID, GetParam())) GTEST_SKIP() << "matmul_id of this dtype is not supported";
  for (const bool per_slot : {false, true}) {
    const int64_t n = pick(rng, 1, 7), n_used = pick(rng, 1, 3), n_expert = 4, k = 32 * pick(rng, 1, 3), m = pick(rng, 1, 20);
    SCOPED_TRACE("n=" + std::to_string(n) + " used=" + std::to_string(n_used) + " per_slot=" + std::to_string(per_slot));
    const std::vector<float> x = random_floats(static_cast<size_t>(n * (per_slot ? n_used : 1) * k), rng);
    Weights w = encode(GetParam(), random_floats(static_cast<size_t>(n_expert * m * k), rng));
    if (GetParam() == TSR_DTYPE_Q8_0) add_q8_minimum(w);
    std::vector<int32_t> ids(static_cast<size_t>(n * n_used));
    for (int32_t& e : ids) e = static_cast<int32_t>(pick(rng, 0, n_expert - 1));
    std::vector<double> ref(static_cast<size_t>(n * n_used * m));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t s = 0; s < n_used; ++s) {
        const float* xr = &x[(per_slot ? i * n_used + s : i) * k];
        for (int64_t j = 0; j < m; ++j) {
          for (int64_t c = 0; c < k; ++c) ref[(i * n_used + s) * m + j] += double(xr[c]) * w.value[(ids[i * n_used + s] * m + j) * k + c];
        }
      }
    }
    expect_matches(ref, [&](Device& dev) {
      const DevTensor dx = per_slot ? upload(dev, x, TSR_DTYPE_F32, {n, n_used, k}) : upload(dev, x, TSR_DTYPE_F32, {n, k});
      const DevTensor dw = upload(dev, w.bytes, GetParam(), {n_expert, m, k});
      const DevTensor di = upload(dev, ids, TSR_DTYPE_I32, {n, n_used});
      const DevTensor out = make_tensor(dev, TSR_DTYPE_F32, {n, n_used, m});
      dev.run(tsr_matmul_id_params{sizeof(tsr_matmul_id_params), out.get(), dx.get(), dw.get(), di.get()}, "matmul_id");
      return out.packed_rows();
    }, GetParam() == TSR_DTYPE_F32 ? kTol : kLowPrecisionTol);
  }
  const DevTensor dx = upload(dut(), random_floats(32, rng), TSR_DTYPE_F32, {1, 32});
  const DevTensor dw = upload(dut(), random_floats(2 * 32, rng), TSR_DTYPE_F32, {2, 1, 32});
  const DevTensor di = upload(dut(), std::vector<int32_t>{2}, TSR_DTYPE_I32, {1, 1});
  const DevTensor out = make_tensor(dut(), TSR_DTYPE_F32, {1, 1, 1});
  if (dut().supports(TSR_OP_MATMUL_ID, TSR_DTYPE_F32)) {
    tsr_matmul_id_params bad{sizeof(bad), out.get(), dx.get(), dw.get(), di.get()};
    expect_refused([&](tsr_error** e) { return dut().enqueue_status(&bad, e, dut().b, dut().s); }, "matmul_id expert 2 of 2");
  }
}

// F32 to F16 and BF16 round to nearest even, and back is exact; same-dtype is a copy.
TEST_F(BackendTest, CastConvertsBetweenFloatTypes) {
  const tsr_dtype pair_f16[] = {TSR_DTYPE_F32, TSR_DTYPE_F16};
  const tsr_op_support_query q{sizeof(q), TSR_OP_CAST, 2, pair_f16, nullptr};
  if (!dut().t.supports(dut().b, &q)) GTEST_SKIP() << "cast is not supported (optional)";
  const int64_t n = 3, d = 37;
  const std::vector<float> x = random_floats(static_cast<size_t>(n * d), rng, -100, 100);
  for (const tsr_dtype half : {TSR_DTYPE_F16, TSR_DTYPE_BF16}) {
    SCOPED_TRACE(dtype_name(half));
    const Weights rounded = encode(half, x);  // the kit's own rounding, as stored weights are made
    const DevTensor dx = upload(dut(), x, TSR_DTYPE_F32, {n, d}, 4);
    const DevTensor dh = make_tensor(dut(), half, {n, d}, nullptr, 6);
    const DevTensor back = make_tensor(dut(), TSR_DTYPE_F32, {n, d});
    dut().run(tsr_cast_params{sizeof(tsr_cast_params), dh.get(), dx.get()}, "cast to half");
    dut().run(tsr_cast_params{sizeof(tsr_cast_params), back.get(), dh.get()}, "cast to f32");
    EXPECT_EQ(dh.packed_rows<uint8_t>(), rounded.bytes);
    EXPECT_TRUE(dh.pad_untouched());
    EXPECT_EQ(back.packed_rows(), std::vector<float>(rounded.value.begin(), rounded.value.end()));
  }
  const DevTensor a = upload(dut(), x, TSR_DTYPE_F32, {n, d}), copy = make_tensor(dut(), TSR_DTYPE_F32, {n, d});
  dut().run(tsr_cast_params{sizeof(tsr_cast_params), copy.get(), a.get()}, "cast f32 to f32");
  EXPECT_EQ(copy.packed_rows(), x);
}

}  // namespace
}  // namespace tsr::conformance
