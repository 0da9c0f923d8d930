// The quantizers follow ggml-quants.c's reference code operation for operation (same
// float expressions in the same order): any reordering could change a rounding and break
// byte equality with llama.cpp's files.
#include "core/quant/quant.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/model/float_convert.h"

namespace tsr::quant {

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockQ8_0; ++i, x += kBlockQ8_0) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kBlockQ8_0; ++j) {
      const float a = std::fabs(x[j]);
      amax = amax > a ? amax : a;  // ggml's MAX(), whose NaN behaviour std::max does not share
    }
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int64_t j = 0; j < kBlockQ8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

void quantize_row_q4_0_ref(const float* x, BlockQ4_0* y, int64_t k) {
  constexpr int64_t half = kBlockQ4_0 / 2;
  for (int64_t i = 0; i < k / kBlockQ4_0; ++i, x += kBlockQ4_0) {
    float amax = 0.0f, max = 0.0f;  // the signed value of largest magnitude, first one wins
    for (int64_t j = 0; j < kBlockQ4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int64_t j = 0; j < half; ++j) {
      // ggml truncates through int8_t; x * id lies in [-8, 8], so the cast is in range.
      const auto q0 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x[j] * id + 8.5f)));
      const auto q1 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x[half + j] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / kBlockQ8_0; ++i, y += kBlockQ8_0) {
    const float d = f16_to_f32(x[i].d);
    for (int64_t j = 0; j < kBlockQ8_0; ++j) y[j] = x[i].qs[j] * d;
  }
}

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t k) {
  constexpr int64_t half = kBlockQ4_0 / 2;
  for (int64_t i = 0; i < k / kBlockQ4_0; ++i, y += kBlockQ4_0) {
    const float d = f16_to_f32(x[i].d);
    for (int64_t j = 0; j < half; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 0x0f) - 8) * d;
      y[half + j] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void f32_to_f16_row(const float* x, uint16_t* y, int64_t k) {
  for (int64_t i = 0; i < k; ++i) y[i] = f32_to_f16(x[i]);
}
void f32_to_bf16_row(const float* x, uint16_t* y, int64_t k) {
  for (int64_t i = 0; i < k; ++i) y[i] = f32_to_bf16(x[i]);
}
void f16_to_f32_row(const uint16_t* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k; ++i) y[i] = f16_to_f32(x[i]);
}
void bf16_to_f32_row(const uint16_t* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k; ++i) y[i] = bf16_to_f32(x[i]);
}

namespace {

int64_t block_elems(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return kBlockQ8_0;
    case GgmlType::Q4_0: return kBlockQ4_0;
    default: return 1;
  }
}

std::string type_name(GgmlType t) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(t));
  return traits ? traits->name : fmt::format("type {}", static_cast<uint32_t>(t));
}

// Refuses what the conversions below cannot handle, naming the problem.
void check(GgmlType t, int64_t n, uint64_t bytes) {
  if (!is_supported(t)) throw Error("quantization: unsupported type " + type_name(t), TSR_STATUS_UNSUPPORTED);
  if (n % block_elems(t) != 0 || bytes != byte_size(t, n)) {
    throw Error(fmt::format("quantization: {} elements of {} do not fit {} bytes", n, type_name(t), bytes));
  }
}

}  // namespace

bool is_supported(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || t == GgmlType::Q8_0 ||
         t == GgmlType::Q4_0;
}

bool row_fits(GgmlType t, int64_t row_len) {
  return is_supported(t) && row_len > 0 && row_len % block_elems(t) == 0;
}

uint64_t byte_size(GgmlType t, int64_t n) {
  const auto traits = ggml_type_traits(static_cast<uint32_t>(t));
  return static_cast<uint64_t>(n) / traits->block_elems * traits->block_bytes;
}

void quantize(GgmlType to, std::span<const float> x, std::span<uint8_t> out) {
  const auto n = static_cast<int64_t>(x.size());
  check(to, n, out.size());
  void* y = out.data();
  switch (to) {
    case GgmlType::F32: std::copy(x.begin(), x.end(), static_cast<float*>(y)); break;
    case GgmlType::F16: f32_to_f16_row(x.data(), static_cast<uint16_t*>(y), n); break;
    case GgmlType::BF16: f32_to_bf16_row(x.data(), static_cast<uint16_t*>(y), n); break;
    case GgmlType::Q8_0: quantize_row_q8_0_ref(x.data(), static_cast<BlockQ8_0*>(y), n); break;
    case GgmlType::Q4_0: quantize_row_q4_0_ref(x.data(), static_cast<BlockQ4_0*>(y), n); break;
    default: break;  // refused by check()
  }
}

std::vector<uint8_t> quantize(GgmlType to, std::span<const float> x) {
  check(to, static_cast<int64_t>(x.size()), byte_size(to, static_cast<int64_t>(x.size())));
  std::vector<uint8_t> out(byte_size(to, static_cast<int64_t>(x.size())));
  quantize(to, x, out);
  return out;
}

void dequantize(GgmlType from, std::span<const uint8_t> bytes, std::span<float> out) {
  const auto n = static_cast<int64_t>(out.size());
  check(from, n, bytes.size());
  const void* x = bytes.data();
  switch (from) {
    case GgmlType::F32: std::copy_n(static_cast<const float*>(x), n, out.data()); break;
    case GgmlType::F16: f16_to_f32_row(static_cast<const uint16_t*>(x), out.data(), n); break;
    case GgmlType::BF16: bf16_to_f32_row(static_cast<const uint16_t*>(x), out.data(), n); break;
    case GgmlType::Q8_0: dequantize_row_q8_0(static_cast<const BlockQ8_0*>(x), out.data(), n); break;
    case GgmlType::Q4_0: dequantize_row_q4_0(static_cast<const BlockQ4_0*>(x), out.data(), n); break;
    default: break;  // refused by check()
  }
}

std::vector<float> dequantize(GgmlType from, std::span<const uint8_t> bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize(from, bytes, out);
  return out;
}

std::optional<GgmlType> parse_type(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name == "f32") return GgmlType::F32;
  if (name == "f16") return GgmlType::F16;
  if (name == "bf16") return GgmlType::BF16;
  if (name == "q8_0") return GgmlType::Q8_0;
  if (name == "q4_0") return GgmlType::Q4_0;
  return std::nullopt;
}

uint32_t llama_file_type(GgmlType t) {
  switch (t) {
    case GgmlType::F16: return 1;    // LLAMA_FTYPE_MOSTLY_F16
    case GgmlType::Q4_0: return 2;   // LLAMA_FTYPE_MOSTLY_Q4_0
    case GgmlType::Q8_0: return 7;   // LLAMA_FTYPE_MOSTLY_Q8_0
    case GgmlType::BF16: return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    default: return 0;               // LLAMA_FTYPE_ALL_F32
  }
}

}  // namespace tsr::quant
