// Conversions between f32 and the weight formats GGUF files store: F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, the K-quants Q2_K ... Q6_K, IQ4_NL, IQ4_XS and MXFP4 (the block codecs are in
// quant_formats/, bit-exact with ggml's quantizers, so files written here equal
// llama.cpp's `llama-quantize`, with an importance matrix through quantize_rows()).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/model/gguf.h"
#include "quant_formats/ggml_blocks.h"
#include "quant_formats/iq4.h"
#include "quant_formats/kquants.h"
#include "quant_formats/mxfp4.h"

namespace tsr::quant {

void f32_to_f16_row(const float* x, uint16_t* y, int64_t k);
void f32_to_bf16_row(const float* x, uint16_t* y, int64_t k);
void f16_to_f32_row(const uint16_t* x, float* y, int64_t k);
void bf16_to_f32_row(const uint16_t* x, float* y, int64_t k);

// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS, MXFP4: the types
// this library reads and writes. Quantizing to any but F32/F16/BF16/Q8_0/Q4_0 refuses NaN
// and infinity (tsr::Error).
bool is_supported(GgmlType t);
// Whether rows of `row_len` elements fill whole blocks of `t` (false for other types).
bool row_fits(GgmlType t, int64_t row_len);
// Bytes of `n` elements of `t` (n a multiple of the block size).
uint64_t byte_size(GgmlType t, int64_t n);

// Rows of `row_len` elements, each quantized under the importance matrix `imatrix` (row_len
// non-negative finite values, one per column: llama-imatrix's mean x² of that input; can be
// null: none) as llama-quantize --imatrix does. F32/F16/BF16, Q8_0 and MXFP4 have no
// weighted quantizer and ignore it, as ggml's do. Throws as quantize() does.
void quantize_rows(GgmlType to, std::span<const float> x, int64_t row_len, const float* imatrix, std::span<uint8_t> out);

// Whole-buffer conversions; x.size() must be a multiple of the block size of `to`.
// Throw tsr::Error for an unsupported type or a size that does not fit.
void quantize(GgmlType to, std::span<const float> x, std::span<uint8_t> out);
std::vector<uint8_t> quantize(GgmlType to, std::span<const float> x);
void dequantize(GgmlType from, std::span<const uint8_t> bytes, std::span<float> out);
std::vector<float> dequantize(GgmlType from, std::span<const uint8_t> bytes, int64_t n);

// A supported type by its ggml name ("f32", "q8_0", "q4_K", "iq4_xs"; case-insensitive);
// nullopt otherwise.
std::optional<GgmlType> parse_type(std::string name);
// llama.cpp's general.file_type (llama_ftype) of a file whose weights are mostly `t`.
uint32_t llama_file_type(GgmlType t);

}  // namespace tsr::quant
