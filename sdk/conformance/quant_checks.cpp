// Quant checks: the scheme's table, its conversions and its kernels, on random rows
// (Gaussian values with a few outliers, as real weights have).
//
// The kit does not know the format, so it derives the round-trip bound from the format's
// size: b = floor(8 * row_bytes(N) / N) bits per element for a long row (N >= 4096, so
// that block and row headers add under a bit), and each row x must satisfy
//   max|x - deq(q(x))| <= 2^(1 - b/2) * max|x|  and  rms(x - deq(q(x))) <= 2^(-b/2) * rms(x).
// At 8 bits that is 1/8 and 1/16 (FP8 E4M3's three mantissa bits need about that), at 4
// bits 1/2 and 1/4: loose for integer formats, yet a wrong scale, sign, element order or
// nibble order breaks it. Tighter properties are exact: zeros stay zero, quantizing is
// deterministic and row by row, requantizing a dequantized row changes nothing.
//
// Kernels are compared with the plugin's own dequantization, in double: the normalized
// error max|y - ref| / max(1, max|ref|) must stay below 1e-2, because a kernel may round
// activations (to int8, as llama.cpp's do). The `dot` entry is the reference itself and
// must match to 1e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "abi_host/quant_1x.h"
#include "conformance.h"
#include "tessera/quant.h"

namespace tsr::conformance {
namespace {

// Backends whose kernels the kit looks for; it runs only the host-memory ones ("cpu").
constexpr const char* kBackends[] = {"cpu", "cuda", "hip"};

const tsr_quant_iface& table() { return *static_cast<const tsr_quant_iface*>(plugin().desc->iface); }
int64_t block() { return table().block_elems; }
int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// Row lengths to convert: one block, a few, and a longer row that is not a power of two.
std::vector<int64_t> lengths() {
  const std::set<int64_t> set = {block(), 3 * block(), round_up(257, block())};
  return {set.begin(), set.end()};
}

// Bits per element of a long row (see the top of this file).
int bits() {
  const int64_t n = round_up(4096, block());
  return static_cast<int>(8 * table().row_bytes(n) / n);
}

std::vector<float> weights(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  for (size_t i = 0; i < v.size(); i += 53) v[i] *= 8;  // outliers
  return v;
}

// Fails the test (through the exception gtest reports) unless the call succeeded, and
// succeeded without leaving an error object. `error` is a reference: it is read after the
// call that sets it, whatever the order the arguments were evaluated in.
void ok(const char* entry, tsr_status status, tsr_error* const& error) {
  if (status != TSR_STATUS_OK) throw std::runtime_error(std::string(entry) + " failed: " + take_error(error));
  if (error != nullptr) throw std::runtime_error(std::string(entry) + " stored an error object on success");
}

std::vector<uint8_t> quantize(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<uint8_t> q(static_cast<size_t>(rows * table().row_bytes(cols)));
  tsr_error* e = nullptr;
  ok("quantize", table().quantize(x.data(), rows, cols, q.data(), &e), e);
  return q;
}

std::vector<float> dequantize(const uint8_t* q, int64_t rows, int64_t cols) {
  std::vector<float> y(static_cast<size_t>(rows * cols));
  tsr_error* e = nullptr;
  ok("dequantize", table().dequantize(q, rows, cols, y.data(), &e), e);
  return y;
}

float max_abs(const float* x, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

double rms(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return std::sqrt(s / double(n));
}

// ---- the table ----

TEST(QuantTable, SchemeIsThePluginsName) { EXPECT_STREQ(table().scheme, plugin().desc->name); }

TEST(QuantTable, DtypeIsOneAbiHDefines) {
  const tsr_dtype d = table().dtype;
  EXPECT_TRUE((d >= TSR_DTYPE_F32 && d < TSR_DTYPE_COUNT_ && d != TSR_DTYPE_I32 && d != TSR_DTYPE_I64) ||
              d == TSR_DTYPE_PLUGIN)
      << "dtype " << d << ": a scheme with a format of its own tags it TSR_DTYPE_PLUGIN";
}

TEST(QuantTable, PluginFormatsBringKernels) {
  if (table().dtype != TSR_DTYPE_PLUGIN) GTEST_SKIP() << "backends may support dtype " << table().dtype;
  bool any = false;
  for (const char* b : kBackends) any = any || table().kernels(b) != nullptr;
  EXPECT_TRUE(any) << "no backend supports TSR_DTYPE_PLUGIN: without kernels, no host can run this scheme";
}

TEST(QuantTable, RowBytesForWholeBlocksOnly) {
  ASSERT_GT(block(), 0);
  int64_t previous = 0;
  for (int64_t blocks : {1, 2, 3, 5, 8, 64}) {
    const int64_t bytes = table().row_bytes(blocks * block());
    EXPECT_GT(bytes, previous) << blocks << " blocks: longer rows take more bytes";
    previous = bytes;
  }
  for (int64_t n : {int64_t(0), -block(), block() + 1, 3 * block() - 1}) {
    if (n > 0 && n % block() == 0) continue;  // block 1: every positive length fits
    EXPECT_EQ(table().row_bytes(n), 0) << "rows of " << n << " elements";
  }
}

// ---- conversions ----

TEST(QuantRoundTrip, WithinTheBoundOfTheFormatsBits) {
  const int b = bits();
  const double max_bound = std::exp2(1 - b / 2.0), rms_bound = std::exp2(-b / 2.0);
  std::printf("scheme %s: %d bits per element; round trip bounds %.4g * max|x|, %.4g * rms(x)\n", table().scheme,
              b, max_bound, rms_bound);
  for (const int64_t cols : lengths()) {
    const int64_t rows = 4;
    const std::vector<float> x = weights(rows * cols, uint32_t(cols));
    const std::vector<float> y = dequantize(quantize(x, rows, cols).data(), rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> err(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) err[j] = x[r * cols + j] - y[r * cols + j];
      EXPECT_LE(max_abs(err.data(), cols), max_bound * max_abs(&x[r * cols], cols)) << cols << " cols, row " << r;
      EXPECT_LE(rms(err.data(), cols), rms_bound * rms(&x[r * cols], cols)) << cols << " cols, row " << r;
    }
  }
}

TEST(QuantRoundTrip, ZerosStayZero) {
  for (const int64_t cols : lengths()) {
    const std::vector<float> zeros(static_cast<size_t>(cols), 0.0f);
    for (const float v : dequantize(quantize(zeros, 1, cols).data(), 1, cols)) ASSERT_EQ(v, 0.0f) << cols;
  }
}

TEST(QuantRoundTrip, DeterministicAndRowByRow) {
  for (const int64_t cols : lengths()) {
    const int64_t rows = 5, bytes = table().row_bytes(cols);
    const std::vector<float> x = weights(rows * cols, 99);
    const std::vector<uint8_t> all = quantize(x, rows, cols);
    EXPECT_EQ(quantize(x, rows, cols), all) << cols << ": quantizing twice gave different bytes";
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> row(x.begin() + r * cols, x.begin() + (r + 1) * cols);
      const std::vector<uint8_t> one = quantize(row, 1, cols);
      EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + r * bytes))
          << cols << ": row " << r << " differs when quantized alone";
      const std::vector<float> y = dequantize(all.data() + r * bytes, 1, cols);
      const std::vector<float> y_all = dequantize(all.data(), rows, cols);
      EXPECT_TRUE(std::equal(y.begin(), y.end(), y_all.begin() + r * cols))
          << cols << ": row " << r << " differs when dequantized alone";
    }
  }
}

// deq(q(deq(q(x)))) == deq(q(x)): the values a scheme stands for are its own fixed points.
TEST(QuantRoundTrip, RequantizingChangesNothing) {
  for (const int64_t cols : lengths()) {
    const int64_t rows = 4;
    const std::vector<float> once = dequantize(quantize(weights(rows * cols, 5), rows, cols).data(), rows, cols);
    const std::vector<float> twice = dequantize(quantize(once, rows, cols).data(), rows, cols);
    for (int64_t i = 0; i < rows * cols; ++i) {
      ASSERT_NEAR(twice[i], once[i], 1e-6 * std::fabs(once[i])) << cols << " cols, element " << i;
    }
  }
}

// ABI 2.10 quantize_weighted, where the plugin has it (else NULL, or a table built before
// 2.10). Importances the kit makes up (positive, a few columns far above the rest, as
// calibrated outlier features are).
using WeightedEntry = decltype(tsr_quant_iface::quantize_weighted);
WeightedEntry weighted_entry() {
  return TSR_STRUCT_HAS(&table(), tsr_quant_iface, quantize_weighted) ? table().quantize_weighted : nullptr;
}

std::vector<float> importances(int64_t cols) {
  std::vector<float> v = weights(cols, 77);
  for (float& x : v) x = x * x;
  for (int64_t c = 0; c < cols; c += 37) v[size_t(c)] = 400.0f;
  return v;
}

std::vector<uint8_t> quantize_weighted(const std::vector<float>& x, int64_t rows, int64_t cols,
                                       const std::vector<float>& importance) {
  std::vector<uint8_t> q(static_cast<size_t>(rows * table().row_bytes(cols)));
  tsr_error* e = nullptr;
  ok("quantize_weighted", weighted_entry()(x.data(), rows, cols, importance.data(), q.data(), &e), e);
  return q;
}

// An importance may choose how rows are stored, not make them worse than the format's bits,
// nor make rows depend on each other or on the call.
TEST(QuantRoundTrip, WeightedWithinTheBoundAndRowByRow) {
  if (weighted_entry() == nullptr) GTEST_SKIP() << "no quantize_weighted (ABI 2.10): the scheme uses no importance";
  const double max_bound = std::exp2(1 - bits() / 2.0), rms_bound = std::exp2(-bits() / 2.0);
  for (const int64_t cols : lengths()) {
    const int64_t rows = 4, bytes = table().row_bytes(cols);
    const std::vector<float> x = weights(rows * cols, uint32_t(cols) + 1), importance = importances(cols);
    const std::vector<uint8_t> all = quantize_weighted(x, rows, cols, importance);
    EXPECT_EQ(quantize_weighted(x, rows, cols, importance), all) << cols << ": quantizing twice gave different bytes";
    const std::vector<float> y = dequantize(all.data(), rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> err(static_cast<size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) err[j] = x[r * cols + j] - y[r * cols + j];
      EXPECT_LE(max_abs(err.data(), cols), max_bound * max_abs(&x[r * cols], cols)) << cols << " cols, row " << r;
      EXPECT_LE(rms(err.data(), cols), rms_bound * rms(&x[r * cols], cols)) << cols << " cols, row " << r;
      const std::vector<float> row(x.begin() + r * cols, x.begin() + (r + 1) * cols);
      const std::vector<uint8_t> one = quantize_weighted(row, 1, cols, importance);
      EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + r * bytes))
          << cols << ": row " << r << " differs when quantized alone";
    }
  }
}

TEST(QuantRoundTrip, ConcurrentCallsAgree) {
  const int64_t rows = 8, cols = lengths().back();
  const std::vector<float> x = weights(rows * cols, 11);
  const std::vector<uint8_t> expected = quantize(x, rows, cols);
  std::vector<std::vector<uint8_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& g : got) threads.emplace_back([&] { g = quantize(x, rows, cols); });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, expected);
}

TEST(QuantDot, EqualsTheDequantizedRowsDotProduct) {
  for (const int64_t cols : lengths()) {
    const std::vector<uint8_t> q = quantize(weights(cols, 21), 1, cols);
    const std::vector<float> w = dequantize(q.data(), 1, cols), x = weights(cols, 22);
    double ref = 0, scale = 0;
    for (int64_t j = 0; j < cols; ++j) {
      ref += double(w[j]) * x[j];
      scale += std::fabs(double(w[j]) * x[j]);
    }
    float got = 0;
    tsr_error* e = nullptr;
    ok("dot", table().dot(q.data(), x.data(), cols, &got, &e), e);
    EXPECT_NEAR(got, ref, 1e-5 * scale + 1e-6) << cols << " elements";
  }
}

// ---- kernels ----

TEST(QuantKernels, OfferedPerBackendByName) {
  EXPECT_EQ(table().kernels("no-such-backend"), nullptr);
  EXPECT_EQ(table().kernels(nullptr), nullptr);
  for (const char* b : kBackends) {
    const tsr_quant_kernels* k = table().kernels(b);
    if (k == nullptr) continue;
    EXPECT_GE(k->struct_size, sizeof(tsr_quant_kernels)) << b;
    EXPECT_STREQ(k->backend, b);
    EXPECT_NE(k->matmul, nullptr) << b;
  }
}

// The plugin's CPU kernels as a 2.x host calls them: its own, or for a plugin built for
// 1.x the host adapter's over them (abi_host/quant_1x.h). NULL when it has none.
const tsr_quant_kernels* cpu_kernels() {
  const tsr_quant_kernels* k = table().kernels("cpu");
  if (k == nullptr || k->matmul == nullptr) return nullptr;
  if (plugin().desc->abi_major == TSR_ABI_MAJOR) return k;
  static const abi::QuantKernels1x adapter(k, host_api());
  return adapter.kernels();
}

// A 2-d tensor over host rows `stride` bytes apart.
tsr_tensor host_matrix(tsr_dtype dtype, const void* data, int64_t rows, int64_t cols, int64_t stride, int64_t elem) {
  tsr_tensor t{};
  t.struct_size = sizeof(t);
  t.dtype = dtype;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.strides[0] = stride;
  t.strides[1] = elem;
  t.data = const_cast<void*>(data);
  return t;
}

// y[i, j] = sum_k x[i, k] * W[j, k] on `kern`, with the operands as the backend passes them.
tsr_status call_matmul(const tsr_quant_kernels& kern, const float* x, int64_t x_stride, int64_t m, int64_t k,
                       const void* w, int64_t w_row_bytes, int64_t n, float* y, int64_t y_stride, int32_t threads,
                       tsr_error** e) {
  const tsr_tensor tx = host_matrix(TSR_DTYPE_F32, x, m, k, x_stride * 4, 4);
  const tsr_tensor tw = host_matrix(table().dtype, w, n, k, w_row_bytes, 1);
  const tsr_tensor ty = host_matrix(TSR_DTYPE_F32, y, m, n, y_stride * 4, 4);
  const tsr_matmul_params p{sizeof(p), &ty, &tx, &tw};
  const tsr_quant_matmul_args args{sizeof(args), &kern, &p, nullptr, threads, 0};
  return kern.matmul(&args, e);
}

struct MatmulCase {
  int64_t m, n, k;
  int64_t x_pad, y_pad, w_pad;  // row strides beyond the rows: floats, floats, bytes
};

// W as the host lays it out (rows w_row_bytes apart, garbage in the gaps), and the same
// weights dequantized.
struct Weights {
  std::vector<uint8_t> packed;
  std::vector<float> values;
  int64_t row_bytes;
};

Weights packed_weights(const MatmulCase& c) {
  Weights w{{}, {}, table().row_bytes(c.k) + c.w_pad};
  w.packed.assign(static_cast<size_t>(c.n * w.row_bytes), 0xA5);
  const std::vector<uint8_t> q = quantize(weights(c.n * c.k, uint32_t(c.n + c.k)), c.n, c.k);
  for (int64_t j = 0; j < c.n; ++j) {
    std::memcpy(&w.packed[j * w.row_bytes], &q[j * table().row_bytes(c.k)], table().row_bytes(c.k));
  }
  w.values = dequantize(q.data(), c.n, c.k);
  return w;
}

void check_matmul(const tsr_quant_kernels& kern, const MatmulCase& c, int32_t threads) {
  const Weights w = packed_weights(c);
  const int64_t x_stride = c.k + c.x_pad, y_stride = c.n + c.y_pad;
  // NaN in the activations' padding: a kernel that reads past k poisons its output.
  // m = 0 still passes buffers: only NULL ones are refused.
  std::vector<float> x(static_cast<size_t>(std::max<int64_t>(1, c.m * x_stride)),
                       std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> values = weights(c.m * c.k, uint32_t(c.m));
  for (int64_t i = 0; i < c.m; ++i) std::copy_n(&values[i * c.k], c.k, &x[i * x_stride]);
  constexpr float kUntouched = -12345.0f;
  std::vector<float> y(static_cast<size_t>((c.m + 1) * y_stride), kUntouched);  // one row past the end
  tsr_error* e = nullptr;
  ok("matmul", call_matmul(kern, x.data(), x_stride, c.m, c.k, w.packed.data(), w.row_bytes, c.n, y.data(),
                            y_stride, threads, &e), e);
  std::vector<double> ref(static_cast<size_t>(c.m * c.n));
  double err = 0, ref_max = 1;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < c.k; ++l) s += double(x[i * x_stride + l]) * w.values[j * c.k + l];
      const float got = y[i * y_stride + j];
      err = std::isfinite(got) ? std::max(err, std::fabs(got - s)) : INFINITY;
      ref_max = std::max(ref_max, std::fabs(s));
    }
  }
  const std::string shape = "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                            " threads=" + std::to_string(threads);
  EXPECT_LE(err / ref_max, 1e-2) << shape;
  for (int64_t i = 0; i <= c.m; ++i) {
    for (int64_t j = i < c.m ? c.n : 0; j < y_stride; ++j) {
      ASSERT_EQ(y[i * y_stride + j], kUntouched) << shape << ": wrote y[" << i << ", " << j << "] outside the output";
    }
  }
}

TEST(QuantKernels, CpuMatmulMatchesTheReference) {
  const tsr_quant_kernels* k = cpu_kernels();
  if (k == nullptr) GTEST_SKIP() << "no CPU kernels: the CPU backend must support dtype " << table().dtype;
  const int64_t b = block(), long_k = round_up(384, b);
  const MatmulCase cases[] = {
      {1, 1, b, 0, 0, 0},       {1, 7, 3 * b, 3, 5, 8},  {3, 17, 5 * b, 1, 2, 0},
      {5, 64, long_k, 3, 5, 8}, {33, 9, 2 * b, 0, 1, 8}, {0, 4, b, 1, 1, 0},
  };
  for (const MatmulCase& c : cases) {
    for (const int32_t threads : {1, 4}) check_matmul(*k, c, threads);
  }
}

// ---- errors ----

// The call must fail with INVALID_ARGUMENT and a message, and must not crash without an
// error pointer either. `call` takes the error pointer to pass.
template <class Call>
void expect_refused(const std::string& what, Call call) {
  tsr_error* e = nullptr;
  const tsr_status status = call(&e);
  EXPECT_EQ(status, TSR_STATUS_INVALID_ARGUMENT) << what;
  ASSERT_NE(e, nullptr) << what << ": no error object";
  const std::string message = take_error(e);
  EXPECT_GT(message.size(), std::string("3: ").size()) << what << ": empty message";
  EXPECT_NE(call(nullptr), TSR_STATUS_OK) << what << " (without an error pointer)";
}

TEST(QuantErrors, ConversionsRefuseBadShapesAndNull) {
  const int before = live_errors();
  const int64_t cols = lengths().back();
  std::vector<float> x(static_cast<size_t>(2 * cols + 1), 1.0f);
  std::vector<uint8_t> q(static_cast<size_t>(2 * table().row_bytes(cols) + 64));
  float out = 0;
  const auto& t = table();
  std::vector<int64_t> bad_cols = {0, -cols};
  if (block() > 1) bad_cols.push_back(cols + 1);
  for (const int64_t bad : bad_cols) {
    const std::string n = " cols=" + std::to_string(bad);
    expect_refused("quantize" + n, [&](tsr_error** e) { return t.quantize(x.data(), 1, bad, q.data(), e); });
    expect_refused("dequantize" + n, [&](tsr_error** e) { return t.dequantize(q.data(), 1, bad, x.data(), e); });
    expect_refused("dot" + n, [&](tsr_error** e) { return t.dot(q.data(), x.data(), bad, &out, e); });
  }
  expect_refused("quantize rows=-1", [&](tsr_error** e) { return t.quantize(x.data(), -1, cols, q.data(), e); });
  expect_refused("quantize NULL x", [&](tsr_error** e) { return t.quantize(nullptr, 1, cols, q.data(), e); });
  expect_refused("quantize NULL out", [&](tsr_error** e) { return t.quantize(x.data(), 1, cols, nullptr, e); });
  expect_refused("dequantize NULL in", [&](tsr_error** e) { return t.dequantize(nullptr, 1, cols, x.data(), e); });
  expect_refused("dequantize NULL out", [&](tsr_error** e) { return t.dequantize(q.data(), 1, cols, nullptr, e); });
  expect_refused("dot NULL row", [&](tsr_error** e) { return t.dot(nullptr, x.data(), cols, &out, e); });
  expect_refused("dot NULL x", [&](tsr_error** e) { return t.dot(q.data(), nullptr, cols, &out, e); });
  expect_refused("dot NULL out", [&](tsr_error** e) { return t.dot(q.data(), x.data(), cols, nullptr, e); });
  EXPECT_EQ(live_errors(), before) << "error objects leaked or freed twice";
}

TEST(QuantErrors, WeightedRefusesBadShapesAndNull) {
  const WeightedEntry weighted = weighted_entry();
  if (weighted == nullptr) GTEST_SKIP() << "no quantize_weighted (ABI 2.10)";
  const int before = live_errors();
  const int64_t cols = lengths().back();
  std::vector<float> x(static_cast<size_t>(cols), 1.0f), importance = importances(cols);
  std::vector<uint8_t> q(static_cast<size_t>(table().row_bytes(cols) + 64));
  for (const int64_t bad : {int64_t(0), -cols}) {
    expect_refused("quantize_weighted cols=" + std::to_string(bad),
                   [&](tsr_error** e) { return weighted(x.data(), 1, bad, importance.data(), q.data(), e); });
  }
  expect_refused("quantize_weighted NULL importance",
                 [&](tsr_error** e) { return weighted(x.data(), 1, cols, nullptr, q.data(), e); });
  expect_refused("quantize_weighted NULL x",
                 [&](tsr_error** e) { return weighted(nullptr, 1, cols, importance.data(), q.data(), e); });
  expect_refused("quantize_weighted NULL out",
                 [&](tsr_error** e) { return weighted(x.data(), 1, cols, importance.data(), nullptr, e); });
  EXPECT_EQ(live_errors(), before) << "error objects leaked or freed twice";
}

TEST(QuantErrors, CpuMatmulRefusesBadShapesAndNull) {
  const tsr_quant_kernels* kern = cpu_kernels();
  if (kern == nullptr) GTEST_SKIP() << "no CPU kernels";
  const int before = live_errors();
  const int64_t k = lengths().back(), n = 4, m = 2, rb = table().row_bytes(k);
  std::vector<float> x(static_cast<size_t>(m * k), 1.0f), y(static_cast<size_t>(m * n));
  const std::vector<uint8_t> w = quantize(weights(n * k, 3), n, k);
  const auto mm = [&](const float* xp, int64_t xs, int64_t mm_m, int64_t kk, const void* wp, int64_t wrb,
                      float* yp, int64_t ys) {
    return [=](tsr_error** e) { return call_matmul(*kern, xp, xs, mm_m, kk, wp, wrb, n, yp, ys, 1, e); };
  };
  if (block() > 1) expect_refused("k not whole blocks", mm(x.data(), k, m, k - 1, w.data(), rb, y.data(), n));
  expect_refused("k=0", mm(x.data(), k, m, 0, w.data(), rb, y.data(), n));
  expect_refused("m=-1", mm(x.data(), k, -1, k, w.data(), rb, y.data(), n));
  expect_refused("x_stride < k", mm(x.data(), k - 1, m, k, w.data(), rb, y.data(), n));
  expect_refused("y_stride < n", mm(x.data(), k, m, k, w.data(), rb, y.data(), n - 1));
  expect_refused("w_row_bytes < row_bytes(k)", mm(x.data(), k, m, k, w.data(), rb - 1, y.data(), n));
  expect_refused("NULL x", mm(nullptr, k, m, k, w.data(), rb, y.data(), n));
  expect_refused("NULL w", mm(x.data(), k, m, k, nullptr, rb, y.data(), n));
  expect_refused("NULL y", mm(x.data(), k, m, k, w.data(), rb, nullptr, n));
  EXPECT_EQ(live_errors(), before) << "error objects leaked or freed twice";
}

}  // namespace
}  // namespace tsr::conformance
