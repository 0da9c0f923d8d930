// The quant plugins through the host's loader: round trips within each format's
// error bound, Q8_0/Q4_0 bytes equal to the GGUF reference, the reference dot product, the
// CPU kernels against the reference on odd shapes and strides, kernels offered only where
// they exist, and bad arguments refused with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/error.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/plugin_host/tensor.h"
#include "core/quant/quant.h"
#include "core/quant/quant_scheme.h"

namespace tsr {
namespace {

std::vector<float> gaussian(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

QuantScheme scheme(const std::string& name) {
  return QuantScheme(Plugin::find(TSR_PLUGIN_QUANT, name, {TESSERA_PLUGIN_DIR}));
}

struct Case {
  const char* name;
  tsr_dtype dtype;
  double max_rel_error;  // of |x - deq(q(x))| against the row's largest magnitude
  bool cpu_kernels;
};

class QuantPlugins : public ::testing::TestWithParam<Case> {};

TEST_P(QuantPlugins, RoundTripWithinTheFormatsBound) {
  const QuantScheme q = scheme(GetParam().name);
  EXPECT_EQ(q.name(), GetParam().name);
  EXPECT_EQ(q.dtype(), GetParam().dtype);
  const int64_t rows = 3, cols = 256;
  const std::vector<float> x = gaussian(rows * cols, 7);
  std::vector<uint8_t> packed(rows * q.row_bytes(cols));
  std::vector<float> y(x.size());
  q.quantize(x.data(), rows, cols, packed.data());
  q.dequantize(packed.data(), rows, cols, y.data());
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0;
    for (int64_t j = 0; j < cols; ++j) amax = std::max(amax, std::fabs(x[r * cols + j]));
    for (int64_t j = 0; j < cols; ++j) {
      EXPECT_LE(std::fabs(x[r * cols + j] - y[r * cols + j]), GetParam().max_rel_error * amax) << r << "," << j;
    }
  }
}

TEST_P(QuantPlugins, CpuKernelsMatchTheReference) {
  const QuantScheme q = scheme(GetParam().name);
  EXPECT_EQ(q.kernels("cuda", false), nullptr);
  const tsr_quant_kernels* k = q.kernels("cpu", true);
  if (!GetParam().cpu_kernels) {
    EXPECT_EQ(k, nullptr);  // the CPU backend runs this dtype itself
    return;
  }
  ASSERT_NE(k, nullptr);
  const int64_t n = 96, kdim = 384;
  const std::vector<float> w = gaussian(n * kdim, 1);
  const int64_t row_bytes = q.row_bytes(kdim) + 8;  // rows further apart than they need
  std::vector<uint8_t> packed(n * row_bytes);
  for (int64_t j = 0; j < n; ++j) q.quantize(w.data() + j * kdim, 1, kdim, packed.data() + j * row_bytes);
  std::vector<float> deq(n * kdim);
  for (int64_t j = 0; j < n; ++j) q.dequantize(packed.data() + j * row_bytes, 1, kdim, deq.data() + j * kdim);
  for (int64_t m : {1, 5, 33}) {
    const int64_t x_stride = kdim + 3, y_stride = n + 5;
    const std::vector<float> x = gaussian(m * x_stride, 2 + m);
    std::vector<float> y(m * y_stride, -1.0f);
    // The operands as the CPU backend passes them: tensors over rows further apart than
    // they need.
    tsr_tensor tx = tensor_make(TSR_DTYPE_F32, const_cast<float*>(x.data()), {m, kdim});
    tsr_tensor tw = tensor_make(TSR_DTYPE_I8, packed.data(), {n, kdim});  // then the scheme's tag
    tw.dtype = q.dtype();
    tsr_tensor ty = tensor_make(TSR_DTYPE_F32, y.data(), {m, n});
    tx.strides[0] = x_stride * 4;
    tw.strides[0] = row_bytes;
    ty.strides[0] = y_stride * 4;
    const tsr_matmul_params p{sizeof(p), &ty, &tx, &tw};
    const tsr_quant_matmul_args args{sizeof(args), k, &p, nullptr, 2, 0};
    tsr_error* e = nullptr;
    ASSERT_EQ(k->matmul(&args, &e), TSR_STATUS_OK);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0;
        for (int64_t c = 0; c < kdim; ++c) ref += double(x[i * x_stride + c]) * deq[j * kdim + c];
        EXPECT_NEAR(y[i * y_stride + j], ref, 1e-4 * (1 + std::fabs(ref))) << m << ": " << i << "," << j;
      }
      EXPECT_EQ(y[i * y_stride + n], -1.0f);  // the stride's padding is left alone
    }
  }
}

TEST_P(QuantPlugins, BadShapesAreRefusedNamingTheBlock) {
  const QuantScheme q = scheme(GetParam().name);
  if (q.block_elems() == 1) GTEST_SKIP() << "every row length fits";
  std::vector<float> x(q.block_elems() + 1);
  std::vector<uint8_t> out(1024);
  try {
    q.quantize(x.data(), 1, q.block_elems() + 1, out.data());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(q.block_elems())), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, QuantPlugins,
    ::testing::Values(Case{"q8_0", TSR_DTYPE_Q8_0, 0.5 / 127 + 1e-3, false},
                      Case{"q4_0", TSR_DTYPE_Q4_0, 1.0 / 8 + 1e-3, false},
                      Case{"int4_g128", TSR_DTYPE_INT4_G128, 2.0 / 15 * 0.51 + 1e-3, true},
                      Case{"fp8_e4m3", TSR_DTYPE_FP8_E4M3, 1.0 / 16 + 1e-3, true}),
    [](const auto& info) { return std::string(info.param.name); });

// y [m, n] = x [m, kdim] times the n packed rows of the scheme (contiguous), through `k`.
std::vector<float> dense_matmul(const QuantScheme& q, const tsr_quant_kernels& k, const std::vector<float>& x, int64_t m,
                                int64_t kdim, std::vector<uint8_t>& packed, int64_t n) {
  std::vector<float> y(m * n);
  tsr_tensor tx = tensor_make(TSR_DTYPE_F32, const_cast<float*>(x.data()), {m, kdim});
  tsr_tensor tw = tensor_make(TSR_DTYPE_I8, packed.data(), {n, kdim});
  tw.dtype = q.dtype();
  tw.strides[0] = q.row_bytes(kdim);
  tsr_tensor ty = tensor_make(TSR_DTYPE_F32, y.data(), {m, n});
  const tsr_matmul_params p{sizeof(p), &ty, &tx, &tw};
  const tsr_quant_matmul_args args{sizeof(args), &k, &p, nullptr, 2, 0};
  tsr_error* e = nullptr;
  EXPECT_EQ(k.matmul(&args, &e), TSR_STATUS_OK);
  return y;
}

// w8a8_smooth's kernel (SmoothQuant's W8A8) and llm_int8's without outliers are int8 × int8
// with one absmax scale per activation row and per weight row: exactly, up to the f32
// sums, the product of the two int8 matrices. (The conformance kit's f32 reference allows
// 1e-2 of the block rounding llama.cpp's kernels do; a per-token scale over rows with
// outliers rounds coarser, which is what SmoothQuant's smoothing is for.)
TEST(QuantPluginsW8A8, KernelMultipliesPerTokenInt8ActivationsByInt8Rows) {
  for (const char* name : {"w8a8_smooth", "llm_int8"}) {
    const QuantScheme q = scheme(name);
    if (std::string(name) == "llm_int8") q.set_option("outlier_threshold", INFINITY);
    const tsr_quant_kernels* k = q.kernels("cpu", true);
    ASSERT_NE(k, nullptr) << name;
    const int64_t n = 24, kdim = 384, m = 5;
    const std::vector<float> w = gaussian(n * kdim, 3), x = gaussian(m * kdim, 4);
    std::vector<uint8_t> packed(n * q.row_bytes(kdim));
    q.quantize(w.data(), n, kdim, packed.data());
    const std::vector<float> y = dense_matmul(q, *k, x, m, kdim, packed, n);
    for (int64_t i = 0; i < m; ++i) {
      float amax = 0;
      for (int64_t c = 0; c < kdim; ++c) amax = std::max(amax, std::fabs(x[i * kdim + c]));
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t* row = packed.data() + j * q.row_bytes(kdim);
        float w_scale;
        std::memcpy(&w_scale, row, 4);
        int64_t acc = 0;
        for (int64_t c = 0; c < kdim; ++c) {
          const auto qx = static_cast<int64_t>(std::clamp(std::nearbyint(x[i * kdim + c] * (127.0f / amax)), -127.0f, 127.0f));
          acc += qx * static_cast<int8_t>(row[16 + c]);  // past the 16-byte header
        }
        const double ref = double(acc) * (amax / 127.0f) * w_scale;
        EXPECT_NEAR(y[i * n + j], ref, 1e-5 * (1 + std::fabs(ref))) << name << " " << i << "," << j;
      }
    }
  }
}

// llm_int8 given an importance matrix (ABI 2.10 quantize_weighted): the columns whose
// calibrated mean x² reaches (threshold / 2)² keep their weights in f32 (exactly, and out of
// the row's int8 scale), and the kernel multiplies them in f32 whatever the activations. A
// weight stack whose halves were quantized with different importances (as a MoE layer's
// experts are) computes each row with its own kept columns. The reference is the
// decomposition written out: int8 × int8 over the unmarked dimensions (activation scale
// over them), f32 over the row's kept columns, decoded int8 over the other marked ones.
TEST(QuantPluginsLlmInt8, ImportantColumnsKeepTheirWeightsInF32) {
  const QuantScheme q = scheme("llm_int8");
  q.set_option("outlier_threshold", 6.0);
  const tsr_quant_kernels* k = q.kernels("cpu", true);
  ASSERT_NE(k, nullptr);
  const int64_t n = 24, kdim = 384, m = 5, half = n / 2;
  const std::vector<int64_t> outlier_dims{3, 100, 200};
  std::vector<float> w = gaussian(n * kdim, 5), x = gaussian(m * kdim, 6);
  std::vector<float> importance_a(kdim, 1.0f), importance_b(kdim, 1.0f);
  for (const int64_t c : outlier_dims) {
    for (int64_t j = 0; j < n; ++j) w[j * kdim + c] /= 20.0f;  // small columns, as under a gained norm
    for (int64_t i = 0; i < m; ++i) x[i * kdim + c] *= 20.0f;
    importance_a[c] = 400.0f;
  }
  importance_b[50] = 9.0f;  // (6 / 2)²: just kept
  importance_b[51] = 8.9f;  // just not
  const int64_t rb = q.row_bytes(kdim);
  std::vector<uint8_t> packed(n * rb);
  q.quantize(w.data(), half, kdim, packed.data(), importance_a.data());
  q.quantize(w.data() + half * kdim, half, kdim, packed.data() + half * rb, importance_b.data());
  std::vector<float> deq(n * kdim);
  q.dequantize(packed.data(), n, kdim, deq.data());
  auto kept = [&](int64_t j, int64_t c) {
    return j < half ? std::find(outlier_dims.begin(), outlier_dims.end(), c) != outlier_dims.end() : c == 50;
  };
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < kdim; ++c) {
      if (kept(j, c)) EXPECT_EQ(deq[j * kdim + c], w[j * kdim + c]) << j << "," << c;
    }
  }
  const std::vector<float> y = dense_matmul(q, *k, x, m, kdim, packed, n);
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = &x[i * kdim];
    auto marked = [&](int64_t c) { return kept(0, c) || std::fabs(xi[c]) >= 6.0f; };
    float amax = 0;
    for (int64_t c = 0; c < kdim; ++c) amax = marked(c) ? amax : std::max(amax, std::fabs(xi[c]));
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* row = packed.data() + j * rb;
      float w_scale;
      std::memcpy(&w_scale, row, 4);
      int64_t acc = 0;
      double f32 = 0;
      for (int64_t c = 0; c < kdim; ++c) {
        const auto qw = static_cast<int8_t>(row[16 + c]);
        if (kept(j, c)) {
          f32 += double(xi[c]) * w[j * kdim + c];
        } else if (marked(c)) {
          f32 += double(xi[c]) * (float(qw) * w_scale);
        } else {
          acc += static_cast<int64_t>(std::clamp(std::nearbyint(xi[c] * (127.0f / amax)), -127.0f, 127.0f)) * qw;
        }
      }
      const double ref = double(acc) * (amax / 127.0f) * w_scale + f32;
      EXPECT_NEAR(y[i * n + j], ref, 1e-5 * (1 + std::fabs(ref))) << i << "," << j;
    }
  }
}

// An importance matrix goes to schemes that use one: q8_0 (the backend's own type, no
// quantize_weighted) is refused, naming the key.
TEST(QuantPluginsLlmInt8, SchemesWithoutImportanceRefuseAnImportanceMatrix) {
  QuantScheme q = scheme("q8_0");
  try {
    q.set_importance({{"blk.0.attn_q.weight", std::vector<float>(64, 1.0f)}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[quant] imatrix: quant scheme 'q8_0' uses no importance matrix");
  }
}

TEST(QuantPluginsGguf, Q8_0AndQ4_0AreTheGgufBlocks) {
  const std::vector<float> x = gaussian(4 * 64, 3);
  for (auto [name, type] : {std::pair{"q8_0", GgmlType::Q8_0}, std::pair{"q4_0", GgmlType::Q4_0}}) {
    const QuantScheme q = scheme(name);
    std::vector<uint8_t> packed(4 * q.row_bytes(64));
    q.quantize(x.data(), 4, 64, packed.data());
    EXPECT_EQ(packed, quant::quantize(type, x)) << name;
  }
}

}  // namespace
}  // namespace tsr
