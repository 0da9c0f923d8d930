#include "core/quant/block_grid.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "quant_formats/float_convert.h"
#include "quant_formats/ggml_blocks.h"
#include "quant_formats/int4_g128.h"

namespace tsr::quant {

namespace {

bool asymmetric(GgmlType t) { return t == GgmlType::Q4_1 || t == GgmlType::Q5_1; }

// int4_g128's rounding to a code (its clamp_nibble).
float nibble(float v) { return v > 0.0f ? std::min(std::nearbyint(v), 15.0f) : 0.0f; }

// The signed value of largest magnitude, the first one on ties (ggml's loop).
float signed_max(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kGridBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
}

void pack_fifth_bits(const int* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kGridBlock; ++j) bits |= uint32_t((q[j] >> 4) & 1) << j;
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(bits >> (8 * b));
}

}  // namespace

std::optional<BlockGrid> BlockGrid::of(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: return BlockGrid(type, 8, 0, 15);
    case GgmlType::Q4_1: return BlockGrid(type, 0, 0, 15);
    case GgmlType::Q5_0: return BlockGrid(type, 16, 0, 31);
    case GgmlType::Q5_1: return BlockGrid(type, 0, 0, 31);
    case GgmlType::Q8_0: return BlockGrid(type, 0, -127, 127);
    default: return std::nullopt;
  }
}

BlockGrid BlockGrid::int4_g128() { return BlockGrid(GgmlType::F32, 0, 0, 15, int(kGroupInt4)); }

BlockFit BlockGrid::fit(const float* x) const {
  BlockFit f;
  float d = 0;
  if (is_int4_g128()) {
    // quantize_row_int4_g128's fit: the range widened to include 0, z the code of 0.
    float lo = 0.0f, hi = 0.0f;
    for (int j = 0; j < block_; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
    f.d16 = f32_to_f16((hi - lo) / 15.0f);
    f.d = f16_to_f32(f.d16);
    f.id = f.d != 0.0f ? 1.0f / f.d : 0.0f;
    f.z = int(nibble(-lo * f.id));
    return f;
  }
  if (asymmetric(type_)) {
    float min = std::numeric_limits<float>::max(), max = -std::numeric_limits<float>::max();
    for (int j = 0; j < kGridBlock; ++j) min = std::min(min, x[j]), max = std::max(max, x[j]);
    d = (max - min) / float(qmax_);
    f.id = d != 0.0f ? 1.0f / d : 0.0f;
    f.min = min;
    f.m16 = f32_to_f16(min);
    f.m = f16_to_f32(f.m16);
  } else if (type_ == GgmlType::Q8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kGridBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    d = amax / 127.0f;
    f.id = std::fabs(d) >= std::numeric_limits<float>::min() ? 1.0f / d : 0.0f;
  } else {
    d = signed_max(x) / -float(offset_);
    f.id = std::fabs(d) >= std::numeric_limits<float>::min() ? 1.0f / d : 0.0f;
  }
  f.d16 = f32_to_f16(d);
  f.d = f16_to_f32(f.d16);
  return f;
}

int BlockGrid::code(float x, const BlockFit& f) const {
  // ggml's expressions; floor stands for its truncation toward zero, which agrees wherever
  // ggml's own argument is non-negative (always, for values inside the fitted range).
  float q = 0;
  if (is_int4_g128()) return int(nibble(x * f.id + float(f.z)));
  if (asymmetric(type_)) {
    q = std::floor((x - f.min) * f.id + 0.5f);
  } else if (type_ == GgmlType::Q8_0) {
    q = std::roundf(x * f.id);
  } else {
    q = std::floor(x * f.id + (float(offset_) + 0.5f));
  }
  return static_cast<int>(std::clamp(q, float(qmin_), float(qmax_)));
}

void BlockGrid::write(const BlockFit& f, const int* q, uint8_t* out) const {
  switch (type_) {
    case GgmlType::Q4_0: {
      BlockQ4_0 b{f.d16, {}};
      pack_nibbles(q, b.qs);
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case GgmlType::Q4_1: {
      BlockQ4_1 b{f.d16, f.m16, {}};
      pack_nibbles(q, b.qs);
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case GgmlType::Q5_0: {
      BlockQ5_0 b{f.d16, {}, {}};
      pack_nibbles(q, b.qs);
      pack_fifth_bits(q, b.qh);
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case GgmlType::Q5_1: {
      BlockQ5_1 b{f.d16, f.m16, {}, {}};
      pack_nibbles(q, b.qs);
      pack_fifth_bits(q, b.qh);
      std::memcpy(out, &b, sizeof b);
      return;
    }
    default: {
      BlockQ8_0 b{f.d16, {}};
      for (int j = 0; j < kGridBlock; ++j) b.qs[j] = static_cast<int8_t>(q[j]);
      std::memcpy(out, &b, sizeof b);
    }
  }
}

}  // namespace tsr::quant
