// The grid of one block of GGUF's legacy types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: blocks of 32
// with an f16 scale, and an f16 min for the _1 types), fitted to a block's values exactly as
// ggml's reference quantizer fits it, and the code of any value on that grid; or of a group
// of 128 of the load-time int4_g128 scheme (quant_formats/int4_g128.h: an f16 scale and a
// zero point), fitted as its quantizer fits it. GPTQ fits a
// block when it reaches the block's first column and then rounds weights its error updates
// have moved since, which may fall outside the fitted range: codes are clamped there. A
// block fitted and coded with no update in between gives ggml's bytes.
#pragma once

#include <cstdint>
#include <optional>

#include "core/model/gguf.h"

namespace tsr::quant {

inline constexpr int kGridBlock = 32;

struct BlockFit {
  float id = 0;                  // the f32 inverse scale codes are computed with (ggml's)
  float min = 0;                 // the f32 min the _1 types subtract before scaling
  uint16_t d16 = 0, m16 = 0;     // what the block stores
  float d = 0, m = 0;            // their values: element = (q - offset - z) * d + m
  int z = 0;                     // int4_g128's zero point (0 for the GGUF types)
};

class BlockGrid {
 public:
  // The grid of `type`, or nullopt when `type` is not one of the five.
  static std::optional<BlockGrid> of(GgmlType type);
  // The int4_g128 scheme's grid: it has no GGUF type (type() is F32), so write() is not for it.
  static BlockGrid int4_g128();

  GgmlType type() const { return type_; }
  bool is_int4_g128() const { return block_ == 128; }
  int block() const { return block_; }  // the values one fit covers: 32, or 128 for int4_g128
  // Fits the block() values at x (finite) as ggml's quantize_row_*_ref (or
  // quantize_row_int4_g128) does.
  BlockFit fit(const float* x) const;
  // The code of x on the fit, clamped to the type's range, and the value it decodes to.
  int code(float x, const BlockFit& f) const;
  float value(int q, const BlockFit& f) const { return float(q - offset_ - f.z) * f.d + f.m; }
  // The block's bytes (block_bytes of `type`) from its fit and 32 codes (GGUF types only).
  void write(const BlockFit& f, const int* codes, uint8_t* block) const;

 private:
  BlockGrid(GgmlType type, int offset, int qmin, int qmax, int block = kGridBlock)
      : type_(type), offset_(offset), qmin_(qmin), qmax_(qmax), block_(block) {}
  GgmlType type_;
  int offset_, qmin_, qmax_, block_;
};

}  // namespace tsr::quant
