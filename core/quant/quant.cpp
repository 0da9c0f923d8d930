#include "core/quant/quant.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "base/error.h"
#include "quant_formats/float_convert.h"

namespace tsr::quant {

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
  const auto traits = ggml_type_traits(static_cast<uint32_t>(t));
  return traits ? traits->block_elems : 1;
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

// The K-quant, IQ4 and Q4_1/Q5_x quantizers assume finite input (ggml's are undefined on
// NaN and llama-quantize refuses the result), so a non-finite value is refused up front,
// by index. (Q8_0 and Q4_0 store such a block as NaN, as they always have.)
void check_finite(GgmlType t, std::span<const float> x) {
  const auto bad = std::find_if(x.begin(), x.end(), [](float v) { return !std::isfinite(v); });
  if (bad != x.end()) {
    throw Error(fmt::format("quantization to {}: element {} is {}, not a finite number", type_name(t),
                            bad - x.begin(), *bad));
  }
}

}  // namespace

bool is_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0: case GgmlType::Q4_0:
    case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::IQ4_NL: case GgmlType::IQ4_XS: case GgmlType::MXFP4: return true;
    default: return false;
  }
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
  if (to != GgmlType::F32 && to != GgmlType::F16 && to != GgmlType::BF16 && to != GgmlType::Q8_0 &&
      to != GgmlType::Q4_0) {
    check_finite(to, x);
  }
  void* y = out.data();
  switch (to) {
    case GgmlType::F32: std::copy(x.begin(), x.end(), static_cast<float*>(y)); break;
    case GgmlType::F16: f32_to_f16_row(x.data(), static_cast<uint16_t*>(y), n); break;
    case GgmlType::BF16: f32_to_bf16_row(x.data(), static_cast<uint16_t*>(y), n); break;
    case GgmlType::Q8_0: quantize_row_q8_0_ref(x.data(), static_cast<BlockQ8_0*>(y), n); break;
    case GgmlType::Q4_0: quantize_row_q4_0_ref(x.data(), static_cast<BlockQ4_0*>(y), n); break;
    case GgmlType::Q4_1: quantize_row_q4_1_ref(x.data(), static_cast<BlockQ4_1*>(y), n); break;
    case GgmlType::Q5_0: quantize_row_q5_0_ref(x.data(), static_cast<BlockQ5_0*>(y), n); break;
    case GgmlType::Q5_1: quantize_row_q5_1_ref(x.data(), static_cast<BlockQ5_1*>(y), n); break;
    case GgmlType::Q2_K: quantize_row_q2_k_ref(x.data(), static_cast<BlockQ2_K*>(y), n); break;
    case GgmlType::Q3_K: quantize_row_q3_k_ref(x.data(), static_cast<BlockQ3_K*>(y), n); break;
    case GgmlType::Q4_K: quantize_row_q4_k_ref(x.data(), static_cast<BlockQ4_K*>(y), n); break;
    case GgmlType::Q5_K: quantize_row_q5_k_ref(x.data(), static_cast<BlockQ5_K*>(y), n); break;
    case GgmlType::Q6_K: quantize_row_q6_k_ref(x.data(), static_cast<BlockQ6_K*>(y), n); break;
    case GgmlType::IQ4_NL: quantize_row_iq4_nl(x.data(), static_cast<BlockIQ4_NL*>(y), n); break;
    case GgmlType::IQ4_XS: quantize_row_iq4_xs(x.data(), static_cast<BlockIQ4_XS*>(y), n); break;
    case GgmlType::MXFP4: quantize_row_mxfp4(x.data(), static_cast<BlockMXFP4*>(y), n); break;
    default: break;  // refused by check()
  }
}

namespace {

// Calls fn (one row, its importances) on each row; blocks_per_row blocks of Block a row.
template <class Block, class Fn>
void weighted_rows(Fn fn, std::span<const float> x, void* y, int64_t row_len, int64_t blocks_per_row, const float* imatrix) {
  auto* blocks = static_cast<Block*>(y);
  for (int64_t r = 0; r < int64_t(x.size()) / row_len; ++r) {
    fn(x.data() + r * row_len, blocks + r * blocks_per_row, row_len, imatrix);
  }
}

}  // namespace

void quantize_rows(GgmlType to, std::span<const float> x, int64_t row_len, const float* imatrix, std::span<uint8_t> out) {
  const auto n = static_cast<int64_t>(x.size());
  const bool weighted = imatrix != nullptr && row_len > 0 && n % row_len == 0 && row_fits(to, row_len);
  if (!weighted) return quantize(to, x, out);  // also what refuses a size that does not fit
  check(to, n, out.size());
  const int64_t per_row = row_len / block_elems(to);
  void* y = out.data();
  const auto finite = [&] { check_finite(to, x); };
  switch (to) {
    case GgmlType::Q4_0: finite(); weighted_rows<BlockQ4_0>(quantize_row_q4_0_imatrix, x, y, row_len, per_row, imatrix); break;
    case GgmlType::Q4_1: finite(); weighted_rows<BlockQ4_1>(quantize_row_q4_1_imatrix, x, y, row_len, per_row, imatrix); break;
    case GgmlType::Q5_0: finite(); weighted_rows<BlockQ5_0>(quantize_row_q5_0_imatrix, x, y, row_len, per_row, imatrix); break;
    case GgmlType::Q5_1: finite(); weighted_rows<BlockQ5_1>(quantize_row_q5_1_imatrix, x, y, row_len, per_row, imatrix); break;
    case GgmlType::Q2_K: finite(); weighted_rows<BlockQ2_K>(quantize_row_q2_k_imatrix, x, y, row_len, per_row, imatrix); break;
    case GgmlType::Q3_K: finite(); weighted_rows<BlockQ3_K>(quantize_row_q3_k_imatrix, x, y, row_len, per_row, imatrix); break;
    case GgmlType::Q4_K: finite(); weighted_rows<BlockQ4_K>(quantize_row_q4_k_imatrix, x, y, row_len, per_row, imatrix); break;
    case GgmlType::Q5_K: finite(); weighted_rows<BlockQ5_K>(quantize_row_q5_k_imatrix, x, y, row_len, per_row, imatrix); break;
    case GgmlType::Q6_K: finite(); weighted_rows<BlockQ6_K>(quantize_row_q6_k_imatrix, x, y, row_len, per_row, imatrix); break;
    case GgmlType::IQ4_NL: finite(); weighted_rows<BlockIQ4_NL>(quantize_row_iq4_nl_imatrix, x, y, row_len, per_row, imatrix); break;
    case GgmlType::IQ4_XS: finite(); weighted_rows<BlockIQ4_XS>(quantize_row_iq4_xs_imatrix, x, y, row_len, per_row, imatrix); break;
    default: quantize(to, x, out); break;  // no weighted form (F32/F16/BF16, Q8_0, MXFP4)
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
    case GgmlType::Q4_1: dequantize_row_q4_1(static_cast<const BlockQ4_1*>(x), out.data(), n); break;
    case GgmlType::Q5_0: dequantize_row_q5_0(static_cast<const BlockQ5_0*>(x), out.data(), n); break;
    case GgmlType::Q5_1: dequantize_row_q5_1(static_cast<const BlockQ5_1*>(x), out.data(), n); break;
    case GgmlType::Q2_K: dequantize_row_q2_k(static_cast<const BlockQ2_K*>(x), out.data(), n); break;
    case GgmlType::Q3_K: dequantize_row_q3_k(static_cast<const BlockQ3_K*>(x), out.data(), n); break;
    case GgmlType::Q4_K: dequantize_row_q4_k(static_cast<const BlockQ4_K*>(x), out.data(), n); break;
    case GgmlType::Q5_K: dequantize_row_q5_k(static_cast<const BlockQ5_K*>(x), out.data(), n); break;
    case GgmlType::Q6_K: dequantize_row_q6_k(static_cast<const BlockQ6_K*>(x), out.data(), n); break;
    case GgmlType::IQ4_NL: dequantize_row_iq4_nl(static_cast<const BlockIQ4_NL*>(x), out.data(), n); break;
    case GgmlType::IQ4_XS: dequantize_row_iq4_xs(static_cast<const BlockIQ4_XS*>(x), out.data(), n); break;
    case GgmlType::MXFP4: dequantize_row_mxfp4(static_cast<const BlockMXFP4*>(x), out.data(), n); break;
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
  for (const GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                          GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4}) {
    std::string lower = type_name(t);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (name == lower) return t;
  }
  return std::nullopt;
}

uint32_t llama_file_type(GgmlType t) {
  switch (t) {
    case GgmlType::F16: return 1;    // LLAMA_FTYPE_MOSTLY_F16
    case GgmlType::Q4_0: return 2;   // LLAMA_FTYPE_MOSTLY_Q4_0
    case GgmlType::Q8_0: return 7;   // LLAMA_FTYPE_MOSTLY_Q8_0
    case GgmlType::BF16: return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    case GgmlType::Q4_1: return 3;   // LLAMA_FTYPE_MOSTLY_Q4_1
    case GgmlType::Q5_0: return 8;   // LLAMA_FTYPE_MOSTLY_Q5_0
    case GgmlType::Q5_1: return 9;   // LLAMA_FTYPE_MOSTLY_Q5_1
    case GgmlType::Q2_K: return 10;  // LLAMA_FTYPE_MOSTLY_Q2_K
    case GgmlType::Q3_K: return 12;  // LLAMA_FTYPE_MOSTLY_Q3_K_M (llama.cpp has no pure Q3_K)
    case GgmlType::Q4_K: return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case GgmlType::Q5_K: return 17;  // LLAMA_FTYPE_MOSTLY_Q5_K_M
    case GgmlType::Q6_K: return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K
    case GgmlType::IQ4_NL: return 25;  // LLAMA_FTYPE_MOSTLY_IQ4_NL
    case GgmlType::IQ4_XS: return 30;  // LLAMA_FTYPE_MOSTLY_IQ4_XS
    case GgmlType::MXFP4: return 38;   // LLAMA_FTYPE_MOSTLY_MXFP4_MOE (MXFP4 experts)
    default: return 0;               // LLAMA_FTYPE_ALL_F32
  }
}

}  // namespace tsr::quant
