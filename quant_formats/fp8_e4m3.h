// Weight-only FP8 E4M3 (the OCP "fn" variant: bias 7, no infinities, largest finite 448,
// 0x7f / 0xff are NaN) with one f32 scale per output channel (row): w = e4m3(q) * s, with
// s = max|row| / 448 so that each row uses the format's whole range.
#pragma once

#include <cstdint>

namespace tsr::quant {

inline constexpr float kFp8E4m3Max = 448.0f;

// Round to nearest even, saturating at ±448 (NaN stays NaN).
uint8_t f32_to_e4m3(float v);
float e4m3_to_f32(uint8_t b);

// A row is its f32 scale followed by k E4M3 bytes: 4 + k bytes.
inline int64_t fp8_row_bytes(int64_t k) { return 4 + k; }
void quantize_row_fp8_e4m3(const float* x, uint8_t* row, int64_t k);
void dequantize_row_fp8_e4m3(const uint8_t* row, float* y, int64_t k);

}  // namespace tsr::quant
