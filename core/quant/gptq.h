// GPTQ (Frantar et al. 2022, "Accurate Post-Training Quantization for Generative
// Pre-trained Transformers"): a weight matrix is quantized one input column at a time, and
// each column's rounding error is spread over the columns not yet quantized in proportion to
// the inverse Hessian of the layer's inputs, H = sum x x^T over calibration tokens, so that
// the layer's outputs on those inputs move as little as possible. Lazy batch updates: the
// error of a block of 128 columns reaches the later columns in one matrix product. The
// grid is GGUF's (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), fitted per block of 32 as ggml fits it when
// GPTQ reaches the block's first column, so the bytes load in llama.cpp unchanged; or the
// load-time int4_g128 scheme's, per group of 128.
// Act-order (the reference implementation's desc_act): columns are quantized in order of
// decreasing H_ii, the inputs that carry the most energy first while the most columns
// remain to absorb their error; the blocks' grids are then fitted before any update, from
// the weights as given (its static_groups), since a block's columns arrive out of order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/quant/block_grid.h"

namespace tsr::quant {

// The upper Cholesky factor U of H^-1 (H^-1 = U^T U) after GPTQ's damping: the diagonal
// gets `damp` times its mean added; input dimensions no calibration token used (H_ii = 0)
// are `dead` and their weights quantized as zero. One factor serves every weight reading
// the same inputs (Q, K and V; gate and up).
struct GptqFactor {
  int64_t cols = 0;
  std::vector<float> u;       // [cols, cols] row-major, upper triangle
  std::vector<uint8_t> dead;  // [cols]
  double damp = 0;            // the damping that made H positive definite
  // The column order u is in (act-order: by decreasing H_ii, dead ones last); empty: 0, 1, ...
  std::vector<int64_t> order;
};

// `hessian` is [cols, cols] (symmetric). Retries with ten times the damping (up to 1.0)
// while H is not positive definite; throws tsr::Error past that. `act_order`: the factor of
// H with its columns in act-order.
GptqFactor gptq_factor(std::span<const float> hessian, int64_t cols, double damp = 0.01, bool act_order = false);

// The [rows, cols] row-major matrix `w` (finite) quantized to `grid`'s type; cols a multiple
// of grid.block(). `quantized` (can be NULL) receives the decoded values. For the int4_g128
// grid, which has no GGUF type, nothing is returned: the decoded values are the result
// (written in a float type, the scheme's quantizer recovers the same codes from them).
std::vector<uint8_t> gptq_quantize(const BlockGrid& grid, std::span<const float> w, int64_t rows, int64_t cols,
                                   const GptqFactor& factor, std::vector<float>* quantized = nullptr);

}  // namespace tsr::quant
