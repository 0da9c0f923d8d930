// SmoothQuant (Xiao et al. 2023): int8 activations fail on LLMs because a few input channels
// are far larger than the rest and set every token's scale; their weights are not. Per input
// channel, s_j = max|X_j|^alpha / max|W_:,j|^(1 - alpha) divides the activations (folded into
// the norm before) and multiplies the weights, migrating part of the difficulty so that both
// quantize to int8 per token and per output row (W8A8: the `w8a8_smooth` scheme). The float
// model is unchanged. Smoothed: the inputs of Q/K/V and gate/up, as the paper's Llama recipe.
#pragma once

#include <string>
#include <vector>

#include "core/quant/calibration.h"
#include "core/quant/channel_scales.h"

namespace tsr::quant {

struct SmoothGroup {
  ScaleGroup group;
  std::vector<float> scales;
};

// The scales of `weights` (each [rows_i, stats.cols]) reading the input `stats` describes.
std::vector<float> smooth_scales(const std::vector<const FloatTensor*>& weights, const InputStats& stats,
                                 double alpha);

// Smooths every layer of the llama-family model in `t` (the tensors scale_group_tensor
// names, as f32) where calibration saw the group's input.
std::vector<SmoothGroup> smooth_apply(FloatTensors& t, const CalibrationStats& stats, int n_layer, double alpha = 0.5);

}  // namespace tsr::quant
