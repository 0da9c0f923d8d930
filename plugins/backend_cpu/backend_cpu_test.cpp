// The CPU backend's ops, called through the loaded plugin, against naive double-precision
// references written here from the ABI's definitions (tessera/backend.h), not from the
// kernels. Data is random with fixed seeds; the error measure is
// max|ours - ref| / max(1, max|ref|). Quantized weights are compared with their exact
// dequantization, so the bound measures the kernel, not the format's rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <cstddef>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <source_location>
#include <string>
#include <vector>

#include "base/error.h"
#include "quant_formats/float_convert.h"
#include "quant_formats/fp8_e4m3.h"
#include "quant_formats/ggml_blocks.h"
#include "quant_formats/iq4.h"
#include "quant_formats/kquants.h"
#include "quant_formats/mxfp4.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/plugin_host/tensor.h"
#include "tessera/engine.h"
#include "tessera/quant.h"
#include "tessera/sdk/cpu_isa.hpp"

namespace tsr {
namespace {

constexpr double kTol = 1e-5;

std::shared_ptr<Plugin> cpu_plugin() {
  static auto plugin = Plugin::find(TSR_PLUGIN_BACKEND, "cpu", {TESSERA_PLUGIN_DIR});
  return plugin;
}

// One backend per thread count for the whole run: setting up oneDNN is slow under ASan.
Backend& backend(int threads = 1) {
  static std::map<int, std::unique_ptr<Backend>> backends;
  auto& b = backends[threads];
  if (!b) b = Backend::create(cpu_plugin(), 0, threads);
  return *b;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// max|ours - ref| / max(1, max|ref|); a NaN or infinity in `ours` counts as infinite error
// (std::max would silently drop it).
double norm_err(const std::vector<float>& ours, const std::vector<double>& ref) {
  EXPECT_EQ(ours.size(), ref.size());
  double diff = 0, mag = 0;
  for (size_t i = 0; i < std::min(ours.size(), ref.size()); ++i) {
    if (!std::isfinite(ours[i])) return INFINITY;
    diff = std::max(diff, std::abs(ours[i] - ref[i]));
    mag = std::max(mag, std::abs(ref[i]));
  }
  return diff / std::max(1.0, mag);
}

// ---- tensors in backend buffers ----

// A tensor in its own backend buffer, rows optionally padded (row stride > packed row).
// The buffer starts as 0xFF bytes, NaN as f32: a kernel that reads a byte it should not
// shows up as NaN in its results, and one that writes into the padding shows in
// pad_untouched().
struct DevTensor {
  Backend* be = nullptr;
  std::unique_ptr<BackendBuffer> buf;
  tsr_tensor t{};
  int64_t rows = 0, packed = 0, stride = 0;  // stride, packed: bytes per row

  const tsr_tensor* get() const { return &t; }

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> all(buf->size());
    be->read(*buf, 0, all.data(), all.size());
    return all;
  }
  template <class T = float>
  std::vector<T> rows_as() const {  // the rows, packed
    const std::vector<uint8_t> all = bytes();
    std::vector<T> v(static_cast<size_t>(rows * packed) / sizeof(T));
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(reinterpret_cast<uint8_t*>(v.data()) + r * packed, all.data() + r * stride,
                  packed);
    }
    return v;
  }
  std::vector<float> floats() const { return rows_as<float>(); }
  bool pad_untouched() const {
    const std::vector<uint8_t> all = bytes();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = packed; b < stride; ++b) {
        if (all[r * stride + b] != 0xFF) return false;
      }
    }
    return true;
  }
};

// `pad` bytes after each row; `host` (packed rows, may be NULL) is written through the
// backend, as the ABI requires of host data.
DevTensor make_tensor(tsr_dtype dtype, std::initializer_list<int64_t> shape,
                      const void* host = nullptr, int64_t pad = 0, Backend& be = backend()) {
  DevTensor d;
  d.be = &be;
  d.t = tensor_make(dtype, nullptr, shape);
  const bool one_d = d.t.ndim == 1;
  d.rows = one_d ? 1 : d.t.shape[0];
  d.packed = one_d ? dtype_row_bytes(dtype, d.t.shape[0]) : d.t.strides[0];
  d.stride = d.packed + pad;
  if (!one_d) d.t.strides[0] = d.stride;
  d.buf = be.alloc(static_cast<uint64_t>(d.rows * d.stride));
  be.memset(*d.buf, 0, 0xFF, d.buf->size());
  d.t.data = d.buf->base();
  if (host != nullptr) {
    for (int64_t r = 0; r < d.rows; ++r) {
      be.write(*d.buf, r * d.stride, static_cast<const uint8_t*>(host) + r * d.packed, d.packed);
    }
  }
  return d;
}

template <class T>
DevTensor upload(const std::vector<T>& host, tsr_dtype dtype, std::initializer_list<int64_t> shape,
                 int64_t pad = 0, Backend& be = backend()) {
  DevTensor d = make_tensor(dtype, shape, host.data(), pad, be);
  EXPECT_EQ(host.size() * sizeof(T), static_cast<size_t>(d.rows * d.packed));
  return d;
}

DevTensor upload_i32(const std::vector<int32_t>& v, Backend& be = backend()) {
  return upload(v, TSR_DTYPE_I32, {static_cast<int64_t>(v.size())}, 0, be);
}

// ---- failing calls, straight through the plugin's C table ----

// A plugin handle of its own for calls expected to fail, so that the test reads the
// plugin's status and error object itself rather than what a host wrapper makes of them.
// Tensors may live in backend()'s buffers: CPU buffers are plain host memory.
const tsr_backend_reg_iface* cpu_reg() {
  return static_cast<const tsr_backend_reg_iface*>(cpu_plugin()->iface());
}

// A backend handle straight from the registry (NULL when backend_create fails).
tsr_backend* raw_create(const tsr_backend_params& params) {
  tsr_backend_create_args args{sizeof(args), cpu_reg(), &params, nullptr};
  return cpu_reg()->backend_create(&args, nullptr) == TSR_STATUS_OK ? args.backend : nullptr;
}

struct RawBackend {
  const tsr_backend_iface* iface = cpu_reg()->backend;
  tsr_backend* handle = nullptr;
  tsr_stream* stream = nullptr;

  RawBackend() {
    handle = raw_create({sizeof(tsr_backend_params), 0, 1, nullptr});
    EXPECT_NE(handle, nullptr);
    tsr_stream_args args{sizeof(args), handle, nullptr};
    EXPECT_EQ(iface->stream_create(&args, nullptr), TSR_STATUS_OK);
    stream = args.stream;
  }
  ~RawBackend() {
    iface->stream_destroy(handle, stream);
    iface->backend_destroy(handle);
  }
};

RawBackend& raw() {
  static RawBackend r;
  return r;
}

// Enqueues op `op` with params `p` (can be NULL) on `b`'s default stream.
tsr_status raw_enqueue(tsr_backend* b, tsr_op op, const void* p, tsr_error** error) {
  const tsr_op_desc desc{sizeof(desc), op, 0, p, nullptr};
  return cpu_reg()->backend->enqueue(b, nullptr, &desc, error);
}

#define TSR_RAW_OP(op, params_type)                                                      \
  tsr_status raw_op(const params_type& p, tsr_error** error) {                           \
    const tsr_op_desc desc{sizeof(desc), op, 0, &p, nullptr};                            \
    return raw().iface->enqueue(raw().handle, raw().stream, &desc, error);               \
  }
TSR_RAW_OP(TSR_OP_GET_ROWS, tsr_get_rows_params)
TSR_RAW_OP(TSR_OP_RMS_NORM, tsr_rms_norm_params)
TSR_RAW_OP(TSR_OP_MATMUL, tsr_matmul_params)
TSR_RAW_OP(TSR_OP_ROPE, tsr_rope_params)
TSR_RAW_OP(TSR_OP_KV_WRITE, tsr_kv_write_params)
TSR_RAW_OP(TSR_OP_ATTENTION, tsr_attention_params)
TSR_RAW_OP(TSR_OP_SILU_MUL, tsr_silu_mul_params)
TSR_RAW_OP(TSR_OP_ADD, tsr_add_params)
TSR_RAW_OP(TSR_OP_COPY_BLOCKS, tsr_copy_blocks_params)
#undef TSR_RAW_OP

// The op taking `p` must fail with INVALID_ARGUMENT and an error whose message contains
// `what`.
template <class Params>
void expect_invalid(const Params& p, const std::string& what,
                    std::source_location at = std::source_location::current()) {
  const ::testing::ScopedTrace trace(at.file_name(), static_cast<int>(at.line()), what);
  tsr_error* error = nullptr;
  const tsr_status status = raw_op(p, &error);
  EXPECT_EQ(status, TSR_STATUS_INVALID_ARGUMENT);
  ASSERT_NE(error, nullptr) << "no error object";
  const std::string message = tsr_error_message(error);
  EXPECT_EQ(tsr_error_status(error), status) << message;
  EXPECT_NE(message.find(what), std::string::npos) << message;
  tsr_error_free(error);
}

// ---- weight formats: encoders after GGUF / llama.cpp's reference quantizers ----

// Weights in `dtype` and the exact values they decode to, in double.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<double> value;
};

void put_f16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

// Q8_0 block: d = max|x| / 127, q = round(x / d).
void quantize_q8_0(const float* x, uint8_t* block, double* value) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[j]));
  const float d = amax / 127, id = d != 0 ? 1 / d : 0;
  const uint16_t dh = f32_to_f16(d);
  put_f16(block, dh);
  for (int j = 0; j < 32; ++j) {
    const auto q = static_cast<int8_t>(std::round(x[j] * id));
    block[2 + j] = static_cast<uint8_t>(q);
    value[j] = double(f16_to_f32(dh)) * q;
  }
}

// Q4_0 block (quantize_row_q4_0_ref): d = (signed max by magnitude) / -8; element j in
// the low nibble of qs[j], element j + 16 in the high nibble; value (nibble - 8) * d.
void quantize_q4_0(const float* x, uint8_t* block, double* value) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::abs(x[j])) {
      amax = std::abs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8, id = d != 0 ? 1 / d : 0;
  const uint16_t dh = f32_to_f16(d);
  put_f16(block, dh);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, int(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int hi = std::min(15, int(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
    block[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    value[j] = double(f16_to_f32(dh)) * (lo - 8);
    value[j + 16] = double(f16_to_f32(dh)) * (hi - 8);
  }
}

// Encodes row-major values whose rows are whole blocks (row length a multiple of 32).
Weights encode(tsr_dtype dtype, const std::vector<float>& src) {
  const size_t n = src.size();
  Weights w;
  w.value.resize(n);
  w.bytes.resize(static_cast<size_t>(dtype_row_bytes(dtype, static_cast<int64_t>(n))));
  uint8_t* out = w.bytes.data();
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case TSR_DTYPE_F32:
        std::memcpy(out + 4 * i, &src[i], 4);
        w.value[i] = src[i];
        break;
      case TSR_DTYPE_F16:
        put_f16(out + 2 * i, f32_to_f16(src[i]));
        w.value[i] = f16_to_f32(f32_to_f16(src[i]));
        break;
      case TSR_DTYPE_BF16:
        put_f16(out + 2 * i, f32_to_bf16(src[i]));
        w.value[i] = bf16_to_f32(f32_to_bf16(src[i]));
        break;
      case TSR_DTYPE_Q8_0:
        if (i % 32 == 0) quantize_q8_0(&src[i], out + i / 32 * 34, &w.value[i]);
        break;
      case TSR_DTYPE_Q4_0:
        if (i % 32 == 0) quantize_q4_0(&src[i], out + i / 32 * 18, &w.value[i]);
        break;
      default:
        ADD_FAILURE() << "no encoder for " << dtype_name(dtype);
        return w;
    }
  }
  return w;
}

const tsr_dtype kWeightDtypes[] = {TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_BF16, TSR_DTYPE_Q8_0,
                                   TSR_DTYPE_Q4_0};

std::string dtype_param_name(const ::testing::TestParamInfo<tsr_dtype>& info) {
  return dtype_name(info.param);
}

// ---- matmul ----

// out[i, j] = sum_c x[i, c] * w[j, c] in double.
std::vector<double> ref_matmul(const std::vector<float>& x, const std::vector<double>& w, int64_t n,
                               int64_t k, int64_t m) {
  std::vector<double> out(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double sum = 0;
      for (int64_t c = 0; c < k; ++c) sum += double(x[i * k + c]) * w[j * k + c];
      out[i * m + j] = sum;
    }
  }
  return out;
}

// What the int8 kernels compute with Q8_0/Q4_0 weights: x quantized to blocks of 32 int8
// with scale max|x|/127 stored as f16 (llama.cpp's quantize_row_q8_0: q = round(x * 127 /
// max|x|), to nearest even, and the f16 scale multiplies).
std::vector<float> quantize_activations(const std::vector<float>& x, int64_t k) {
  std::vector<float> q(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = f16_to_f32(f32_to_f16(amax / 127.0f)), id = amax != 0 ? 127.0f / amax : 0.0f;
    for (size_t i = b; i < b + 32; ++i) q[i] = d * std::nearbyint(x[i] * id);
  }
  (void)k;
  return q;
}

bool int8_kernel(tsr_dtype d) { return d == TSR_DTYPE_Q8_0 || d == TSR_DTYPE_Q4_0; }

// Prefill against BF16 (n >= 16) and Q8_0/Q4_0 weights (n >= 64; fewer rows stay on the
// int8 kernels) runs oneDNN's bf16 GEMM where the CPU has AVX-512 BF16: both operands are
// rounded to bf16 first.
bool bf16_gemm(tsr_dtype d, int64_t n) {
  return ((int8_kernel(d) && n >= 64) || (d == TSR_DTYPE_BF16 && n >= 16)) && tsr::sdk::cpu_has_bf16();
}

double round_bf16(double v) { return bf16_to_f32(f32_to_bf16(static_cast<float>(v))); }

template <class T>
std::vector<T> rounded_bf16(const std::vector<T>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<T>(round_bf16(v[i]));
  return out;
}

tsr_matmul_params matmul_params(const DevTensor& out, const DevTensor& x, const DevTensor& w) {
  return {sizeof(tsr_matmul_params), out.get(), x.get(), w.get()};
}

// (k, m): k whole blocks, m odd.
const std::pair<int64_t, int64_t> kMatmulShapes[] = {{64, 7}, {160, 33}};

class MatmulTest : public ::testing::TestWithParam<std::tuple<tsr_dtype, int64_t>> {};

// n >= 16 with F32 weights takes oneDNN's GEMM; Q8_0/Q4_0 the int8 kernels (activations
// quantized to Q8 blocks, as in llama.cpp); everything else the streaming kernels.
TEST_P(MatmulTest, MatchesReference) {
  const auto [dtype, n] = GetParam();
  uint32_t seed = 100 * static_cast<uint32_t>(dtype) + static_cast<uint32_t>(n);
  for (const auto& [k, m] : kMatmulShapes) {
    for (const bool strided : {false, true}) {
      SCOPED_TRACE("k=" + std::to_string(k) + " m=" + std::to_string(m) +
                   (strided ? " strided" : " packed"));
      const std::vector<float> x = random_floats(static_cast<size_t>(n * k), ++seed);
      const Weights w = encode(dtype, random_floats(static_cast<size_t>(m * k), ++seed));
      // Row strides that are no multiple of 16 bytes, to catch kernels assuming packing.
      const DevTensor dx = upload(x, TSR_DTYPE_F32, {n, k}, strided ? 5 * 4 : 0);
      const DevTensor dw = upload(w.bytes, dtype, {m, k});
      const DevTensor out = make_tensor(TSR_DTYPE_F32, {n, m}, nullptr, strided ? 3 * 4 : 0);
      backend().matmul(matmul_params(out, dx, dw));
      if (bf16_gemm(dtype, n)) {
        EXPECT_LT(norm_err(out.floats(), ref_matmul(rounded_bf16(x), rounded_bf16(w.value), n, k, m)), kTol);
      } else {
        const std::vector<float> xr = int8_kernel(dtype) ? quantize_activations(x, k) : x;
        EXPECT_LT(norm_err(out.floats(), ref_matmul(xr, w.value, n, k, m)), kTol);
      }
      EXPECT_TRUE(out.pad_untouched());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, MatmulTest,
                         ::testing::Combine(::testing::ValuesIn(kWeightDtypes),
                                            ::testing::Values(1, 3, 17, 64)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

// ---- K-quant, IQ4 and Q4_1/Q5_0/Q5_1 weights ----

// A K-quant, IQ4 or Q4_1/Q5_x weight matrix as ggml's quantizers write it, with its dequantized values.
struct KquantCodec {
  tsr_dtype dtype;
  int64_t block;
  void (*quantize)(const float*, void*, int64_t);
  void (*dequantize)(const void*, float*, int64_t);
};

template <class B, void (*Q)(const float*, B*, int64_t), void (*D)(const B*, float*, int64_t)>
KquantCodec codec(tsr_dtype dtype, int64_t block) {
  return {dtype, block, [](const float* x, void* y, int64_t k) { Q(x, static_cast<B*>(y), k); },
          [](const void* x, float* y, int64_t k) { D(static_cast<const B*>(x), y, k); }};
}

std::vector<KquantCodec> kquant_codecs() {
  using namespace quant;
  return {codec<BlockQ2_K, quantize_row_q2_k_ref, dequantize_row_q2_k>(TSR_DTYPE_Q2_K, 256),
          codec<BlockQ3_K, quantize_row_q3_k_ref, dequantize_row_q3_k>(TSR_DTYPE_Q3_K, 256),
          codec<BlockQ4_K, quantize_row_q4_k_ref, dequantize_row_q4_k>(TSR_DTYPE_Q4_K, 256),
          codec<BlockQ5_K, quantize_row_q5_k_ref, dequantize_row_q5_k>(TSR_DTYPE_Q5_K, 256),
          codec<BlockQ6_K, quantize_row_q6_k_ref, dequantize_row_q6_k>(TSR_DTYPE_Q6_K, 256),
          codec<BlockIQ4_NL, quantize_row_iq4_nl, dequantize_row_iq4_nl>(TSR_DTYPE_IQ4_NL, 32),
          codec<BlockIQ4_XS, quantize_row_iq4_xs, dequantize_row_iq4_xs>(TSR_DTYPE_IQ4_XS, 256),
          codec<BlockQ4_1, quantize_row_q4_1_ref, dequantize_row_q4_1>(TSR_DTYPE_Q4_1, 32),
          codec<BlockQ5_0, quantize_row_q5_0_ref, dequantize_row_q5_0>(TSR_DTYPE_Q5_0, 32),
          codec<BlockQ5_1, quantize_row_q5_1_ref, dequantize_row_q5_1>(TSR_DTYPE_Q5_1, 32)};
}

Weights encode_kquant(const KquantCodec& c, const std::vector<float>& src) {
  Weights w;
  w.bytes.resize(static_cast<size_t>(dtype_row_bytes(c.dtype, static_cast<int64_t>(src.size()))));
  c.quantize(src.data(), w.bytes.data(), static_cast<int64_t>(src.size()));
  std::vector<float> v(src.size());
  c.dequantize(w.bytes.data(), v.data(), static_cast<int64_t>(src.size()));
  w.value.assign(v.begin(), v.end());
  return w;
}

// The activations as llama.cpp rounds them for each weight type: Q8_K (an f32 scale per
// 256, ggml's quantize_row_q8_K) for the K-quants and IQ4_XS, Q8_0 for IQ4_NL and Q5_0,
// Q8_1 for Q4_1 and Q5_1 (Q8_0's values; its f16 block sums show only as rounding here).
std::vector<float> kquant_activations(tsr_dtype dtype, const std::vector<float>& x, int64_t k) {
  if (dtype == TSR_DTYPE_IQ4_NL || dtype == TSR_DTYPE_Q5_0 || dtype == TSR_DTYPE_Q4_1 || dtype == TSR_DTYPE_Q5_1) {
    return quantize_activations(x, k);
  }
  std::vector<quant::BlockQ8_K> q(x.size() / 256);
  quant::quantize_row_q8_k_ref(x.data(), q.data(), static_cast<int64_t>(x.size()));
  std::vector<float> out(x.size());
  quant::dequantize_row_q8_k(q.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

// The integer kernels compute Σ w·x of the dequantized weights and rounded activations,
// exactly but for float summation; prefill (n >= 64) decodes the weights for the bf16 GEMM.
TEST(CpuKquantMatmul, MatchesTheDequantizedWeightsAtEveryBatchSize) {
  for (const KquantCodec& c : kquant_codecs()) {
    for (const int64_t n : {1, 3, 17, 64}) {
      for (const auto& [k, m] : {std::pair<int64_t, int64_t>{256, 7}, {512, 33}}) {
        SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
        const std::vector<float> x = random_floats(static_cast<size_t>(n * k), uint32_t(7 * n + k));
        const Weights w = encode_kquant(c, random_floats(static_cast<size_t>(m * k), uint32_t(k + m)));
        const DevTensor dx = upload(x, TSR_DTYPE_F32, {n, k}, 5 * 4);
        const DevTensor dw = upload(w.bytes, c.dtype, {m, k});
        const DevTensor out = make_tensor(TSR_DTYPE_F32, {n, m}, nullptr, 3 * 4);
        backend().matmul(matmul_params(out, dx, dw));
        const bool gemm = n >= 64 && tsr::sdk::cpu_has_bf16();
        const std::vector<double> ref = gemm ? ref_matmul(rounded_bf16(x), rounded_bf16(w.value), n, k, m)
                                             : ref_matmul(kquant_activations(c.dtype, x, k), w.value, n, k, m);
        // Q4_1/Q5_1's min term takes Q8_1's f16 block sums (as llama.cpp's), ~1e-4 relative.
        const bool f16_sums = !gemm && (c.dtype == TSR_DTYPE_Q4_1 || c.dtype == TSR_DTYPE_Q5_1);
        EXPECT_LT(norm_err(out.floats(), ref), f16_sums ? 1e-3 : kTol);
        EXPECT_TRUE(out.pad_untouched());
      }
    }
  }
}

// The prefill GEMM reads each weight as ggml's dequantizer gives it, rounded to bf16, at
// every kernel level (AVX-512 decodes Q4_K and Q6_K rows 16 lanes at a time): rows of x
// that are unit vectors pick single weights out of the product exactly.
TEST(CpuKquantMatmul, PrefillDecodesEveryWeightAsGgml) {
  if (!tsr::sdk::cpu_has_bf16()) GTEST_SKIP() << "no AVX-512 BF16: prefill takes the integer kernels";
  for (const KquantCodec& c : kquant_codecs()) {
    SCOPED_TRACE(dtype_name(c.dtype));
    const int64_t k = 512, m = 9;
    const Weights w = encode_kquant(c, random_floats(static_cast<size_t>(m * k), 77, -3, 3));
    std::vector<float> x(static_cast<size_t>(k * k), 0.0f);
    for (int64_t r = 0; r < k; ++r) x[size_t(r * k + r)] = 1.0f;
    const DevTensor dx = upload(x, TSR_DTYPE_F32, {k, k});
    const DevTensor dw = upload(w.bytes, c.dtype, {m, k});
    const DevTensor out = make_tensor(TSR_DTYPE_F32, {k, m});
    backend().matmul(matmul_params(out, dx, dw));
    const std::vector<float> got = out.floats();
    int64_t wrong = 0;
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t j = 0; j < m; ++j) wrong += got[size_t(r * m + j)] != float(round_bf16(w.value[size_t(j * k + r)]));
    }
    EXPECT_EQ(wrong, 0);
  }
}

TEST(CpuKquantMatmul, EmbeddingRowsDecodeAsGgml) {
  for (const KquantCodec& c : kquant_codecs()) {
    SCOPED_TRACE(dtype_name(c.dtype));
    const int64_t rows = 5, d = 512;
    const Weights table = encode_kquant(c, random_floats(static_cast<size_t>(rows * d), 31, -2, 2));
    const std::vector<int32_t> ids = {4, 0, 2};
    const DevTensor dt = upload(table.bytes, c.dtype, {rows, d});
    const DevTensor di = upload_i32(ids);
    const DevTensor out = make_tensor(TSR_DTYPE_F32, {3, d});
    backend().get_rows({sizeof(tsr_get_rows_params), out.get(), dt.get(), di.get()});
    std::vector<double> ref;
    for (const int32_t id : ids) ref.insert(ref.end(), table.value.begin() + id * d, table.value.begin() + (id + 1) * d);
    EXPECT_EQ(norm_err(out.floats(), ref), 0.0);
    EXPECT_TRUE(backend().supports(TSR_OP_MATMUL, c.dtype));
  }
}

// ---- packed weights (ABI 1.3 weight_pack) ----

// Packing needs AVX2 for Q8_0, Q4_0, Q4_K and Q6_K, AVX-512 VNNI for F16 and MXFP4 (the CPU's,
// and TESSERA_CPU_MAX_ISA's leave).
bool packs_here(tsr_dtype dtype) {
  using tsr::sdk::CpuIsa;
  const bool vnni = dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_MXFP4;
  return tsr::sdk::cpu_isa_at_least(vnni ? CpuIsa::avx512_vnni : CpuIsa::avx2);
}

// Q8_0, Q4_0 and F16 weights with rows in whole groups of 16 are packed; every batch size
// (the kernels' 1..16 rows per call, partial calls, chunks of 64) gives what the stored
// weight gives.
TEST(CpuPackedWeights, MatmulEqualsTheStoredWeightsAtEveryBatchSize) {
  uint32_t seed = 700;
  for (const tsr_dtype dtype : {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0, TSR_DTYPE_F16}) {
    if (!packs_here(dtype)) continue;  // NothingElsePacks checks those
    for (const auto& [m, k] : {std::pair<int64_t, int64_t>{16, 32}, {48, 96}, {32, 2048}}) {
      Weights w = encode(dtype, random_floats(static_cast<size_t>(m * k), ++seed));
      if (dtype == TSR_DTYPE_Q8_0) {  // -128: valid Q8_0, though llama.cpp's quantizer never writes it
        uint16_t d;
        std::memcpy(&d, w.bytes.data(), sizeof(d));
        w.bytes[2] = 0x80;
        w.value[0] = double(f16_to_f32(d)) * -128;
      }
      const DevTensor dw = upload(w.bytes, dtype, {m, k});
      tsr_tensor packed{};
      const std::unique_ptr<BackendBuffer> buffer = backend().pack_weight(*dw.get(), &packed);
      ASSERT_NE(buffer, nullptr) << dtype_name(dtype) << " " << m << "x" << k << " not packed";
      EXPECT_EQ(packed.dtype, TSR_DTYPE_PACKED);
      for (const int64_t n : {1, 3, 8, 9, 16, 17, 70, 150}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " m=" + std::to_string(m) + " k=" +
                     std::to_string(k) + " n=" + std::to_string(n));
        const std::vector<float> x = random_floats(static_cast<size_t>(n * k), ++seed);
        const DevTensor dx = upload(x, TSR_DTYPE_F32, {n, k});
        const DevTensor out = make_tensor(TSR_DTYPE_F32, {n, m});
        tsr_matmul_params p = matmul_params(out, dx, dw);
        p.w = &packed;
        backend().matmul(p);
        const std::vector<float> xr = dtype == TSR_DTYPE_F16 ? x : quantize_activations(x, k);
        EXPECT_LT(norm_err(out.floats(), ref_matmul(xr, w.value, n, k, m)), kTol);
      }
    }
  }
}

// Q4_K and Q6_K (what Q4_K_M files hold) and MXFP4 (gpt-oss's experts) pack too: every
// batch size gives the dot products of the activations as llama.cpp rounds them (Q8_K;
// MXFP4: Q8_0) with the dequantized weights (prefill included: no bf16 GEMM for a packed
// weight), and a row of x gets the same bits whatever the batch beside it (the kernels sum
// each row in one order).
TEST(CpuPackedWeights, KquantAndMxfp4MatmulIsInt8DotsAtEveryBatchSize) {
  uint32_t seed = 740;
  std::vector<KquantCodec> codecs = kquant_codecs();
  codecs.push_back(codec<quant::BlockMXFP4, quant::quantize_row_mxfp4, quant::dequantize_row_mxfp4>(TSR_DTYPE_MXFP4, 32));
  for (const KquantCodec& c : codecs) {
    if ((c.dtype != TSR_DTYPE_Q4_K && c.dtype != TSR_DTYPE_Q6_K && c.dtype != TSR_DTYPE_MXFP4) || !packs_here(c.dtype)) continue;
    for (const auto& [m, k] : {std::pair<int64_t, int64_t>{16, 256}, {48, 512}, {32, 2048}}) {
      const Weights w = encode_kquant(c, random_floats(static_cast<size_t>(m * k), ++seed, -3, 3));
      const DevTensor dw = upload(w.bytes, c.dtype, {m, k});
      tsr_tensor packed{};
      const std::unique_ptr<BackendBuffer> buffer = backend().pack_weight(*dw.get(), &packed);
      ASSERT_NE(buffer, nullptr) << dtype_name(c.dtype) << " " << m << "x" << k << " not packed";
      const std::vector<float> x = random_floats(static_cast<size_t>(150 * k), ++seed);
      std::vector<float> first_rows;
      for (const int64_t n : {1, 3, 8, 9, 16, 17, 70, 150}) {
        SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " m=" + std::to_string(m) + " k=" +
                     std::to_string(k) + " n=" + std::to_string(n));
        const std::vector<float> xn(x.begin(), x.begin() + n * k);
        const DevTensor dx = upload(xn, TSR_DTYPE_F32, {n, k});
        const DevTensor out = make_tensor(TSR_DTYPE_F32, {n, m});
        tsr_matmul_params p = matmul_params(out, dx, dw);
        p.w = &packed;
        backend().matmul(p);
        const std::vector<float> got = out.floats();
        const std::vector<float> xr = c.dtype == TSR_DTYPE_MXFP4 ? quantize_activations(xn, k) : kquant_activations(c.dtype, xn, k);
        EXPECT_LT(norm_err(got, ref_matmul(xr, w.value, n, k, m)), kTol);
        if (first_rows.empty()) first_rows = got;
        EXPECT_EQ(0, std::memcmp(first_rows.data(), got.data(), size_t(m) * sizeof(float))) << "row 0 moved with the batch";
      }
    }
  }
}

// MoE expert weights ([n_expert, rows, cols], ABI 2.5) pack as one matrix too: matmul_id
// on the packed experts gives each routed row its expert's product, with the activations
// rounded as each dtype's kernels round them, at decode and prefill sizes; experts whose
// rows are no multiple of 16 stay as stored.
TEST(CpuPackedWeights, ExpertsPackForMatmulId) {
  std::vector<KquantCodec> codecs = kquant_codecs();
  codecs.push_back(codec<quant::BlockMXFP4, quant::quantize_row_mxfp4, quant::dequantize_row_mxfp4>(TSR_DTYPE_MXFP4, 32));
  constexpr int64_t n_expert = 4, m = 32, k = 512, n_used = 2;
  uint32_t seed = 760;
  for (const tsr_dtype dtype : {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0, TSR_DTYPE_Q4_K, TSR_DTYPE_Q6_K, TSR_DTYPE_MXFP4}) {
    if (!packs_here(dtype)) continue;
    const std::vector<float> src = random_floats(static_cast<size_t>(n_expert * m * k), ++seed, -2, 2);
    const auto codec_of = std::find_if(codecs.begin(), codecs.end(), [&](const KquantCodec& c) { return c.dtype == dtype; });
    const Weights w = codec_of != codecs.end() ? encode_kquant(*codec_of, src) : encode(dtype, src);
    const DevTensor dw = upload(w.bytes, dtype, {n_expert, m, k});
    tsr_tensor packed{};
    const std::unique_ptr<BackendBuffer> buffer = backend().pack_weight(*dw.get(), &packed);
    ASSERT_NE(buffer, nullptr) << dtype_name(dtype);
    ASSERT_EQ(packed.ndim, 3);
    const bool q8_k = dtype == TSR_DTYPE_Q4_K || dtype == TSR_DTYPE_Q6_K;
    for (const int64_t n : {1, 5, 70}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      const std::vector<float> x = random_floats(static_cast<size_t>(n * k), ++seed);
      std::vector<int32_t> ids(static_cast<size_t>(n * n_used));
      for (int64_t i = 0; i < n; ++i) ids[size_t(2 * i)] = int32_t(i % n_expert), ids[size_t(2 * i + 1)] = int32_t((i * 3 + 1) % n_expert);
      const DevTensor dx = upload(x, TSR_DTYPE_F32, {n, k}), di = upload(ids, TSR_DTYPE_I32, {n, n_used});
      const DevTensor out = make_tensor(TSR_DTYPE_F32, {n, n_used, m});
      backend().matmul_id(tsr_matmul_id_params{sizeof(tsr_matmul_id_params), out.get(), dx.get(), &packed, di.get()});
      const std::vector<float> xr = q8_k ? kquant_activations(dtype, x, k) : quantize_activations(x, k);
      std::vector<double> ref;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t slot = 0; slot < n_used; ++slot) {
          const int64_t e = ids[size_t(i * n_used + slot)];
          const std::vector<float> row(xr.begin() + i * k, xr.begin() + (i + 1) * k);
          const std::vector<double> we(w.value.begin() + e * m * k, w.value.begin() + (e + 1) * m * k);
          const std::vector<double> y = ref_matmul(row, we, 1, k, m);
          ref.insert(ref.end(), y.begin(), y.end());
        }
      }
      EXPECT_LT(norm_err(out.floats(), ref), kTol);
    }
  }
  const Weights odd = encode(TSR_DTYPE_Q8_0, random_floats(static_cast<size_t>(2 * 24 * 64), 770));
  const DevTensor dodd = upload(odd.bytes, TSR_DTYPE_Q8_0, {2, 24, 64});
  tsr_tensor packed{};
  EXPECT_EQ(backend().pack_weight(*dodd.get(), &packed), nullptr);
}

// Activations of a corrupt model reach the int8 kernels too: a row holding a NaN or an
// infinity gives NaN outputs (as an f32 product would), a row of subnormal-scale values
// gives zeros, and the other rows are untouched; nothing is undefined (UBSan; a fuzzer
// found the overflow of the block sums with NaN input).
TEST(CpuMatmul, NonFiniteAndTinyActivationsInInt8Kernels) {
  constexpr int64_t m = 16, k = 64, n = 4;
  for (const tsr_dtype dtype : {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0}) {
    const Weights w = encode(dtype, random_floats(static_cast<size_t>(m * k), 901));
    std::vector<float> x = random_floats(static_cast<size_t>(n * k), 902);
    x[3] = std::numeric_limits<float>::quiet_NaN();              // row 0
    x[k + 40] = -std::numeric_limits<float>::infinity();         // row 1
    std::fill(x.begin() + 2 * k, x.begin() + 3 * k, 1e-39f);     // row 2: subnormal scale
    const DevTensor dw = upload(w.bytes, dtype, {m, k});
    tsr_tensor packed{};
    const std::unique_ptr<BackendBuffer> buffer = backend().pack_weight(*dw.get(), &packed);
    for (const tsr_tensor* weight : {dw.get(), buffer ? static_cast<const tsr_tensor*>(&packed) : nullptr}) {
      if (weight == nullptr) continue;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (weight == dw.get() ? " stored" : " packed"));
      const DevTensor dx = upload(x, TSR_DTYPE_F32, {n, k});
      const DevTensor out = make_tensor(TSR_DTYPE_F32, {n, m});
      tsr_matmul_params p = matmul_params(out, dx, dw);
      p.w = weight;
      backend().matmul(p);
      const std::vector<float> o = out.floats();
      for (int64_t j = 0; j < m; ++j) {
        EXPECT_TRUE(std::isnan(o[size_t(j)])) << j;
        EXPECT_TRUE(std::isnan(o[size_t(m + j)])) << j;
        EXPECT_EQ(o[size_t(2 * m + j)], 0.0f) << j;
        EXPECT_TRUE(std::isfinite(o[size_t(3 * m + j)])) << j;
      }
      const std::vector<float> row3(x.begin() + 3 * k, x.end());
      const std::vector<double> ref = ref_matmul(quantize_activations(row3, k), w.value, 1, k, m);
      EXPECT_LT(norm_err(std::vector<float>(o.begin() + 3 * m, o.end()), ref), kTol);
    }
  }
}

// Weights the CPU keeps as stored: other dtypes, and rows not in whole groups of 16.
TEST(CpuPackedWeights, OtherWeightsStayAsStored) {
  const struct {
    tsr_dtype dtype;
    int64_t m;
  } cases[] = {{TSR_DTYPE_F32, 16}, {TSR_DTYPE_F16, 24}, {TSR_DTYPE_BF16, 32}, {TSR_DTYPE_Q8_0, 24},
               {TSR_DTYPE_Q4_0, 8}};
  for (const auto& c : cases) {
    const Weights w = encode(c.dtype, random_floats(static_cast<size_t>(c.m * 64), 710));
    const DevTensor dw = upload(w.bytes, c.dtype, {c.m, 64});
    tsr_tensor packed{};
    EXPECT_EQ(backend().pack_weight(*dw.get(), &packed), nullptr) << dtype_name(c.dtype) << " rows " << c.m;
  }
}

// Where the CPU lacks a kernel's instructions the weight stays as stored (and takes the
// unpacked AVX2 or portable kernels); TESSERA_CPU_MAX_ISA=avx2 and baseline run this.
TEST(CpuPackedWeights, NothingElsePacks) {
  for (const tsr_dtype dtype : {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0, TSR_DTYPE_F16}) {
    if (packs_here(dtype)) continue;
    const Weights w = encode(dtype, random_floats(16 * 64, 715));
    const DevTensor dw = upload(w.bytes, dtype, {16, 64});
    tsr_tensor packed{};
    EXPECT_EQ(backend().pack_weight(*dw.get(), &packed), nullptr) << dtype_name(dtype);
  }
}

// A packed weight whose header does not match its tensor is refused by name.
TEST(CpuPackedWeights, ForgedPackedTensorIsRefused) {
  const Weights w = encode(TSR_DTYPE_Q8_0, random_floats(16 * 64, 720));
  const DevTensor dw = upload(w.bytes, TSR_DTYPE_Q8_0, {16, 64});
  const DevTensor dx = upload(random_floats(64, 721), TSR_DTYPE_F32, {1, 64});
  const DevTensor out = make_tensor(TSR_DTYPE_F32, {1, 16});
  tsr_tensor forged = *dw.get();
  forged.dtype = TSR_DTYPE_PACKED;  // GGUF blocks, no packed header
  tsr_matmul_params p = matmul_params(out, dx, dw);
  p.w = &forged;
  expect_invalid(p, "not a weight this backend packed");
  if (!packs_here(TSR_DTYPE_Q8_0)) return;
  tsr_tensor packed{};
  const std::unique_ptr<BackendBuffer> buffer = backend().pack_weight(*dw.get(), &packed);
  ASSERT_NE(buffer, nullptr);
  packed.shape[0] = 32;  // a shape other than the packed one
  p.w = &packed;
  expect_invalid(p, "not a weight this backend packed");
}

// F32 weights whose rows are padded: both kernels must honour w's row stride.
TEST(CpuMatmul, StridedF32Weights) {
  const int64_t k = 96, m = 21;
  for (const int64_t n : {3, 17}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> x = random_floats(static_cast<size_t>(n * k), 7);
    const std::vector<float> w = random_floats(static_cast<size_t>(m * k), 8);
    const DevTensor dx = upload(x, TSR_DTYPE_F32, {n, k}, 4);
    const DevTensor dw = upload(w, TSR_DTYPE_F32, {m, k}, 8 * 4);
    const DevTensor out = make_tensor(TSR_DTYPE_F32, {n, m}, nullptr, 4);
    backend().matmul(matmul_params(out, dx, dw));
    const std::vector<double> wd(w.begin(), w.end());
    EXPECT_LT(norm_err(out.floats(), ref_matmul(x, wd, n, k, m)), kTol);
    EXPECT_TRUE(out.pad_untouched());
  }
}

TEST(CpuBackend, SupportsTheAbiDtypes) {
  Backend& be = backend();
  for (const tsr_dtype d : kWeightDtypes) {
    EXPECT_TRUE(be.supports(TSR_OP_MATMUL, d)) << dtype_name(d);
    EXPECT_TRUE(be.supports(TSR_OP_GET_ROWS, d)) << dtype_name(d);
  }
  EXPECT_FALSE(be.supports(TSR_OP_MATMUL, TSR_DTYPE_I32));
  EXPECT_FALSE(be.supports(TSR_OP_RMS_NORM, TSR_DTYPE_F16));
  EXPECT_TRUE(be.supports(TSR_OP_ATTENTION, TSR_DTYPE_F32));
}

// ---- get_rows ----

class GetRowsTest : public ::testing::TestWithParam<tsr_dtype> {};

// Decoding is exact for every dtype (f16 scale times a small integer fits a float), so
// the result must equal the reference dequantization bit for bit.
TEST_P(GetRowsTest, DecodesSelectedRows) {
  const tsr_dtype dtype = GetParam();
  const int64_t rows = 11, d = 96;
  const Weights table = encode(dtype, random_floats(static_cast<size_t>(rows * d), 21, -3, 3));
  const std::vector<int32_t> ids = {3, 0, 10, 3, 7};
  const int64_t n = static_cast<int64_t>(ids.size());
  const DevTensor dt = upload(table.bytes, dtype, {rows, d});
  const DevTensor di = upload_i32(ids);
  const DevTensor out = make_tensor(TSR_DTYPE_F32, {n, d}, nullptr, 12);
  backend().get_rows({sizeof(tsr_get_rows_params), out.get(), dt.get(), di.get()});
  std::vector<double> ref;
  for (const int32_t id : ids) {
    ref.insert(ref.end(), table.value.begin() + id * d, table.value.begin() + (id + 1) * d);
  }
  EXPECT_EQ(norm_err(out.floats(), ref), 0.0);
  EXPECT_TRUE(out.pad_untouched());
}

TEST_P(GetRowsTest, OutOfRangeIdIsAnError) {
  const tsr_dtype dtype = GetParam();
  const Weights table = encode(dtype, random_floats(4 * 32, 22));
  const DevTensor dt = upload(table.bytes, dtype, {4, 32});
  const DevTensor out = make_tensor(TSR_DTYPE_F32, {2, 32});
  for (const int32_t bad : {4, -1}) {
    const DevTensor di = upload_i32({0, bad});
    expect_invalid(tsr_get_rows_params{sizeof(tsr_get_rows_params), out.get(), dt.get(), di.get()},
                   "id " + std::to_string(bad) + " out of range");
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, GetRowsTest, ::testing::ValuesIn(kWeightDtypes), dtype_param_name);

// ---- rms_norm, silu_mul, add ----

const std::pair<int64_t, int64_t> kElementwiseShapes[] = {{1, 7}, {5, 64}, {3, 257}};

std::string shape_trace(int64_t n, int64_t d) {
  return "shape [" + std::to_string(n) + ", " + std::to_string(d) + "]";
}

TEST(CpuRmsNorm, MatchesReference) {
  uint32_t seed = 30;
  for (const auto& [n, d] : kElementwiseShapes) {
    // Small inputs make eps matter: their mean square is near it.
    for (const auto& [in_place, amplitude] :
         {std::pair{false, 2.0f}, {true, 2.0f}, {false, 0.005f}}) {
      SCOPED_TRACE(shape_trace(n, d) + (in_place ? " in place" : "") + " amplitude " +
                   std::to_string(amplitude));
      const float eps = 1e-5f;
      const std::vector<float> x =
          random_floats(static_cast<size_t>(n * d), ++seed, -amplitude, amplitude);
      const std::vector<float> w = random_floats(static_cast<size_t>(d), ++seed, 0.5, 1.5);
      const DevTensor dx = upload(x, TSR_DTYPE_F32, {n, d}, 8);
      const DevTensor dw = upload(w, TSR_DTYPE_F32, {d});
      const DevTensor fresh = make_tensor(TSR_DTYPE_F32, {n, d}, nullptr, 4);
      const DevTensor& out = in_place ? dx : fresh;
      backend().rms_norm({sizeof(tsr_rms_norm_params), out.get(), dx.get(), dw.get(), eps, 0});
      std::vector<double> ref(x.size());
      for (int64_t r = 0; r < n; ++r) {
        double ss = 0;
        for (int64_t c = 0; c < d; ++c) ss += double(x[r * d + c]) * x[r * d + c];
        const double scale = 1 / std::sqrt(ss / double(d) + eps);
        for (int64_t c = 0; c < d; ++c) ref[r * d + c] = x[r * d + c] * scale * w[c];
      }
      EXPECT_LT(norm_err(out.floats(), ref), kTol);
      EXPECT_TRUE(out.pad_untouched());
    }
  }
}

// Which operand the output aliases, for the binary elementwise ops.
enum class Alias { kNone, kFirst, kSecond };

template <class RunOp, class RefOp>
void check_binary(RunOp run, RefOp ref_op, uint32_t seed) {
  for (const auto& [n, d] : kElementwiseShapes) {
    for (const Alias alias : {Alias::kNone, Alias::kFirst, Alias::kSecond}) {
      SCOPED_TRACE(shape_trace(n, d) + " alias " + std::to_string(int(alias)));
      const std::vector<float> a = random_floats(static_cast<size_t>(n * d), ++seed, -6, 6);
      const std::vector<float> b = random_floats(static_cast<size_t>(n * d), ++seed, -2, 2);
      const DevTensor da = upload(a, TSR_DTYPE_F32, {n, d}, 4);
      const DevTensor db = upload(b, TSR_DTYPE_F32, {n, d});
      const DevTensor fresh = make_tensor(TSR_DTYPE_F32, {n, d}, nullptr, 8);
      const DevTensor& out = alias == Alias::kFirst ? da : alias == Alias::kSecond ? db : fresh;
      run(out, da, db);
      std::vector<double> ref(a.size());
      for (size_t i = 0; i < a.size(); ++i) ref[i] = ref_op(double(a[i]), double(b[i]));
      EXPECT_LT(norm_err(out.floats(), ref), kTol);
      EXPECT_TRUE(out.pad_untouched());
    }
  }
}

TEST(CpuSiluMul, MatchesReference) {
  check_binary(
      [](const DevTensor& out, const DevTensor& gate, const DevTensor& up) {
        backend().silu_mul({sizeof(tsr_silu_mul_params), out.get(), gate.get(), up.get()});
      },
      [](double g, double u) { return g / (1 + std::exp(-g)) * u; }, 40);
}

// Gates far outside the float range of e^-g: the vector exp must saturate to 0 and +inf
// (silu -> g and -0), not wrap; 19 values so that the last vector is partial.
TEST(CpuSiluMul, SaturatesAtExtremeGates) {
  const std::vector<float> gate = {-1000, -200, -104, -100, -88, -87, -50, -20, -1, 0,
                                   1,     20,   50,   87,   88,  100, 104, 200, 1000};
  const std::vector<float> up(gate.size(), 2.0f);
  const int64_t n = static_cast<int64_t>(gate.size());
  const DevTensor dg = upload(gate, TSR_DTYPE_F32, {1, n});
  const DevTensor du = upload(up, TSR_DTYPE_F32, {1, n});
  const DevTensor out = make_tensor(TSR_DTYPE_F32, {1, n});
  backend().silu_mul({sizeof(tsr_silu_mul_params), out.get(), dg.get(), du.get()});
  const std::vector<float> got = out.floats();
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i], want = g / (1 + std::exp(-g)) * 2;
    EXPECT_NEAR(got[i], want, 1e-6 * std::max(1.0, std::fabs(want))) << "gate " << g;
  }
}

// GELU as llama.cpp's CPU backend computes it: the input rounded to f16, the tanh form
// in float as ggml_gelu_f32 writes it (its cancellation below x = -5 is ggml's too), the
// result rounded to f16 (ggml's table); 0 and x beyond -10 and 10.
TEST(CpuGelu, IsLlamaCppsF16Table) {
  std::vector<float> x = {-1000, -10.5f, -10, -9.99f, -3, -0.5f, -1e-3f, 0, 1e-4f, 0.3337f, 1, 2.5f, 9.99f, 10, 10.5f};
  for (int i = 0; i < 2000; ++i) x.push_back(-12.0f + 24.0f * float(i) / 2000.0f);
  const std::vector<float> up(x.size(), -1.5f);
  const int64_t n = static_cast<int64_t>(x.size());
  const DevTensor dx = upload(x, TSR_DTYPE_F32, {1, n}), du = upload(up, TSR_DTYPE_F32, {1, n});
  const DevTensor out = make_tensor(TSR_DTYPE_F32, {1, n});
  backend().gelu_mul({sizeof(tsr_gelu_params), out.get(), dx.get(), du.get()});
  const std::vector<float> got = out.floats();
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = f16_to_f32(f32_to_f16(x[i]));
    const float g = 0.5f * v * (1.0f + std::tanh(0.79788456080286535588f * v * (1.0f + 0.044715f * v * v)));
    const float want = x[i] <= -10 ? 0.0f : x[i] >= 10 ? x[i] : f16_to_f32(f32_to_f16(g));
    EXPECT_EQ(got[i], want * -1.5f) << "x " << x[i];
  }
}

TEST(CpuAdd, MatchesReference) {
  check_binary(
      [](const DevTensor& out, const DevTensor& a, const DevTensor& b) {
        backend().add({sizeof(tsr_add_params), out.get(), a.get(), b.get()});
      },
      [](double a, double b) { return a + b; }, 50);
}

// ---- rope ----

struct RopeCase {
  tsr_rope_mode mode;
  int32_t n_rot, head_dim;
  float base, scale;
};

TEST(CpuRope, NormalAndNeoxWithPartialRotaryAndScaledFrequencies) {
  const RopeCase cases[] = {{TSR_ROPE_NORMAL, 8, 16, 10000, 0.5f},
                            {TSR_ROPE_NEOX, 8, 16, 10000, 0.25f},
                            {TSR_ROPE_NORMAL, 32, 32, 500000, 1},
                            {TSR_ROPE_NEOX, 24, 64, 1e6f, 0.125f}};
  const std::vector<int32_t> pos = {0, 1, 7, 100, 2047};
  const int64_t n = static_cast<int64_t>(pos.size()), heads = 3;
  uint32_t seed = 60;
  // Each case without and with Llama 3.1-style frequency factors.
  for (size_t k = 0; k < 2 * std::size(cases); ++k) {
    const RopeCase& c = cases[k / 2];
    const bool with_factors = k % 2 == 1;
    SCOPED_TRACE("mode " + std::to_string(c.mode) + " n_rot " + std::to_string(c.n_rot) +
                 " head_dim " + std::to_string(c.head_dim) + (with_factors ? " with factors" : ""));
    const int64_t hd = c.head_dim;
    const int half = c.n_rot / 2;
    // Llama 3.1's shape: high frequencies kept, low ones divided by up to 8.
    std::vector<float> factors(static_cast<size_t>(half), 1.0f);
    for (int i = half / 2; i < half; ++i) factors[i] = 1.0f + 7.0f * float(i - half / 2) / float(half - half / 2);
    const DevTensor df = upload(factors, TSR_DTYPE_F32, {half});
    const std::vector<float> x = random_floats(static_cast<size_t>(n * heads * hd), ++seed);
    const DevTensor dx = upload(x, TSR_DTYPE_F32, {n, heads, hd}, 4);
    const DevTensor dp = upload_i32(pos);
    backend().rope({sizeof(tsr_rope_params), dx.get(), dp.get(), c.n_rot, c.mode, c.base, c.scale,
                    with_factors ? df.get() : nullptr});
    std::vector<double> ref(x.begin(), x.end());
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t h = 0; h < heads; ++h) {
        double* v = &ref[static_cast<size_t>((r * heads + h) * hd)];
        for (int i = 0; i < half; ++i) {
          const double theta = pos[r] * double(c.scale) * std::pow(double(c.base), -2.0 * i / c.n_rot) /
                               (with_factors ? factors[size_t(i)] : 1.0);
          const int a = c.mode == TSR_ROPE_NORMAL ? 2 * i : i;
          const int b = c.mode == TSR_ROPE_NORMAL ? 2 * i + 1 : i + half;
          const double x0 = v[a], x1 = v[b];
          v[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
          v[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
        }
      }
    }
    const std::vector<float> ours = dx.floats();
    EXPECT_LT(norm_err(ours, ref), kTol);
    // Dims past n_rot pass through untouched, bit for bit.
    for (size_t i = 0; i < x.size(); ++i) {
      if (int64_t(i) % hd >= c.n_rot) {
        ASSERT_EQ(ours[i], x[i]) << "element " << i;
      }
    }
    EXPECT_TRUE(dx.pad_untouched());
  }
}

// A caller built before ABI 1.4 passes the shorter struct: whatever follows it in memory is
// not read as freq_factors. Factors of the wrong length, or not > 0, are refused.
// ABI 2.0 params are never shorter than 2.0's: a struct of 1.3's 40 bytes is refused,
// not read as "no factors".
TEST(CpuRope, FreqFactorsChecked) {
  const std::vector<int32_t> pos = {3, 9};
  const std::vector<float> x = random_floats(2 * 8, 61);
  const DevTensor dp = upload_i32(pos);
  const DevTensor dx = upload(x, TSR_DTYPE_F32, {2, 1, 8});
  const std::vector<float> halves(4, 2.0f);
  const DevTensor df = upload(halves, TSR_DTYPE_F32, {4});
  tsr_rope_params p{offsetof(tsr_rope_params, freq_factors), dx.get(), dp.get(), 8, TSR_ROPE_NORMAL,
                    10000, 1, df.get()};
  expect_invalid(p, "smaller than the 64 bytes");

  const DevTensor wrong_length = upload(std::vector<float>(3, 1.0f), TSR_DTYPE_F32, {3});
  const DevTensor zero = upload(std::vector<float>{1, 1, 0, 1}, TSR_DTYPE_F32, {4});
  p.struct_size = sizeof(tsr_rope_params);
  p.freq_factors = wrong_length.get();
  expect_invalid(p, "rope: freq_factors must be [n_rot / 2]");
  p.freq_factors = zero.get();
  expect_invalid(p, "rope: freq_factors must be finite and > 0");
}

// ---- kv_write ----

TEST(CpuKvWrite, WritesMappedSlotsAndSkipsMinusOne) {
  const int64_t slots = 12, kvh = 2, hd = 8, row = kvh * hd;
  const std::vector<int32_t> mapping = {3, -1, 0, 11, -1, 6};
  const int64_t n = static_cast<int64_t>(mapping.size());
  const std::vector<float> k = random_floats(static_cast<size_t>(n * row), 70);
  const std::vector<float> v = random_floats(static_cast<size_t>(n * row), 71);
  const std::vector<float> k_old = random_floats(static_cast<size_t>(slots * row), 72);
  const std::vector<float> v_old = random_floats(static_cast<size_t>(slots * row), 73);
  const DevTensor kc = upload(k_old, TSR_DTYPE_F32, {slots, kvh, hd});
  const DevTensor vc = upload(v_old, TSR_DTYPE_F32, {slots, kvh, hd});
  const DevTensor dk = upload(k, TSR_DTYPE_F32, {n, kvh, hd}, 4);
  const DevTensor dv = upload(v, TSR_DTYPE_F32, {n, kvh, hd}, 8);
  const DevTensor dm = upload_i32(mapping);
  backend().kv_write(
      {sizeof(tsr_kv_write_params), kc.get(), vc.get(), dk.get(), dv.get(), dm.get()});
  std::vector<float> k_want = k_old, v_want = v_old;
  for (int64_t i = 0; i < n; ++i) {
    if (mapping[i] < 0) continue;
    std::copy_n(k.begin() + i * row, row, k_want.begin() + mapping[i] * row);
    std::copy_n(v.begin() + i * row, row, v_want.begin() + mapping[i] * row);
  }
  EXPECT_EQ(kc.floats(), k_want);
  EXPECT_EQ(vc.floats(), v_want);

  const DevTensor bad = upload_i32({3, -1, 0, 12, -1, 6});
  expect_invalid(tsr_kv_write_params{sizeof(tsr_kv_write_params), kc.get(), vc.get(), dk.get(),
                                     dv.get(), bad.get()},
                 "slot 12 out of range");
  const DevTensor bad_neg = upload_i32({-2, -1, 0, 1, -1, 6});
  expect_invalid(tsr_kv_write_params{sizeof(tsr_kv_write_params), kc.get(), vc.get(), dk.get(),
                                     dv.get(), bad_neg.get()},
                 "slot -2 out of range");
}

// ---- paged attention ----

constexpr int64_t kHeads = 8, kKvHeads = 2;
const std::vector<int32_t> kSeqLens = {5, 23, 12};

// Three sequences' keys and values, kept contiguously for the reference and written by
// kv_write into a paged cache of some KV dtype through scattered, shuffled block tables.
// Slots no table names stay NaN, so a kernel reading a wrong slot shows. For a
// low-precision cache, k and v become the values the cache holds once written.
struct PagedCache {
  int32_t block_size = 0;
  int64_t head_dim = 0;
  int64_t max_blocks = 0;
  std::vector<int32_t> tables;           // [num_seqs, max_blocks], -1 where unused
  std::vector<std::vector<float>> k, v;  // per sequence: [len, kv_heads, head_dim]
  DevTensor k_cache, v_cache;

  int64_t slot(size_t s, int64_t t) const {
    return int64_t(tables[s * max_blocks + t / block_size]) * block_size + t % block_size;
  }
};

// The values of one stored head row of a KV cache of `dtype` (GGUF's reference decoders;
// fp8: the quant format's).
std::vector<float> kv_row_values(tsr_dtype dtype, const uint8_t* row, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  if (dtype == TSR_DTYPE_F32) std::memcpy(v.data(), row, v.size() * sizeof(float));
  for (int64_t i = 0; i < n && (dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16); ++i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    v[i] = dtype == TSR_DTYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
  if (dtype == TSR_DTYPE_Q8_0) quant::dequantize_row_q8_0(reinterpret_cast<const quant::BlockQ8_0*>(row), v.data(), n);
  if (dtype == TSR_DTYPE_Q4_0) quant::dequantize_row_q4_0(reinterpret_cast<const quant::BlockQ4_0*>(row), v.data(), n);
  if (dtype == TSR_DTYPE_FP8_E4M3) quant::dequantize_row_fp8_e4m3(row, v.data(), n);
  return v;
}

// An fp8 cache row is one scale and a byte per element for each head (abi.h), so a head of
// small values keeps its precision beside a head of large ones.
TEST(CpuKvWrite, Fp8KeepsAScalePerHead) {
  const int64_t kvh = 2, hd = 12;
  std::vector<float> k = random_floats(static_cast<size_t>(kvh * hd), 74);
  for (int64_t d = 0; d < hd; ++d) k[d] *= 1000.0f;  // head 0 large, head 1 within [-1, 1]
  const DevTensor kc = make_tensor(TSR_DTYPE_FP8_E4M3, {4, kvh, hd});
  const DevTensor vc = make_tensor(TSR_DTYPE_FP8_E4M3, {4, kvh, hd});
  const DevTensor dk = upload(k, TSR_DTYPE_F32, {1, kvh, hd});
  const DevTensor dm = upload_i32({2});
  backend().kv_write({sizeof(tsr_kv_write_params), kc.get(), vc.get(), dk.get(), dk.get(), dm.get()});
  ASSERT_EQ(kc.stride, kvh * (4 + hd));
  const std::vector<uint8_t> bytes = kc.bytes();
  for (int64_t h = 0; h < kvh; ++h) {
    const uint8_t* row = bytes.data() + 2 * kc.stride + h * (4 + hd);
    float scale;
    std::memcpy(&scale, row, 4);
    float amax = 0;
    for (int64_t d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(k[h * hd + d]));
    EXPECT_EQ(scale, amax / 448.0f) << "head " << h;
    const std::vector<float> got = kv_row_values(TSR_DTYPE_FP8_E4M3, row, hd);
    for (int64_t d = 0; d < hd; ++d) {
      EXPECT_NEAR(got[d], k[h * hd + d], std::fabs(k[h * hd + d]) / 16 + 1e-6) << "head " << h << " dim " << d;
    }
  }
}

// The keys or values `cache` holds for every token of c, per sequence.
std::vector<std::vector<float>> stored_values(const PagedCache& c, const DevTensor& cache, tsr_dtype dtype) {
  const std::vector<uint8_t> bytes = cache.bytes();
  const int64_t head = dtype_row_bytes(dtype, c.head_dim);
  std::vector<std::vector<float>> out;
  for (size_t s = 0; s < kSeqLens.size(); ++s) {
    out.emplace_back();
    for (int64_t t = 0; t < kSeqLens[s]; ++t) {
      for (int64_t h = 0; h < kKvHeads; ++h) {
        const uint8_t* row = bytes.data() + c.slot(s, t) * cache.stride + h * head;
        const std::vector<float> v = kv_row_values(dtype, row, c.head_dim);
        out.back().insert(out.back().end(), v.begin(), v.end());
      }
    }
  }
  return out;
}

PagedCache make_paged_cache(int32_t block_size, int64_t head_dim, uint32_t seed,
                            Backend& be = backend(), tsr_dtype dtype = TSR_DTYPE_F32) {
  PagedCache c;
  c.block_size = block_size;
  c.head_dim = head_dim;
  const int64_t row = kKvHeads * head_dim;
  int64_t used = 0;
  for (const int32_t len : kSeqLens) {
    const int64_t blocks = (len + block_size - 1) / block_size;
    c.max_blocks = std::max(c.max_blocks, blocks + 1);  // a spare column the kernel ignores
    used += blocks;
  }
  const int64_t num_blocks = 2 * used + 1;
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(ids.begin(), ids.end(), rng);
  c.tables.assign(kSeqLens.size() * c.max_blocks, -1);
  size_t next = 0;
  for (size_t s = 0; s < kSeqLens.size(); ++s) {
    for (int64_t b = 0; b < (kSeqLens[s] + block_size - 1) / block_size; ++b) {
      c.tables[s * c.max_blocks + b] = ids[next++];
    }
  }
  // One kv_write for every token, interleaved with -1 rows whose data must land nowhere.
  std::vector<float> k_rows, v_rows;
  std::vector<int32_t> mapping;
  for (size_t s = 0; s < kSeqLens.size(); ++s) {
    c.k.push_back(random_floats(static_cast<size_t>(kSeqLens[s] * row), seed + 1 + 2 * s));
    c.v.push_back(random_floats(static_cast<size_t>(kSeqLens[s] * row), seed + 2 + 2 * s));
    for (int64_t t = 0; t < kSeqLens[s]; ++t) {
      k_rows.insert(k_rows.end(), c.k[s].begin() + t * row, c.k[s].begin() + (t + 1) * row);
      v_rows.insert(v_rows.end(), c.v[s].begin() + t * row, c.v[s].begin() + (t + 1) * row);
      mapping.push_back(static_cast<int32_t>(c.slot(s, t)));
      if (t % 3 == 0) {
        k_rows.insert(k_rows.end(), row, 1e30f);
        v_rows.insert(v_rows.end(), row, 1e30f);
        mapping.push_back(-1);
      }
    }
  }
  const int64_t slots = num_blocks * block_size, n = static_cast<int64_t>(mapping.size());
  c.k_cache = make_tensor(dtype, {slots, kKvHeads, head_dim}, nullptr, 0, be);
  c.v_cache = make_tensor(dtype, {slots, kKvHeads, head_dim}, nullptr, 0, be);
  const DevTensor dk = upload(k_rows, TSR_DTYPE_F32, {n, kKvHeads, head_dim}, 0, be);
  const DevTensor dv = upload(v_rows, TSR_DTYPE_F32, {n, kKvHeads, head_dim}, 0, be);
  const DevTensor dm = upload_i32(mapping, be);
  be.kv_write({sizeof(tsr_kv_write_params), c.k_cache.get(), c.v_cache.get(), dk.get(), dv.get(),
               dm.get()});
  if (dtype != TSR_DTYPE_F32) {
    c.k = stored_values(c, c.k_cache, dtype);
    c.v = stored_values(c, c.v_cache, dtype);
  }
  return c;
}

// Query rows of a batch: for each listed sequence, the positions of its query tokens.
struct Batch {
  std::vector<size_t> seqs;
  std::vector<std::vector<int32_t>> positions;

  int64_t rows() const {
    int64_t n = 0;
    for (const auto& p : positions) n += static_cast<int64_t>(p.size());
    return n;
  }
};

// Device operands of one attention call over a batch, for runs and for argument tests.
struct AttentionCall {
  const PagedCache* cache = nullptr;
  DevTensor out, q, tables, seq_lens, qsl, positions;

  // Built on demand: the params point at this object's tensors, which move with it.
  tsr_attention_params params() const {
    return {sizeof(tsr_attention_params), out.get(), q.get(), cache->k_cache.get(),
            cache->v_cache.get(), tables.get(), seq_lens.get(), qsl.get(), positions.get(),
            cache->block_size, 1 / std::sqrt(float(cache->head_dim))};
  }
};

AttentionCall make_call(const PagedCache& c, const Batch& b, const std::vector<float>& q,
                        Backend& be = backend()) {
  std::vector<int32_t> tables, lens, qsl = {0}, pos;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const size_t s = b.seqs[i];
    tables.insert(tables.end(), c.tables.begin() + s * c.max_blocks,
                  c.tables.begin() + (s + 1) * c.max_blocks);
    lens.push_back(kSeqLens[s]);
    qsl.push_back(qsl.back() + static_cast<int32_t>(b.positions[i].size()));
    pos.insert(pos.end(), b.positions[i].begin(), b.positions[i].end());
  }
  const int64_t n = b.rows(), num_seqs = static_cast<int64_t>(b.seqs.size());
  AttentionCall a;
  a.cache = &c;
  a.out = make_tensor(TSR_DTYPE_F32, {n, kHeads, c.head_dim}, nullptr, 4, be);
  a.q = upload(q, TSR_DTYPE_F32, {n, kHeads, c.head_dim}, 12, be);
  a.tables = upload(tables, TSR_DTYPE_I32, {num_seqs, c.max_blocks}, 0, be);
  a.seq_lens = upload_i32(lens, be);
  a.qsl = upload_i32(qsl, be);
  a.positions = upload_i32(pos, be);
  return a;
}

std::vector<float> run_attention(const PagedCache& c, const Batch& b, const std::vector<float>& q,
                                 Backend& be = backend()) {
  AttentionCall a = make_call(c, b, q, be);
  be.attention(a.params());
  EXPECT_TRUE(a.out.pad_untouched());
  return a.out.floats();
}

// Causal softmax attention over each sequence's contiguous keys 0..pos, in double.
std::vector<double> ref_attention(const PagedCache& c, const Batch& b,
                                  const std::vector<float>& q) {
  const int64_t hd = c.head_dim;
  const double scale = 1 / std::sqrt(double(hd));
  const int64_t group = kHeads / kKvHeads;
  std::vector<double> out;
  size_t row = 0;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const std::vector<float>& k = c.k[b.seqs[i]];
    const std::vector<float>& v = c.v[b.seqs[i]];
    for (const int32_t pos : b.positions[i]) {
      for (int64_t h = 0; h < kHeads; ++h) {
        const float* qv = &q[(row * kHeads + h) * hd];
        const int64_t kv_off = h / group * hd;
        std::vector<double> w(static_cast<size_t>(pos + 1));
        for (int64_t t = 0; t <= pos; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) {
            dot += double(qv[d]) * k[(t * kKvHeads) * hd + kv_off + d];
          }
          w[t] = dot * scale;
        }
        const double mx = *std::max_element(w.begin(), w.end());
        double denom = 0;
        for (double& x : w) denom += (x = std::exp(x - mx));
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t t = 0; t <= pos; ++t) {
            acc += w[t] * v[(t * kKvHeads) * hd + kv_off + d];
          }
          out.push_back(acc / denom);
        }
      }
      ++row;
    }
  }
  return out;
}

std::vector<int32_t> range(int32_t from, int32_t to) {  // [from, to)
  std::vector<int32_t> v(static_cast<size_t>(to - from));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// Sequence 0 prefills from scratch, sequence 1 continues a chunked prefill whose first 15
// keys are already cached, sequence 2 decodes one token.
Batch mixed_batch() { return {{0, 1, 2}, {range(0, 5), range(15, 23), {11}}}; }
// One query per sequence at its last position, in a different sequence order.
Batch decode_batch() { return {{2, 0, 1}, {{11}, {4}, {22}}}; }

// Block size, head_dim and KV dtype: 16, 64 and 128 fill whole vector registers, 12 and 72
// end in a partial one, 136 is wider than the AVX-512 kernels' registers (the portable
// kernel takes it), 160 and 576 (deepseek2's latent rows) go to the tile kernel even for
// tiles of few pairs. Every dtype runs through the kernels that read it in registers and
// in tiles.
struct AttentionCase {
  int32_t block_size;
  int64_t head_dim;
  tsr_dtype dtype = TSR_DTYPE_F32;
};

class AttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionTest, MatchesContiguousReference) {
  const PagedCache c = make_paged_cache(GetParam().block_size, GetParam().head_dim, 80, backend(), GetParam().dtype);
  for (const Batch& b : {mixed_batch(), decode_batch()}) {
    SCOPED_TRACE("rows " + std::to_string(b.rows()));
    const std::vector<float> q =
        random_floats(static_cast<size_t>(b.rows() * kHeads * c.head_dim), 90 + b.rows());
    EXPECT_LT(norm_err(run_attention(c, b, q), ref_attention(c, b, q)), kTol);
  }
}

// Each sequence's rows in a batch equal those of the sequence run alone, bit for bit.
TEST_P(AttentionTest, BatchEqualsSequencesAlone) {
  const PagedCache c = make_paged_cache(GetParam().block_size, GetParam().head_dim, 81, backend(), GetParam().dtype);
  const Batch b = mixed_batch();
  const int64_t row = kHeads * c.head_dim;
  const std::vector<float> q = random_floats(static_cast<size_t>(b.rows() * row), 91);
  const std::vector<float> batched = run_attention(c, b, q);
  int64_t first = 0;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const int64_t n = static_cast<int64_t>(b.positions[i].size());
    const std::vector<float> q_alone(q.begin() + first * row, q.begin() + (first + n) * row);
    const std::vector<float> alone = run_attention(c, {{b.seqs[i]}, {b.positions[i]}}, q_alone);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batched.begin() + first * row))
        << "sequence " << b.seqs[i];
    first += n;
  }
}

// A prompt row's attention is the same bits as the row decoded alone: in the prompt its
// (row, head) pairs share kernel calls sixteen at a time, in decode its kv head's four
// pairs run one by one (cpu_attention.cpp), and greedy output must not see the difference.
TEST_P(AttentionTest, PromptRowsEqualTheirDecode) {
  const PagedCache c = make_paged_cache(GetParam().block_size, GetParam().head_dim, 82, backend(), GetParam().dtype);
  const int32_t len = kSeqLens[1];
  const int64_t row = kHeads * c.head_dim;
  const std::vector<float> q = random_floats(static_cast<size_t>(len * row), 92);
  const std::vector<float> prompt = run_attention(c, {{1}, {range(0, len)}}, q);
  for (int32_t t = 0; t < len; ++t) {
    const std::vector<float> q_row(q.begin() + t * row, q.begin() + (t + 1) * row);
    const std::vector<float> decoded = run_attention(c, {{1}, {{t}}}, q_row);
    EXPECT_TRUE(std::equal(decoded.begin(), decoded.end(), prompt.begin() + t * row)) << "position " << t;
  }
}

// Writes sequence s's keys and values of positions `from` at positions `to` of the cache.
void move_keys(const PagedCache& c, size_t s, const std::vector<int32_t>& from, const std::vector<int32_t>& to) {
  const int64_t row = kKvHeads * c.head_dim, n = static_cast<int64_t>(from.size());
  std::vector<float> k, v;
  std::vector<int32_t> slots;
  for (size_t i = 0; i < from.size(); ++i) {
    k.insert(k.end(), c.k[s].begin() + from[i] * row, c.k[s].begin() + (from[i] + 1) * row);
    v.insert(v.end(), c.v[s].begin() + from[i] * row, c.v[s].begin() + (from[i] + 1) * row);
    slots.push_back(static_cast<int32_t>(c.slot(s, to[i])));
  }
  const DevTensor dk = upload(k, TSR_DTYPE_F32, {n, kKvHeads, c.head_dim});
  const DevTensor dv = upload(v, TSR_DTYPE_F32, {n, kKvHeads, c.head_dim});
  const DevTensor dm = upload_i32(slots);
  backend().kv_write({sizeof(tsr_kv_write_params), c.k_cache.get(), c.v_cache.get(), dk.get(), dv.get(), dm.get()});
}

// Tree attention (ABI 2.8 parents): a tree of draft rows after a root at position 15, its
// first chain at 15..18 and other branches after it. Each row computes what the last row
// of its path computes decoded over a cache that holds the path's keys in order: the same
// bits where the cache stores the keys exactly (re-quantized keys differ a little).
TEST_P(AttentionTest, TreeRowsEqualTheirPathsDecoded) {
  const AttentionCase& ac = GetParam();
  const PagedCache c = make_paged_cache(ac.block_size, ac.head_dim, 83, backend(), ac.dtype);
  const std::vector<int32_t> pos = {15, 16, 17, 18, 19, 20, 21, 22};
  const std::vector<int32_t> parents = {-1, 0, 1, 2, 0, 1, 4, 2};
  const int64_t row = kHeads * c.head_dim;
  const std::vector<float> q = random_floats(static_cast<size_t>(8 * row), 93);
  AttentionCall a = make_call(c, {{1}, {pos}}, q);
  const DevTensor dp = upload_i32(parents);
  tsr_attention_params p = a.params();
  p.parents = dp.get();
  backend().attention(p);
  EXPECT_TRUE(a.out.pad_untouched());
  const std::vector<float> tree = a.out.floats();
  const bool exact = ac.dtype == TSR_DTYPE_F32 || ac.dtype == TSR_DTYPE_F16 || ac.dtype == TSR_DTYPE_BF16;
  for (int32_t r = 0; r < 8; ++r) {
    std::vector<int32_t> path;
    for (int32_t x = r; x != -1; x = parents[size_t(x)]) path.insert(path.begin(), pos[size_t(x)]);
    // The same cache (the kernels' sums may depend on its rows' alignment), its tree's
    // positions restored after each row.
    move_keys(c, 1, path, range(15, 15 + int32_t(path.size())));
    const std::vector<float> q_row(q.begin() + r * row, q.begin() + (r + 1) * row);
    const std::vector<float> decoded = run_attention(c, {{1}, {{15 + int32_t(path.size()) - 1}}}, q_row);
    move_keys(c, 1, range(15, 23), range(15, 23));
    const std::vector<float> got(tree.begin() + r * row, tree.begin() + (r + 1) * row);
    if (exact) {
      EXPECT_EQ(got, decoded) << "row " << r;
    } else {
      EXPECT_LT(norm_err(got, std::vector<double>(decoded.begin(), decoded.end())), kTol) << "row " << r;
    }
  }
}

// A tree row whose path is its slots' causal run (row 2: 15 -> 16, beside row 1 at 17)
// reads its keys through the tree's indirection and gives the causal row's bits: the
// kernels' sums do not depend on how a row's keys are found (cpu_attention.cpp,
// dot_product).
TEST(CpuTreeAttention, APathOfConsecutiveSlotsIsCausal) {
  const PagedCache c = make_paged_cache(4, 16, 83);
  const int64_t row = kHeads * c.head_dim;
  const std::vector<float> q = random_floats(static_cast<size_t>(3 * row), 93);
  AttentionCall a = make_call(c, {{1}, {{15, 17, 16}}}, q);
  const DevTensor dp = upload_i32({-1, 0, 0});
  tsr_attention_params p = a.params();
  p.parents = dp.get();
  backend().attention(p);
  const std::vector<float> tree = a.out.floats();
  AttentionCall b = make_call(c, {{1}, {{15, 17, 16}}}, q);
  backend().attention(b.params());
  const std::vector<float> causal = b.out.floats();
  std::vector<float> t2(tree.begin() + 2 * row, tree.end()), c2(causal.begin() + 2 * row, causal.end());
  EXPECT_EQ(t2, c2);
  std::vector<float> t0(tree.begin(), tree.begin() + row), c0(causal.begin(), causal.begin() + row);
  EXPECT_EQ(t0, c0);
}

INSTANTIATE_TEST_SUITE_P(Cpu, AttentionTest,
                         ::testing::Values(AttentionCase{4, 16}, AttentionCase{16, 16},
                                           AttentionCase{16, 12}, AttentionCase{4, 64},
                                           AttentionCase{16, 72}, AttentionCase{16, 128},
                                           AttentionCase{8, 136}, AttentionCase{16, 12, TSR_DTYPE_F16},
                                           AttentionCase{4, 64, TSR_DTYPE_F16}, AttentionCase{16, 72, TSR_DTYPE_BF16},
                                           AttentionCase{16, 128, TSR_DTYPE_BF16}, AttentionCase{4, 32, TSR_DTYPE_Q8_0},
                                           AttentionCase{16, 128, TSR_DTYPE_Q8_0}, AttentionCase{16, 64, TSR_DTYPE_Q4_0},
                                           AttentionCase{8, 160, TSR_DTYPE_Q4_0}, AttentionCase{16, 12, TSR_DTYPE_FP8_E4M3},
                                           AttentionCase{4, 64, TSR_DTYPE_FP8_E4M3}, AttentionCase{16, 72, TSR_DTYPE_FP8_E4M3},
                                           AttentionCase{8, 136, TSR_DTYPE_FP8_E4M3}, AttentionCase{16, 576},
                                           AttentionCase{4, 576, TSR_DTYPE_F16}),
                         [](const auto& info) {
                           return "block" + std::to_string(info.param.block_size) + "_dim" +
                                  std::to_string(info.param.head_dim) + "_" + tsr_dtype_name(info.param.dtype);
                         });

// ---- copy_blocks ----

TEST(CpuCopyBlocks, CopiesBlocksInEveryCache) {
  const int32_t block_size = 4, num_blocks = 6, slots = block_size * num_blocks;
  const std::vector<int32_t> pairs = {0, 3, 5, 1, 2, 4};  // disjoint: order cannot matter
  // Caches of different dtypes and row widths: the op copies whole rows as bytes.
  struct Spec {
    tsr_dtype dtype;
    int64_t heads, dim;
  };
  const Spec specs[] = {{TSR_DTYPE_F32, 2, 8}, {TSR_DTYPE_BF16, 1, 24}, {TSR_DTYPE_Q8_0, 1, 64}};
  std::vector<DevTensor> caches;
  std::vector<std::vector<uint8_t>> want;
  for (const Spec& s : specs) {
    const int64_t row = dtype_row_bytes(s.dtype, s.heads * s.dim);
    std::vector<uint8_t> bytes(static_cast<size_t>(slots * row));
    std::mt19937 rng(static_cast<uint32_t>(100 + caches.size()));
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    caches.push_back(upload(bytes, s.dtype, {slots, s.heads, s.dim}));
    for (size_t p = 0; p < pairs.size(); p += 2) {
      std::memmove(&bytes[pairs[p + 1] * block_size * row], &bytes[pairs[p] * block_size * row],
                   static_cast<size_t>(block_size * row));
    }
    want.push_back(bytes);
  }
  std::vector<const tsr_tensor*> ptrs;
  for (const DevTensor& d : caches) ptrs.push_back(d.get());
  const DevTensor dp = upload(pairs, TSR_DTYPE_I32, {3, 2});
  tsr_copy_blocks_params p{sizeof(tsr_copy_blocks_params), ptrs.data(),
                           static_cast<int32_t>(ptrs.size()), block_size, dp.get()};
  backend().copy_blocks(p);
  for (size_t i = 0; i < caches.size(); ++i) {
    EXPECT_EQ(caches[i].rows_as<uint8_t>(), want[i]) << "cache " << i;
  }

  const DevTensor bad = upload(std::vector<int32_t>{0, 1, 2, num_blocks}, TSR_DTYPE_I32, {2, 2});
  p.pairs = bad.get();
  expect_invalid(p, "block id out of range");
  for (size_t i = 0; i < caches.size(); ++i) {  // the valid first pair was not applied either
    EXPECT_EQ(caches[i].rows_as<uint8_t>(), want[i]) << "cache " << i << " after a failed call";
  }
}

// K and V interleaved in one buffer: each is a view whose row stride spans the other's
// row. Copying K's blocks must leave V's rows alone, and copying into V's last block must
// not write past the buffer's end (its last row has no padding after it).
TEST(CpuCopyBlocks, InterleavedViewsCopyOnlyTheirOwnRows) {
  const int32_t block_size = 4, num_blocks = 3, slots = block_size * num_blocks;
  const int64_t heads = 2, dim = 16, row = heads * dim * 4;  // 128 bytes per row
  std::vector<uint8_t> bytes(static_cast<size_t>(slots * 2 * row));
  std::mt19937 rng(140);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  Backend& be = backend();
  auto buf = be.alloc(bytes.size());
  be.write(*buf, 0, bytes.data(), bytes.size());
  tsr_tensor k = tensor_make(TSR_DTYPE_F32, buf->base(), {slots, heads, dim});
  tsr_tensor v = tensor_make(TSR_DTYPE_F32, buf->base() + row, {slots, heads, dim});
  k.strides[0] = v.strides[0] = 2 * row;
  const std::vector<int32_t> pairs = {0, 2};  // into the last block
  const DevTensor dp = upload(pairs, TSR_DTYPE_I32, {1, 2});
  for (const tsr_tensor* cache : {&k, &v}) {
    be.copy_blocks({sizeof(tsr_copy_blocks_params), &cache, 1, block_size, dp.get()});
    const int64_t first = cache == &k ? 0 : row;  // byte offset of this view's rows
    for (int64_t r = 0; r < block_size; ++r) {
      std::memcpy(&bytes[(2 * block_size * 2 + 2 * r) * row + first], &bytes[2 * r * row + first],
                  static_cast<size_t>(row));
    }
    std::vector<uint8_t> got(bytes.size());
    be.read(*buf, 0, got.data(), got.size());
    EXPECT_EQ(got, bytes) << (cache == &k ? "after copying K" : "after copying V");
  }
}

// ---- bad arguments: an error status with a message, never a crash ----

TEST(CpuBadArgs, MatmulOperands) {
  const std::vector<float> x = random_floats(3 * 64, 110), w = random_floats(5 * 64, 111);
  const DevTensor dx = upload(x, TSR_DTYPE_F32, {3, 64});
  const DevTensor dw = upload(w, TSR_DTYPE_F32, {5, 64});
  const DevTensor out = make_tensor(TSR_DTYPE_F32, {3, 5});
  expect_invalid(tsr_matmul_params{sizeof(tsr_matmul_params), nullptr, dx.get(), dw.get()},
                 "matmul out is NULL");
  expect_invalid(tsr_matmul_params{sizeof(tsr_matmul_params), out.get(), dx.get(), nullptr},
                 "matmul w is NULL");
  auto params = matmul_params(out, dx, dw);
  params.struct_size = sizeof(tsr_matmul_params) - 8;
  expect_invalid(params, "is smaller than the 32 bytes");

  const DevTensor x16 = make_tensor(TSR_DTYPE_F16, {3, 64});
  expect_invalid(matmul_params(out, x16, dw), "must have dtype");
  const DevTensor x_wide = make_tensor(TSR_DTYPE_F32, {3, 96});
  expect_invalid(matmul_params(out, x_wide, dw), "columns");
  const DevTensor out_bad = make_tensor(TSR_DTYPE_F32, {3, 6});
  expect_invalid(matmul_params(out_bad, dx, dw), "out must be [n, m]");
  const DevTensor w_i32 = make_tensor(TSR_DTYPE_I32, {5, 64});
  expect_invalid(matmul_params(out, dx, w_i32), "unsupported weight dtype");
  DevTensor q_bad = make_tensor(TSR_DTYPE_F32, {5, 40});  // relabelled: 40 is no whole block
  q_bad.t.dtype = TSR_DTYPE_Q8_0;
  expect_invalid(matmul_params(out, dx, q_bad), "block size");
  DevTensor w_99 = make_tensor(TSR_DTYPE_F32, {5, 64});
  const int32_t no_dtype = 99;  // stored as a plain int, as a C caller may
  std::memcpy(&w_99.t.dtype, &no_dtype, sizeof(no_dtype));
  expect_invalid(matmul_params(out, dx, w_99), "unsupported dtype 99");

  tsr_tensor small = *dx.get();
  small.struct_size = 16;
  expect_invalid(tsr_matmul_params{sizeof(tsr_matmul_params), out.get(), &small, dw.get()},
                 "struct_size too small");
  const DevTensor x3 = make_tensor(TSR_DTYPE_F32, {3, 4, 16});
  tsr_tensor gappy = *x3.get();
  gappy.strides[1] = 128;  // inner dim not packed: rows are not contiguous
  expect_invalid(tsr_matmul_params{sizeof(tsr_matmul_params), out.get(), &gappy, dw.get()},
                 "not contiguous");
}

TEST(CpuBadArgs, ElementwiseAndRopeOperands) {
  const DevTensor a = make_tensor(TSR_DTYPE_F32, {4, 32});
  const DevTensor b = make_tensor(TSR_DTYPE_F32, {4, 16});
  const DevTensor w = make_tensor(TSR_DTYPE_F32, {16});
  const DevTensor a16 = make_tensor(TSR_DTYPE_F16, {4, 32});
  expect_invalid(tsr_add_params{sizeof(tsr_add_params), a.get(), a.get(), b.get()},
                 "shapes differ");
  expect_invalid(tsr_add_params{sizeof(tsr_add_params), a.get(), a16.get(), a.get()},
                 "must have dtype");
  expect_invalid(tsr_silu_mul_params{sizeof(tsr_silu_mul_params), a.get(), nullptr, a.get()},
                 "is NULL");
  expect_invalid(
      tsr_rms_norm_params{sizeof(tsr_rms_norm_params), a.get(), a.get(), w.get(), 1e-5f, 0},
      "weight length");
  expect_invalid(tsr_rms_norm_params{8, a.get(), a.get(), w.get(), 1e-5f, 0}, "smaller than");

  const DevTensor x = make_tensor(TSR_DTYPE_F32, {2, 2, 16});
  const DevTensor pos = upload_i32({0, 1});
  const DevTensor pos3 = upload_i32({0, 1, 2});
  // The mode goes in as a plain int, as a C caller may pass any.
  const auto rope = [&](const DevTensor& p, int32_t n_rot, int32_t mode) {
    tsr_rope_params r{sizeof(tsr_rope_params), x.get(), p.get(), n_rot, TSR_ROPE_NORMAL, 10000, 1, nullptr};
    std::memcpy(&r.mode, &mode, sizeof(mode));
    return r;
  };
  expect_invalid(rope(pos, 7, TSR_ROPE_NORMAL), "n_rot");
  expect_invalid(rope(pos, 18, TSR_ROPE_NEOX), "n_rot");
  expect_invalid(rope(pos, 8, 5), "unknown mode");
  expect_invalid(rope(pos3, 8, TSR_ROPE_NORMAL), "expected 2");
  expect_invalid(
      tsr_rope_params{sizeof(tsr_rope_params), a.get(), pos.get(), 8, TSR_ROPE_NORMAL, 10000, 1, nullptr},
      "[n, heads, head_dim]");
}

TEST(CpuBadArgs, AttentionOperands) {
  const PagedCache c = make_paged_cache(4, 16, 120);
  const Batch b = mixed_batch();
  const std::vector<float> q =
      random_floats(static_cast<size_t>(b.rows() * kHeads * c.head_dim), 121);
  {  // a position at or beyond its sequence's seq_len
    Batch late = b;
    late.positions[2] = {12};
    AttentionCall a = make_call(c, late, q);
    expect_invalid(a.params(), "position 12 not below seq_len 12");
  }
  {  // a block id past the end of the cache
    PagedCache far = make_paged_cache(4, 16, 120);
    far.tables[0] = static_cast<int32_t>(far.k_cache.rows / 4);
    AttentionCall a = make_call(far, b, q);
    expect_invalid(a.params(), "outside the cache");
    far.tables[0] = -1;
    AttentionCall neg = make_call(far, b, q);
    expect_invalid(neg.params(), "outside the cache");
  }
  AttentionCall a = make_call(c, b, q);
  {  // seq_len needing more blocks than a table row holds
    const DevTensor lens = upload_i32({5, int32_t(c.max_blocks * 4 + 1), 12});
    tsr_attention_params p = a.params();
    p.seq_lens = lens.get();
    expect_invalid(p, "exceeds the block table");
  }
  {  // a seq_len so large that rounding it up to blocks overflows 32 bits
    const DevTensor lens = upload_i32({5, INT32_MAX, 12});
    tsr_attention_params p = a.params();
    p.seq_lens = lens.get();
    expect_invalid(p, "exceeds the block table");
  }
  {  // query_start_loc not ending at the number of rows
    const DevTensor qsl = upload_i32({0, 5, 13, 13});
    tsr_attention_params p = a.params();
    p.query_start_loc = qsl.get();
    expect_invalid(p, "query_start_loc");
  }
  {  // query_start_loc overshooting the rows before coming back: must not read past them.
     // Every position is 0, valid for any sequence, so only a bound on the rows stops it.
    const DevTensor qsl = upload_i32({0, 40, 5, 14});
    const DevTensor zeros = upload_i32(std::vector<int32_t>(static_cast<size_t>(b.rows()), 0));
    tsr_attention_params p = a.params();
    p.query_start_loc = qsl.get();
    p.positions = zeros.get();
    expect_invalid(p, "query_start_loc");
  }
  {  // heads not a multiple of kv_heads
    const DevTensor q3 = make_tensor(TSR_DTYPE_F32, {b.rows(), 3, c.head_dim});
    const DevTensor out3 = make_tensor(TSR_DTYPE_F32, {b.rows(), 3, c.head_dim});
    tsr_attention_params p = a.params();
    p.q = q3.get();
    p.out = out3.get();
    expect_invalid(p, "multiple of kv_heads");
  }
  {  // NULL operand, zero block size, short params
    tsr_attention_params p = a.params();
    p.positions = nullptr;
    expect_invalid(p, "positions is NULL");
    p = a.params();
    p.block_size = 0;
    expect_invalid(p, "block_size");
    p = a.params();
    p.struct_size = offsetof(tsr_attention_params, block_size);
    expect_invalid(p, "smaller than");
  }
  {  // parents naming a later row, or a row of another sequence
    const DevTensor later = upload_i32({-1, 2, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1});
    tsr_attention_params p = a.params();
    p.parents = later.get();
    expect_invalid(p, "parents[1] must be -1 or an earlier row of its sequence");
    const DevTensor other = upload_i32({-1, 0, 1, 2, 3, 2, -1, -1, -1, -1, -1, -1, -1, -1});
    p.parents = other.get();
    expect_invalid(p, "parents[5] must be -1 or an earlier row of its sequence");
  }
  backend().attention(a.params());  // the untouched call still succeeds
}

// Straight through the C table: NULL params and NULL backend fail cleanly even when the
// caller passes no error pointer.
TEST(CpuBadArgs, NullParamsThroughTheAbi) {
  tsr_backend_params bp{sizeof(tsr_backend_params), 0, 1, nullptr};
  tsr_backend* b = raw_create(bp);
  ASSERT_NE(b, nullptr);
  for (int op = 0; op < TSR_OP_COUNT_; ++op) {
    EXPECT_EQ(raw_enqueue(b, static_cast<tsr_op>(op), nullptr, nullptr), TSR_STATUS_INVALID_ARGUMENT) << "op " << op;
  }
  EXPECT_EQ(raw_enqueue(b, static_cast<tsr_op>(TSR_OP_COUNT_ + 7), nullptr, nullptr), TSR_STATUS_UNSUPPORTED);
  EXPECT_EQ(cpu_reg()->backend->enqueue(b, nullptr, nullptr, nullptr), TSR_STATUS_INVALID_ARGUMENT);
  // Params with every operand NULL.
  tsr_attention_params ap{};
  ap.struct_size = sizeof(ap);
  EXPECT_EQ(raw_enqueue(b, TSR_OP_ATTENTION, &ap, nullptr), TSR_STATUS_INVALID_ARGUMENT);
  tsr_copy_blocks_params cp{sizeof(cp), nullptr, 1, 4, nullptr};
  EXPECT_EQ(raw_enqueue(b, TSR_OP_COPY_BLOCKS, &cp, nullptr), TSR_STATUS_INVALID_ARGUMENT);
  tsr_matmul_params mp{sizeof(mp), nullptr, nullptr, nullptr};
  EXPECT_EQ(raw_enqueue(nullptr, TSR_OP_MATMUL, &mp, nullptr), TSR_STATUS_INVALID_ARGUMENT);
  cpu_reg()->backend->backend_destroy(b);
  bp.struct_size = 8;
  EXPECT_EQ(raw_create(bp), nullptr);
}

// ---- quant plugins' kernels registered into the backend ----

// A scheme of its own (TSR_DTYPE_PLUGIN) whose "weights" are f32 rows: the kernel counts
// its calls and multiplies, so that the test sees when and where it ran.
struct CountingKernels {
  static inline int calls = 0;
  static tsr_status matmul(const tsr_quant_matmul_args* a, tsr_error**) {
    ++calls;
    const tsr_tensor &x = *a->params->x, &w = *a->params->w, &y = *a->params->out;
    for (int64_t i = 0; i < x.shape[0]; ++i) {
      for (int64_t j = 0; j < w.shape[0]; ++j) {
        float s = 0;
        for (int64_t c = 0; c < x.shape[1]; ++c) {
          s += static_cast<const float*>(x.data)[i * x.shape[1] + c] * static_cast<const float*>(w.data)[j * x.shape[1] + c];
        }
        static_cast<float*>(y.data)[i * w.shape[0] + j] = s;
      }
    }
    return a->stream == nullptr ? TSR_STATUS_OK : TSR_STATUS_INTERNAL;  // the CPU has no stream to pass
  }
  static inline const tsr_quant_kernels table = {sizeof(tsr_quant_kernels), "cpu", matmul};
  static inline const tsr_quant_kernels other = {sizeof(tsr_quant_kernels), "cpu", matmul};
};

TEST(CpuQuantKernels, RunAsTheBackendsMatmulAlsoInGraphs) {
  auto be = Backend::create(cpu_plugin(), 0, 1);
  EXPECT_FALSE(be->supports(TSR_OP_MATMUL, TSR_DTYPE_PLUGIN));
  be->register_kernels(TSR_DTYPE_PLUGIN, CountingKernels::table, nullptr);
  be->register_kernels(TSR_DTYPE_PLUGIN, CountingKernels::table, nullptr);  // the same again: a no-op
  EXPECT_TRUE(be->supports(TSR_OP_MATMUL, TSR_DTYPE_PLUGIN));
  EXPECT_THROW(be->register_kernels(TSR_DTYPE_PLUGIN, CountingKernels::other, nullptr), Error);
  EXPECT_THROW(be->register_kernels(TSR_DTYPE_Q8_0, CountingKernels::other, nullptr), Error);

  const std::vector<float> x = {1, 2, 3, 4}, w = {1, 0, 0, 0, 0, 1, 1, 1};  // x [1, 4], w [2, 4]
  const DevTensor dx = upload(x, TSR_DTYPE_F32, {1, 4}, 0, *be);
  DevTensor dw = upload(w, TSR_DTYPE_F32, {2, 4}, 0, *be);
  dw.t.dtype = TSR_DTYPE_PLUGIN;
  const DevTensor out = make_tensor(TSR_DTYPE_F32, {1, 2}, nullptr, 0, *be);
  CountingKernels::calls = 0;
  be->matmul({sizeof(tsr_matmul_params), out.get(), dx.get(), dw.get()});
  EXPECT_EQ(CountingKernels::calls, 1);
  EXPECT_EQ(out.floats(), (std::vector<float>{1, 9}));

  // Recorded, not run; each launch runs the kernel again on what the inputs hold then.
  be->graph_begin();
  be->matmul({sizeof(tsr_matmul_params), out.get(), dx.get(), dw.get()});
  auto graph = be->graph_end();
  EXPECT_EQ(CountingKernels::calls, 1);
  const std::vector<float> x2 = {0, 0, 0, 2};
  be->write(*dx.buf, 0, x2.data(), x2.size() * sizeof(float));
  be->graph_launch(*graph);
  EXPECT_EQ(CountingKernels::calls, 2);
  EXPECT_EQ(out.floats(), (std::vector<float>{0, 2}));
}

// ---- thread counts: the same bits with 1 and 2 threads ----

// Sizes above the kernels' thresholds for waking the thread pool.
TEST(CpuThreads, OneAndTwoThreadsAgree) {
  Backend& one = backend(1);
  Backend& two = backend(2);
  {  // matmul: streaming (Q8_0) and oneDNN (F32 with 64 rows)
    const int64_t k = 256, m = 129;
    for (const tsr_dtype dtype : {TSR_DTYPE_Q8_0, TSR_DTYPE_F32}) {
      const int64_t n = dtype == TSR_DTYPE_F32 ? 64 : 3;
      const std::vector<float> x = random_floats(static_cast<size_t>(n * k), 130);
      const Weights w = encode(dtype, random_floats(static_cast<size_t>(m * k), 131));
      std::vector<float> results[2];
      for (Backend* be : {&one, &two}) {
        const DevTensor dx = upload(x, TSR_DTYPE_F32, {n, k}, 0, *be);
        const DevTensor dw = upload(w.bytes, dtype, {m, k}, 0, *be);
        const DevTensor out = make_tensor(TSR_DTYPE_F32, {n, m}, nullptr, 0, *be);
        be->matmul(matmul_params(out, dx, dw));
        results[be == &two] = out.floats();
      }
      EXPECT_EQ(results[0], results[1]) << dtype_name(dtype);
    }
  }
  {  // rms_norm over 64 x 1024
    const int64_t n = 64, d = 1024;
    const std::vector<float> x = random_floats(static_cast<size_t>(n * d), 132);
    const std::vector<float> w = random_floats(static_cast<size_t>(d), 133);
    std::vector<float> results[2];
    for (Backend* be : {&one, &two}) {
      const DevTensor dx = upload(x, TSR_DTYPE_F32, {n, d}, 0, *be);
      const DevTensor dw = upload(w, TSR_DTYPE_F32, {d}, 0, *be);
      be->rms_norm({sizeof(tsr_rms_norm_params), dx.get(), dx.get(), dw.get(), 1e-6f, 0});
      results[be == &two] = dx.floats();
    }
    EXPECT_EQ(results[0], results[1]);
  }
  {  // attention over the mixed batch
    const Batch b = mixed_batch();
    const std::vector<float> q =
        random_floats(static_cast<size_t>(b.rows() * kHeads * 16), 134);
    std::vector<float> results[2];
    for (Backend* be : {&one, &two}) {
      const PagedCache c = make_paged_cache(4, 16, 135, *be);
      results[be == &two] = run_attention(c, b, q, *be);
    }
    EXPECT_EQ(results[0], results[1]);
  }
}

}  // namespace
// ---- TESSERA_CPU_MAX_ISA ----

TEST(CpuIsa, CapNamesItsLevelsAndRefusesOthers) {
  using tsr::sdk::CpuIsa;
  namespace d = tsr::sdk::cpu_isa_detail;
  EXPECT_EQ(d::parse(nullptr).level, CpuIsa::avx512_vnni);
  EXPECT_EQ(d::parse("").level, CpuIsa::avx512_vnni);
  for (const CpuIsa level : {CpuIsa::baseline, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512_vnni}) {
    const auto cap = d::parse(tsr::sdk::cpu_isa_name(level));
    EXPECT_EQ(cap.level, level);
    EXPECT_TRUE(cap.error.empty());
  }
  const auto bad = d::parse("AVX2");
  EXPECT_EQ(bad.level, CpuIsa::baseline);
  EXPECT_NE(bad.error.find("TESSERA_CPU_MAX_ISA: unknown value 'AVX2' (baseline, avx2, avx512 or avx512_vnni)"),
            std::string::npos) << bad.error;
}

// The device name says which kernels run.
TEST(CpuIsa, DeviceNameSaysTheKernelLevel) {
  if (!tsr::sdk::cpu_isa_cap_error().empty()) GTEST_SKIP() << "TESSERA_CPU_MAX_ISA names no level";
  const std::string level = std::string("[") + tsr::sdk::cpu_isa_name(tsr::sdk::cpu_isa()) + "]";
  EXPECT_NE(std::string(backend().props().name).find(level), std::string::npos) << backend().props().name;
}

// With a TESSERA_CPU_MAX_ISA that names no level (ctest's backend_cpu_test.isa_refusal
// sets one) the backend refuses to start, naming the variable.
TEST(CpuIsa, BackendRefusesAnUnknownCap) {
  if (tsr::sdk::cpu_isa_cap_error().empty()) GTEST_SKIP() << "TESSERA_CPU_MAX_ISA names a level";
  try {
    (void)Backend::create(cpu_plugin(), 0, 1);
    ADD_FAILURE() << "the backend started";
  } catch (const tsr::Error& e) {
    EXPECT_NE(std::string(e.what()).find("TESSERA_CPU_MAX_ISA: unknown value"), std::string::npos) << e.what();
  }
}

}  // namespace tsr
