// Group-wise weight-only int4 with a scale and a zero point per group of 128 (the storage
// form of AWQ/GPTQ): w = (q - z) * d with q, z in [0, 15]. The range of each group is
// widened to include 0, so that zero weights stay exact.
#pragma once

#include <cstdint>

namespace tsr::quant {

inline constexpr int64_t kGroupInt4 = 128;

struct GroupInt4 {
  uint16_t d;     // scale, f16
  uint8_t z;      // zero point
  uint8_t pad;
  uint8_t qs[kGroupInt4 / 2];  // element j in the low nibble of qs[j], j + 64 in the high one
};
static_assert(sizeof(GroupInt4) == 68, "int4_g128 group layout");

// `k` is the element count, a multiple of 128.
void quantize_row_int4_g128(const float* x, GroupInt4* y, int64_t k);
void dequantize_row_int4_g128(const GroupInt4* x, float* y, int64_t k);

}  // namespace tsr::quant
