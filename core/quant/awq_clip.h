// AWQ's weight clipping (the reference implementation's auto_clip, after the scale search):
// a block's largest magnitude sets its quantization grid, so shrinking it — clamping the
// block to ±(1 − i/grid)·max — can cost the few largest weights less than the coarser grid
// costs all the others. Per row and per block of the format, the candidate whose round trip
// gives the smallest output error on the calibration inputs, d Hbb dᵀ (Hbb the block's
// diagonal block of Σ x xᵀ), is kept; candidate 0 is no clipping, so no block does worse.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/quant/awq.h"

namespace tsr::quant {

struct ClipOptions {
  int64_t block = 32;        // the format's block: its grid is fitted per block
  int grid = 20;             // candidates shrink by 1/grid of the block's max each
  double max_shrink = 0.5;   // down to (1 - max_shrink)·max
};

struct ClipResult {
  double error = 0;      // Σ over blocks of the chosen candidate's output error
  double rtn_error = 0;  // the same without clipping
  int64_t clipped = 0;   // blocks clamped
};

// Clips `w` ([rows, cols], cols a multiple of opt.block) in place. `hessian` is the input's
// [cols, cols] Σ x xᵀ; `scales` (can be empty) are AWQ's channel scales already folded into
// w, so the inputs it sees are x / s. `round_trip` is the format's.
ClipResult awq_clip(std::span<float> w, int64_t rows, int64_t cols, const RoundTrip& round_trip,
                    std::span<const float> hessian, std::span<const float> scales, const ClipOptions& opt = {});

}  // namespace tsr::quant
