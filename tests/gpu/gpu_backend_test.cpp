// The GPU backend plugins (TESSERA_GPU_PLUGINS, e.g. "cuda,hip") through the host's loader
// and Backend wrapper.
//
// Without a device each plugin must refuse cleanly: DEVICE_ERROR and a message that names
// the missing device, no crash, nothing leaked. With a device its ops must agree with the
// CPU backend on random shapes, weight dtypes and block tables, and a model must generate
// the same greedy ids with the same logits (TESSERA_GPU_TEST_MODEL names the GGUF; default
// ../shared/models/stories260K.gguf).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "base/error.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/host_services.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/plugin_host/tensor.h"
#include "core/quant/quant.h"
#include "tessera/backend.h"

namespace tsr {
namespace {

std::vector<std::string> gpu_plugins() {
  std::vector<std::string> names;
  std::stringstream list(TESSERA_GPU_PLUGINS);
  for (std::string name; std::getline(list, name, ',');) names.push_back(name);
  return names;
}

std::shared_ptr<Plugin> load(const std::string& name) {
  return Plugin::find(TSR_PLUGIN_BACKEND, name, {TESSERA_PLUGIN_DIR});
}

// Whether the plugin sees a device; the reason when it does not.
bool has_device(const Plugin& plugin, std::string* reason = nullptr) {
  try {
    return Backend::device_count(plugin) > 0;
  } catch (const Error& e) {
    if (reason) *reason = e.what();
    return false;
  }
}

class GpuPluginTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuPluginTest, LoadsAndRefusesCleanlyWithoutDevice) {
  const auto plugin = load(GetParam());
  ASSERT_NE(plugin, nullptr);
  EXPECT_EQ(plugin->name(), GetParam());
  if (has_device(*plugin)) GTEST_SKIP() << "a device is present";
  try {
    Backend::create(plugin, 0, 0);
    FAIL() << "backend created without a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), TSR_STATUS_DEVICE_ERROR) << e.what();
    EXPECT_NE(std::string(e.what()).find("no device"), std::string::npos) << e.what();
  }
  // Every entry that needs a device refuses the same way, with an error object.
  const auto* reg = static_cast<const tsr_backend_reg_iface*>(plugin->iface());
  tsr_device_props props{};
  props.struct_size = sizeof(props);
  tsr_device_props_args props_args{sizeof(props_args), reg, 0, 0, &props};
  tsr_error* error = nullptr;
  EXPECT_EQ(reg->device_props(&props_args, &error), TSR_STATUS_DEVICE_ERROR);
  EXPECT_NE(error, nullptr);
  EXPECT_THROW(check_status(TSR_STATUS_DEVICE_ERROR, error, "device_props"), Error);  // frees it
  const tsr_backend_params params{sizeof(params), 0, 0, nullptr};
  tsr_backend_create_args create{sizeof(create), reg, &params, nullptr};
  EXPECT_EQ(reg->backend_create(&create, nullptr), TSR_STATUS_DEVICE_ERROR);
  EXPECT_EQ(create.backend, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuPluginTest, ::testing::ValuesIn(gpu_plugins()),
                         [](const auto& info) { return info.param; });

// ---- with a device: ops against the CPU backend ----

// One tensor with the same bytes on both backends.
struct Twin {
  std::unique_ptr<BackendBuffer> cpu_buf, gpu_buf;
  tsr_tensor cpu{}, gpu{};
  size_t bytes = 0;
};

class GpuOpTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const auto plugin = load(GetParam());
    std::string reason;
    if (!has_device(*plugin, &reason)) GTEST_SKIP() << "no device: " << reason;
    gpu_ = Backend::create(plugin, 0, 0);
    cpu_ = Backend::create(load("cpu"), 0, 2);
  }

  // A tensor of `dtype` and `shape` whose bytes are `data` (zeros when empty); rows padded
  // by `pad` bytes, as the engine's views of larger buffers may be.
  Twin make(tsr_dtype dtype, std::vector<int64_t> shape, const std::vector<uint8_t>& data = {},
            int64_t pad = 0) {
    Twin t;
    const int64_t row = dtype_row_bytes(dtype, shape.back());
    int64_t inner = row;
    for (size_t d = 1; d + 1 < shape.size(); ++d) inner *= shape[d];
    const int64_t rows = shape.size() == 1 ? 1 : shape[0];
    const int64_t stride = shape.size() == 1 ? inner : inner + pad;
    t.bytes = static_cast<size_t>(rows * stride);
    std::vector<uint8_t> bytes(t.bytes, 0);
    for (int64_t r = 0; r < rows && !data.empty(); ++r) {
      std::memcpy(&bytes[r * stride], &data[r * inner], static_cast<size_t>(inner));
    }
    for (auto* side : {&t.cpu, &t.gpu}) {
      Backend& b = side == &t.cpu ? *cpu_ : *gpu_;
      auto& buf = side == &t.cpu ? t.cpu_buf : t.gpu_buf;
      buf = b.alloc(t.bytes);
      b.write(*buf, 0, bytes.data(), t.bytes);
      tsr_tensor& x = *side;
      x.struct_size = sizeof(tsr_tensor);
      x.dtype = dtype;
      x.ndim = static_cast<int32_t>(shape.size());
      int64_t s = dtype == TSR_DTYPE_Q8_0 || dtype == TSR_DTYPE_Q4_0 ? 1 : dtype_block_bytes(dtype);
      x.strides[x.ndim - 1] = s;
      s = row;
      for (int d = x.ndim - 2; d >= 1; --d) x.strides[d] = s, s *= shape[d];
      if (x.ndim > 1) x.strides[0] = stride;
      std::copy(shape.begin(), shape.end(), x.shape);
      x.data = buf->base();
    }
    return t;
  }

  template <class T>
  Twin upload(tsr_dtype dtype, std::vector<int64_t> shape, const std::vector<T>& v, int64_t pad = 0) {
    std::vector<uint8_t> bytes(v.size() * sizeof(T));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return make(dtype, std::move(shape), bytes, pad);
  }

  // Both sides' f32 contents, packed rows only.
  std::pair<std::vector<float>, std::vector<float>> results(const Twin& t) {
    std::pair<std::vector<float>, std::vector<float>> out;
    for (int side = 0; side < 2; ++side) {
      Backend& b = side == 0 ? *cpu_ : *gpu_;
      std::vector<uint8_t> bytes(t.bytes);
      b.read(side == 0 ? *t.cpu_buf : *t.gpu_buf, 0, bytes.data(), bytes.size());
      b.synchronize();
      const tsr_tensor& x = side == 0 ? t.cpu : t.gpu;
      const int64_t n_rows = x.ndim == 1 ? 1 : x.shape[0];
      const int64_t per_row = tensor_rows(x) * x.shape[x.ndim - 1] / n_rows;
      const int64_t stride = x.ndim == 1 ? per_row * 4 : x.strides[0];
      auto& v = side == 0 ? out.first : out.second;
      v.resize(static_cast<size_t>(n_rows * per_row));
      for (int64_t r = 0; r < n_rows; ++r) {
        std::memcpy(&v[r * per_row], &bytes[r * stride], static_cast<size_t>(per_row) * 4);
      }
    }
    return out;
  }

  // max|gpu - cpu| / max(1, max|cpu|); infinite when the GPU wrote a non-finite value.
  double error(const Twin& t) {
    const auto [c, g] = results(t);
    double diff = 0, mag = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      if (!std::isfinite(g[i])) return INFINITY;
      diff = std::max(diff, double(std::abs(g[i] - c[i])));
      mag = std::max(mag, double(std::abs(c[i])));
    }
    return diff / std::max(1.0, mag);
  }

  std::vector<float> randoms(size_t n, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng_);
    return v;
  }

  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  std::unique_ptr<Backend> gpu_, cpu_;
  std::mt19937 rng_{1234};
};

uint16_t f32_to_f16(float f) {  // round to nearest even, normal range only
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 112;
  if ((x & 0x7fffffff) == 0 || exp <= 0) return sign;
  const uint32_t mant = x & 0x7fffff, rest = mant & 0x1fff;
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// Random weights of `dtype`, [rows, k], as GGUF bytes (quantized: random scales and quants).
std::vector<uint8_t> random_weights(tsr_dtype dtype, int64_t rows, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<uint8_t> out(static_cast<size_t>(rows * dtype_row_bytes(dtype, k)));
  auto put16 = [&](size_t at, uint16_t v) { std::memcpy(&out[at], &v, 2); };
  const int64_t n = rows * k;
  for (int64_t i = 0; i < n; ++i) {
    const float v = dist(rng);
    switch (dtype) {
      case TSR_DTYPE_F32: std::memcpy(&out[4 * i], &v, 4); break;
      case TSR_DTYPE_F16: put16(2 * i, f32_to_f16(v)); break;
      case TSR_DTYPE_BF16: {
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        put16(2 * i, static_cast<uint16_t>(bits >> 16));
        break;
      }
      default: break;
    }
  }
  if (dtype == TSR_DTYPE_Q8_0 || dtype == TSR_DTYPE_Q4_0) {
    const size_t block = dtype == TSR_DTYPE_Q8_0 ? 34 : 18;
    for (size_t b = 0; b < out.size() / block; ++b) {
      put16(b * block, f32_to_f16(0.01f + 0.02f * (dist(rng) + 1)));
      for (size_t j = 2; j < block; ++j) out[b * block + j] = static_cast<uint8_t>(rng());
    }
  }
  return out;
}

// Low-precision weights: the CPU backend rounds activations (int8 blocks for GEMV, bf16 for
// GEMM) and so does cuBLAS's path (f16 / bf16); the kernels' f32 GEMV does not.
double matmul_tolerance(tsr_dtype dtype) { return dtype == TSR_DTYPE_F32 ? 1e-4 : 2e-2; }

TEST_P(GpuOpTest, MatmulMatchesCpuOnEveryWeightDtype) {
  for (const tsr_dtype dtype : {TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_BF16, TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0}) {
    ASSERT_TRUE(gpu_->supports(TSR_OP_MATMUL, dtype));
    // GEMV widths (1..15 rows, one and two passes of 8) and GEMM sizes, odd feature counts.
    for (const int64_t n : {1, 3, 8, 9, 15, 16, 40, 130}) {
      const int64_t k = 32 * pick(1, 80), m = pick(1, 300), pad = n % 2 ? 12 : 0;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n) + " k=" +
                   std::to_string(k) + " m=" + std::to_string(m));
      const Twin x = upload(TSR_DTYPE_F32, {n, k}, randoms(size_t(n * k)), pad);
      const Twin w = make(dtype, {m, k}, random_weights(dtype, m, k, rng_));
      const Twin out = make(TSR_DTYPE_F32, {n, m}, {}, pad);
      cpu_->matmul({sizeof(tsr_matmul_params), &out.cpu, &x.cpu, &w.cpu});
      gpu_->matmul({sizeof(tsr_matmul_params), &out.gpu, &x.gpu, &w.gpu});
      EXPECT_LT(error(out), matmul_tolerance(dtype));
    }
  }
}

// Q4_K_M's K-quants and gpt-oss's MXFP4 (quantized from random floats by the reference
// codecs, so the scales are sane): GEMV and GEMM widths as above, and get_rows decodes them
// exactly.
TEST_P(GpuOpTest, KquantAndMxfp4WeightsMatchCpu) {
  for (const auto& [dtype, type] : {std::pair{TSR_DTYPE_Q4_K, GgmlType::Q4_K}, {TSR_DTYPE_Q6_K, GgmlType::Q6_K},
                                   {TSR_DTYPE_MXFP4, GgmlType::MXFP4}}) {
    ASSERT_TRUE(gpu_->supports(TSR_OP_MATMUL, dtype)) << dtype_name(dtype);
    for (const int64_t n : {1, 3, 8, 16, 40}) {
      const int64_t k = 256 * pick(1, 10), m = pick(1, 300);
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
      const Twin x = upload(TSR_DTYPE_F32, {n, k}, randoms(size_t(n * k)));
      const Twin w = make(dtype, {m, k}, quant::quantize(type, randoms(size_t(m * k))));
      const Twin out = make(TSR_DTYPE_F32, {n, m});
      cpu_->matmul({sizeof(tsr_matmul_params), &out.cpu, &x.cpu, &w.cpu});
      gpu_->matmul({sizeof(tsr_matmul_params), &out.gpu, &x.gpu, &w.gpu});
      EXPECT_LT(error(out), matmul_tolerance(dtype));
    }
    const std::vector<int32_t> ids = {0, 2, 1, 2};
    const Twin table = make(dtype, {3, 512}, quant::quantize(type, randoms(3 * 512)));
    const Twin di = upload(TSR_DTYPE_I32, {4}, ids);
    const Twin rows = make(TSR_DTYPE_F32, {4, 512});
    cpu_->get_rows({sizeof(tsr_get_rows_params), &rows.cpu, &table.cpu, &di.cpu});
    gpu_->get_rows({sizeof(tsr_get_rows_params), &rows.gpu, &table.gpu, &di.gpu});
    EXPECT_EQ(error(rows), 0.0) << dtype_name(dtype);
  }
}

// Activations of a corrupt model: a row holding a NaN gives NaN outputs on both backends
// (the GPU's int8 GEMV quantizer once dropped it through fmaxf), the other rows agree.
TEST_P(GpuOpTest, NaNActivationsGiveNaNOnBothBackends) {
  for (const tsr_dtype dtype : {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0}) {
    constexpr int64_t n = 2, k = 64, m = 48;
    std::vector<float> xs = randoms(size_t(n * k));
    xs[5] = std::numeric_limits<float>::quiet_NaN();
    const Twin x = upload(TSR_DTYPE_F32, {n, k}, xs);
    const Twin w = make(dtype, {m, k}, random_weights(dtype, m, k, rng_));
    const Twin out = make(TSR_DTYPE_F32, {n, m});
    cpu_->matmul({sizeof(tsr_matmul_params), &out.cpu, &x.cpu, &w.cpu});
    gpu_->matmul({sizeof(tsr_matmul_params), &out.gpu, &x.gpu, &w.gpu});
    const auto [c, g] = results(out);
    for (int64_t j = 0; j < m; ++j) {
      EXPECT_TRUE(std::isnan(c[size_t(j)]) && std::isnan(g[size_t(j)])) << dtype_name(dtype) << " " << j;
      EXPECT_NEAR(g[size_t(m + j)], c[size_t(m + j)], matmul_tolerance(dtype) * std::max(1.0f, std::abs(c[size_t(m + j)])))
          << dtype_name(dtype) << " " << j;
    }
  }
}

TEST_P(GpuOpTest, GetRowsDecodesEveryDtype) {
  for (const tsr_dtype dtype : {TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_BF16, TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0}) {
    const int64_t rows = pick(2, 50), d = 32 * pick(1, 20);
    std::vector<int32_t> ids(static_cast<size_t>(pick(1, 40)));
    for (int32_t& id : ids) id = static_cast<int32_t>(pick(0, rows - 1));
    const Twin table = make(dtype, {rows, d}, random_weights(dtype, rows, d, rng_));
    const Twin di = upload(TSR_DTYPE_I32, {int64_t(ids.size())}, ids);
    const Twin out = make(TSR_DTYPE_F32, {int64_t(ids.size()), d}, {}, 8);
    cpu_->get_rows({sizeof(tsr_get_rows_params), &out.cpu, &table.cpu, &di.cpu});
    gpu_->get_rows({sizeof(tsr_get_rows_params), &out.gpu, &table.gpu, &di.gpu});
    EXPECT_EQ(error(out), 0.0) << dtype_name(dtype);  // decoding is exact
  }
}

TEST_P(GpuOpTest, ElementwiseOpsMatchCpu) {
  for (int round = 0; round < 4; ++round) {
    const int64_t n = pick(1, 64), d = pick(1, 5000);
    const Twin a = upload(TSR_DTYPE_F32, {n, d}, randoms(size_t(n * d), -6, 6), 4);
    const Twin b = upload(TSR_DTYPE_F32, {n, d}, randoms(size_t(n * d), -2, 2));
    const Twin w = upload(TSR_DTYPE_F32, {d}, randoms(size_t(d), 0.5f, 1.5f));
    const Twin out = make(TSR_DTYPE_F32, {n, d}, {}, 8);
    cpu_->rms_norm({sizeof(tsr_rms_norm_params), &out.cpu, &a.cpu, &w.cpu, 1e-5f, 0});
    gpu_->rms_norm({sizeof(tsr_rms_norm_params), &out.gpu, &a.gpu, &w.gpu, 1e-5f, 0});
    EXPECT_LT(error(out), 1e-5) << "rms_norm";
    cpu_->silu_mul({sizeof(tsr_silu_mul_params), &out.cpu, &a.cpu, &b.cpu});
    gpu_->silu_mul({sizeof(tsr_silu_mul_params), &out.gpu, &a.gpu, &b.gpu});
    EXPECT_LT(error(out), 1e-5) << "silu_mul";
    cpu_->add({sizeof(tsr_add_params), &a.cpu, &a.cpu, &b.cpu});  // in place
    gpu_->add({sizeof(tsr_add_params), &a.gpu, &a.gpu, &b.gpu});
    EXPECT_LT(error(a), 1e-6) << "add";
  }
}

// With and without Llama 3.1's frequency factors (ABI 1.4).
TEST_P(GpuOpTest, RopeMatchesCpuInBothLayouts) {
  for (const tsr_rope_mode mode : {TSR_ROPE_NORMAL, TSR_ROPE_NEOX}) {
    for (const bool with_factors : {false, true}) {
      const int64_t n = pick(1, 40), heads = pick(1, 32), hd = 64 * pick(1, 2);
      std::vector<int32_t> pos(static_cast<size_t>(n));
      for (int32_t& p : pos) p = static_cast<int32_t>(pick(0, 8191));
      const int32_t n_rot = mode == TSR_ROPE_NORMAL ? static_cast<int32_t>(hd) : static_cast<int32_t>(hd / 2);
      std::vector<float> factors(static_cast<size_t>(n_rot / 2));
      for (float& f : factors) f = 1.0f + static_cast<float>(pick(0, 28)) / 4;
      const Twin x = upload(TSR_DTYPE_F32, {n, heads, hd}, randoms(size_t(n * heads * hd)), 16);
      const Twin dp = upload(TSR_DTYPE_I32, {n}, pos);
      const Twin df = upload(TSR_DTYPE_F32, {n_rot / 2}, factors);
      cpu_->rope({sizeof(tsr_rope_params), &x.cpu, &dp.cpu, n_rot, mode, 500000.0f, 1.0f, with_factors ? &df.cpu : nullptr, 0, 0, 0, 0});
      gpu_->rope({sizeof(tsr_rope_params), &x.gpu, &dp.gpu, n_rot, mode, 500000.0f, 1.0f, with_factors ? &df.gpu : nullptr, 0, 0, 0, 0});
      EXPECT_LT(error(x), 1e-5) << "mode " << mode << (with_factors ? " with factors" : "");
    }
  }
}

// Paged attention: shuffled block tables, GQA ratios and head sizes, a batch mixing a fresh
// prefill, a continued (chunked) prefill and decodes, and a long decode that the backend
// splits over blocks (Flash-Decoding).
TEST_P(GpuOpTest, PagedAttentionMatchesCpu) {
  struct Shape {
    int64_t heads, kv_heads, head_dim;
    int32_t block_size;
    std::vector<int32_t> lens, new_tokens;
  };
  const std::vector<Shape> shapes = {
      {4, 4, 64, 16, {37, 90, 5}, {37, 20, 1}},
      {32, 4, 64, 16, {300, 17, 64, 1}, {300, 1, 1, 1}},
      {8, 2, 128, 32, {129, 1000}, {129, 1}},
      {32, 8, 128, 16, {3000}, {1}},
      {12, 12, 80, 8, {50, 51}, {9, 51}},
      {16, 1, 256, 16, {700, 3}, {2, 3}},
  };
  for (const Shape& sh : shapes) {
    SCOPED_TRACE("heads " + std::to_string(sh.heads) + "/" + std::to_string(sh.kv_heads) + " hd " +
                 std::to_string(sh.head_dim));
    const int64_t num_seqs = static_cast<int64_t>(sh.lens.size());
    int64_t max_blocks = 0, total_blocks = 0;
    for (const int32_t len : sh.lens) {
      max_blocks = std::max<int64_t>(max_blocks, (len + sh.block_size - 1) / sh.block_size);
      total_blocks += (len + sh.block_size - 1) / sh.block_size;
    }
    const int64_t num_blocks = total_blocks + 3;
    std::vector<int32_t> perm(static_cast<size_t>(num_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    std::vector<int32_t> tables(static_cast<size_t>(num_seqs * max_blocks), 0), slots, pos, qsl{0};
    size_t next = 0;
    for (int64_t s = 0; s < num_seqs; ++s) {
      const int32_t blocks = (sh.lens[s] + sh.block_size - 1) / sh.block_size;
      for (int32_t b = 0; b < blocks; ++b) tables[s * max_blocks + b] = perm[next++];
      for (int32_t p = 0; p < sh.lens[s]; ++p) {
        slots.push_back(tables[s * max_blocks + p / sh.block_size] * sh.block_size + p % sh.block_size);
      }
      for (int32_t p = sh.lens[s] - sh.new_tokens[s]; p < sh.lens[s]; ++p) pos.push_back(p);
      qsl.push_back(static_cast<int32_t>(pos.size()));
    }
    const int64_t all = static_cast<int64_t>(slots.size()), n = static_cast<int64_t>(pos.size());
    const int64_t slots_total = num_blocks * sh.block_size;
    const Twin kc = make(TSR_DTYPE_F32, {slots_total, sh.kv_heads, sh.head_dim});
    const Twin vc = make(TSR_DTYPE_F32, {slots_total, sh.kv_heads, sh.head_dim});
    const Twin k = upload(TSR_DTYPE_F32, {all, sh.kv_heads, sh.head_dim}, randoms(size_t(all * sh.kv_heads * sh.head_dim), -2, 2));
    const Twin v = upload(TSR_DTYPE_F32, {all, sh.kv_heads, sh.head_dim}, randoms(size_t(all * sh.kv_heads * sh.head_dim)));
    const Twin ds = upload(TSR_DTYPE_I32, {all}, slots);
    cpu_->kv_write({sizeof(tsr_kv_write_params), &kc.cpu, &vc.cpu, &k.cpu, &v.cpu, &ds.cpu});
    gpu_->kv_write({sizeof(tsr_kv_write_params), &kc.gpu, &vc.gpu, &k.gpu, &v.gpu, &ds.gpu});
    EXPECT_EQ(error(kc), 0.0) << "kv_write";

    const Twin q = upload(TSR_DTYPE_F32, {n, sh.heads, sh.head_dim}, randoms(size_t(n * sh.heads * sh.head_dim), -2, 2), 12);
    const Twin out = make(TSR_DTYPE_F32, {n, sh.heads, sh.head_dim}, {}, 4);
    const Twin dt = upload(TSR_DTYPE_I32, {num_seqs, max_blocks}, tables);
    const Twin dl = upload(TSR_DTYPE_I32, {num_seqs}, sh.lens);
    const Twin dq = upload(TSR_DTYPE_I32, {num_seqs + 1}, qsl);
    const Twin dp = upload(TSR_DTYPE_I32, {n}, pos);
    const float scale = 1.0f / std::sqrt(float(sh.head_dim));
    for (int side = 0; side < 2; ++side) {
      auto t = [&](const Twin& x) { return side == 0 ? &x.cpu : &x.gpu; };
      (side == 0 ? *cpu_ : *gpu_).attention({sizeof(tsr_attention_params), t(out), t(q), t(kc), t(vc), t(dt), t(dl),
                                             t(dq), t(dp), sh.block_size, scale, 0, 0.0f, nullptr, nullptr});
    }
    EXPECT_LT(error(out), 1e-4) << "attention";
  }
}

// Tree attention (ABI 2.8 parents): sequence 0 holds 40 cached tokens and a tree of 8
// draft rows at slots 40..47 (its first chain 40..43, other branches after it), sequence 1
// a plain decode row, with and without a sliding window shorter than the tree's paths. The
// GPU masks keys in slot order where the CPU kernel walks each row's path: equal within
// rounding.
TEST_P(GpuOpTest, TreeAttentionMatchesCpu) {
  const int64_t heads = 8, kv_heads = 2, head_dim = 64;
  const int32_t block_size = 16;
  const std::vector<int32_t> lens = {48, 20}, pos = {40, 41, 42, 43, 44, 45, 46, 47, 19}, qsl = {0, 8, 9};
  const std::vector<int32_t> parents = {-1, 0, 1, 2, 0, 1, 4, 2, -1};
  const int64_t max_blocks = 3, num_blocks = 8;
  const std::vector<int32_t> tables = {5, 0, 7, 2, 6, 0};
  std::vector<int32_t> slots;
  for (size_t s = 0; s < lens.size(); ++s) {
    for (int32_t p = 0; p < lens[s]; ++p) slots.push_back(tables[s * max_blocks + size_t(p / block_size)] * block_size + p % block_size);
  }
  const auto all = static_cast<int64_t>(slots.size()), n = static_cast<int64_t>(pos.size());
  const Twin kc = make(TSR_DTYPE_F32, {num_blocks * block_size, kv_heads, head_dim});
  const Twin vc = make(TSR_DTYPE_F32, {num_blocks * block_size, kv_heads, head_dim});
  const Twin k = upload(TSR_DTYPE_F32, {all, kv_heads, head_dim}, randoms(size_t(all * kv_heads * head_dim), -2, 2));
  const Twin v = upload(TSR_DTYPE_F32, {all, kv_heads, head_dim}, randoms(size_t(all * kv_heads * head_dim)));
  const Twin ds = upload(TSR_DTYPE_I32, {all}, slots);
  cpu_->kv_write({sizeof(tsr_kv_write_params), &kc.cpu, &vc.cpu, &k.cpu, &v.cpu, &ds.cpu});
  gpu_->kv_write({sizeof(tsr_kv_write_params), &kc.gpu, &vc.gpu, &k.gpu, &v.gpu, &ds.gpu});
  const Twin q = upload(TSR_DTYPE_F32, {n, heads, head_dim}, randoms(size_t(n * heads * head_dim), -2, 2));
  const Twin dt = upload(TSR_DTYPE_I32, {int64_t(lens.size()), max_blocks}, tables);
  const Twin dl = upload(TSR_DTYPE_I32, {int64_t(lens.size())}, lens);
  const Twin dq = upload(TSR_DTYPE_I32, {int64_t(qsl.size())}, qsl);
  const Twin dp = upload(TSR_DTYPE_I32, {n}, pos);
  const Twin dpar = upload(TSR_DTYPE_I32, {n}, parents);
  for (const int32_t window : {0, 3}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const Twin out = make(TSR_DTYPE_F32, {n, heads, head_dim});
    for (int side = 0; side < 2; ++side) {
      auto t = [&](const Twin& x) { return side == 0 ? &x.cpu : &x.gpu; };
      (side == 0 ? *cpu_ : *gpu_).attention({sizeof(tsr_attention_params), t(out), t(q), t(kc), t(vc), t(dt), t(dl), t(dq),
                                             t(dp), block_size, 1.0f / 8.0f, window, 0.0f, nullptr, t(dpar)});
    }
    EXPECT_LT(error(out), 1e-4) << "tree attention";
  }
}

TEST_P(GpuOpTest, CopyBlocksMatchesCpu) {
  const int32_t block_size = 16;
  const Twin cache = upload(TSR_DTYPE_F32, {10 * block_size, 4, 32}, randoms(size_t(10 * block_size * 128)));
  const Twin q8 = make(TSR_DTYPE_Q8_0, {10 * block_size, 64}, random_weights(TSR_DTYPE_Q8_0, 10 * block_size, 64, rng_));
  // Disjoint pairs run in parallel; a chain (1 -> 2 -> 3) must be applied in order.
  for (const std::vector<int32_t>& pairs : {std::vector<int32_t>{0, 5, 7, 2, 9, 8}, std::vector<int32_t>{1, 2, 2, 3}}) {
    const Twin dp = upload(TSR_DTYPE_I32, {int64_t(pairs.size() / 2), 2}, pairs);
    const tsr_tensor* cpu_caches[] = {&cache.cpu, &q8.cpu};
    const tsr_tensor* gpu_caches[] = {&cache.gpu, &q8.gpu};
    cpu_->copy_blocks({sizeof(tsr_copy_blocks_params), cpu_caches, 2, block_size, &dp.cpu});
    gpu_->copy_blocks({sizeof(tsr_copy_blocks_params), gpu_caches, 2, block_size, &dp.gpu});
    EXPECT_EQ(error(cache), 0.0);
    std::vector<uint8_t> a(q8.bytes), b(q8.bytes);
    cpu_->read(*q8.cpu_buf, 0, a.data(), a.size());
    gpu_->read(*q8.gpu_buf, 0, b.data(), b.size());
    gpu_->synchronize();
    EXPECT_EQ(a, b);
  }
}

TEST_P(GpuOpTest, OutOfRangeIndicesAreRefused) {
  const Twin table = upload(TSR_DTYPE_F32, {4, 32}, randoms(128));
  const Twin out = make(TSR_DTYPE_F32, {2, 32});
  const Twin ids = upload(TSR_DTYPE_I32, {2}, std::vector<int32_t>{0, 4});
  try {
    gpu_->get_rows({sizeof(tsr_get_rows_params), &out.gpu, &table.gpu, &ids.gpu});
    FAIL() << "id 4 of 4 rows accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), TSR_STATUS_INVALID_ARGUMENT);
  }
  // Ids that an op wrote have no host mirror: the backend reads them back and checks them
  // the same way. copy_blocks (block size 1) moves ids within [0, 1, 4]; the first two are
  // the ids.
  const Twin cells = upload(TSR_DTYPE_I32, {3, 1}, std::vector<int32_t>{0, 1, 4});
  tsr_tensor op_ids = cells.gpu;
  op_ids.ndim = 1;
  op_ids.shape[0] = 2;
  op_ids.strides[0] = 4;
  for (const auto& [pair, valid] : {std::pair{std::vector<int32_t>{2, 1}, false}, std::pair{std::vector<int32_t>{0, 1}, true}}) {
    const Twin dp = upload(TSR_DTYPE_I32, {1, 2}, pair);
    const tsr_tensor* caches[] = {&cells.gpu};
    gpu_->copy_blocks({sizeof(tsr_copy_blocks_params), caches, 1, 1, &dp.gpu});
    if (valid) {
      gpu_->get_rows({sizeof(tsr_get_rows_params), &out.gpu, &table.gpu, &op_ids});
      gpu_->synchronize();
    } else {
      EXPECT_THROW(gpu_->get_rows({sizeof(tsr_get_rows_params), &out.gpu, &table.gpu, &op_ids}), Error);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuOpTest, ::testing::ValuesIn(gpu_plugins()),
                         [](const auto& info) { return info.param; });

// ---- with a device: a model end to end ----

std::string test_model() {
  const char* env = std::getenv("TESSERA_GPU_TEST_MODEL");
  return env != nullptr ? env : std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
}

// graphs: the config's [backend] graphs ("auto" records decode graphs on a GPU).
std::unique_ptr<Engine> make_engine(const std::string& backend, const std::string& graphs = "auto",
                                    int32_t max_seqs = 1) {
  Config c;
  c.model.path = test_model();
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.plugin = backend;
  c.backend.threads = 0;  // every core: the CPU reference of a 1.1B model is slow enough
  c.backend.graphs = graphs;
  c.scheduler.max_seqs = max_seqs;
  c.cache.memory_bytes = 512ull << 20;  // a full context of the 1.1B model for each sequence
  return Engine::create(c);
}

struct Generation {
  std::vector<int32_t> ids;
  std::vector<std::vector<float>> logits;  // the row each id was chosen from
};

Generation greedy(Engine& engine, const std::vector<int32_t>& prompt, int32_t n) {
  Generation g;
  RequestParams p;
  p.prompt = prompt;
  p.max_tokens = n;
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  p.on_logits = [&](std::span<const float> row) { g.logits.emplace_back(row.begin(), row.end()); };
  g.ids = engine.generate(std::move(p)).tokens;
  return g;
}

class GpuModelTest : public ::testing::TestWithParam<std::string> {};

// Greedy ids equal the CPU backend's until a position where the CPU's two best logits are
// within the tolerance (a tie either backend may break), and every compared row's top-8
// logits agree within 1e-3 relative.
TEST_P(GpuModelTest, GreedyIdsAndTopLogitsMatchCpu) {
  const auto plugin = load(GetParam());
  std::string reason;
  if (!has_device(*plugin, &reason)) GTEST_SKIP() << "no device: " << reason;
  if (!std::filesystem::exists(test_model())) GTEST_SKIP() << test_model() << " is absent";
  auto cpu = make_engine("cpu");
  auto gpu = make_engine(GetParam());
  constexpr double kTol = 1e-3;
  for (const char* prompt : {"Once upon a time", "The little dog", "A"}) {
    const std::vector<int32_t> ids = cpu->tokenizer().encode(prompt, true, false);
    const Generation want = greedy(*cpu, ids, 48), got = greedy(*gpu, ids, 48);
    ASSERT_EQ(want.logits.size(), want.ids.size());
    ASSERT_EQ(got.logits.size(), got.ids.size());
    for (size_t i = 0; i < want.ids.size() && i < got.ids.size(); ++i) {
      const std::vector<float>& c = want.logits[i];
      const std::vector<float>& g = got.logits[i];
      ASSERT_EQ(c.size(), g.size());
      std::vector<int32_t> order(c.size());
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + 8, order.end(), [&](int32_t a, int32_t b) { return c[a] > c[b]; });
      for (int r = 0; r < 8 && r < static_cast<int>(c.size()); ++r) {
        EXPECT_LE(std::abs(g[order[r]] - c[order[r]]), kTol * std::max(1.0f, std::abs(c[order[r]])))
            << prompt << ": position " << i << " rank " << r;
      }
      if (want.ids[i] != got.ids[i]) {
        EXPECT_LT(c[order[0]] - c[order[1]], 2 * kTol * std::max(1.0f, std::abs(c[order[0]])))
            << prompt << ": greedy ids differ at " << i << " without a near tie";
        break;
      }
    }
  }
}

// Decode graphs against eager steps on the same device: concurrent greedy requests of
// different lengths (so that the batch shrinks through several buckets) give the same ids,
// and the logits agree within 1e-4 relative (attention splits its keys for the block
// table's width in a graph, for the longest position eagerly: the sums differ in order).
TEST_P(GpuModelTest, DecodeGraphsFollowEagerSteps) {
  const auto plugin = load(GetParam());
  std::string reason;
  if (!has_device(*plugin, &reason)) GTEST_SKIP() << "no device: " << reason;
  if (!std::filesystem::exists(test_model())) GTEST_SKIP() << test_model() << " is absent";
  auto graphs = make_engine(GetParam(), "on", 8);
  auto eager = make_engine(GetParam(), "off", 8);
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "A", "Tom and",
                                            "She saw a big", "One day"};
  auto run = [&](Engine& engine) {
    std::vector<std::vector<int32_t>> ids(prompts.size());
    std::vector<std::vector<std::vector<float>>> logits(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestParams p;
      p.prompt = engine.tokenizer().encode(prompts[i], true, false);
      p.max_tokens = 24 + 8 * static_cast<int32_t>(i);
      p.sampling.temperature = 0;
      p.ignore_eos = true;
      p.on_logits = [&logits, i](std::span<const float> row) { logits[i].emplace_back(row.begin(), row.end()); };
      engine.submit(std::move(p), [&ids, i](const RequestOutput& out) {
        ids[i].insert(ids[i].end(), out.tokens.begin(), out.tokens.end());
      });
    }
    while (engine.step()) {
    }
    return std::make_pair(ids, logits);
  };
  const auto [want_ids, want_logits] = run(*eager);
  const auto [got_ids, got_logits] = run(*graphs);
  EXPECT_GT(graphs->stats().graph_replays, 0) << "no step ran from a graph";
  EXPECT_GE(graphs->stats().graphs_recorded, 2);
  EXPECT_EQ(eager->stats().graph_replays, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got_ids[i], want_ids[i]) << prompts[i];
    ASSERT_EQ(got_logits[i].size(), want_logits[i].size());
    for (size_t t = 0; t < want_logits[i].size(); ++t) {
      for (size_t v = 0; v < want_logits[i][t].size(); ++v) {
        const float w = want_logits[i][t][v], g = got_logits[i][t][v];
        ASSERT_LE(std::abs(g - w), 1e-4f * std::max(1.0f, std::abs(w)))
            << prompts[i] << ": token " << t << " logit " << v;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuModelTest, ::testing::ValuesIn(gpu_plugins()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tsr
