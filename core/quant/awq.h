// AWQ (Lin et al. 2023, "Activation-aware Weight Quantization"): the input channels that
// carry large activations matter most, so before rounding, each weight column is scaled up by
// s_j = mean|x_j|^alpha (normalized) and the op before it scaled down by s_j, which leaves the
// float model unchanged and rounds the salient columns on a finer grid. alpha is searched per
// group of weights sharing an input, by the output error each candidate's round trip causes
// on the calibration inputs (layer_error.h). The scaled weights are then rounded to nearest.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/quant/calibration.h"
#include "core/quant/channel_scales.h"

namespace tsr::quant {

// The values a [rows, cols] matrix decodes to after quantizing it to the target format.
using RoundTrip = std::function<void(std::span<const float> w, int64_t rows, int64_t cols, std::span<float> out)>;

// A weight in a search: its values, [rows, stats.cols], and its format's round trip.
struct AwqWeight {
  std::span<const float> w;
  int64_t rows = 0;
  RoundTrip round_trip;
};
// The round trip of the format the weight `name` is written in, or NULL where it stays float.
using RoundTripFor = std::function<RoundTrip(const std::string& name)>;

struct AwqSearch {
  std::vector<float> scales;  // [cols]; all 1 when alpha is 0
  double alpha = 0;
  double error = 0;      // output error with the scales
  double rtn_error = 0;  // with none (alpha 0)
};

// Searches alpha in {0, 1/grid, ..., (grid-1)/grid} for `weights`, which read the input
// `stats` describes. Alpha 0 is plain round-to-nearest, so the result never does worse on
// the calibration inputs.
AwqSearch awq_search(const std::vector<AwqWeight>& weights, const InputStats& stats, int grid = 20);

// One group AWQ scaled, with the search's outcome.
struct AwqGroup {
  ScaleGroup group;
  AwqSearch search;
};

// Applies AWQ to every layer of a llama-family model in `t` (holding the tensors
// scale_group_tensor names, as f32), over every group of channel_scales.h.
// A group is searched only where every weight in it is quantized (round_trip_for gives a
// round trip). `done` (can be empty) is called after each layer with (layers done, total).
std::vector<AwqGroup> awq_apply(FloatTensors& t, const CalibrationStats& stats, int n_layer,
                                const RoundTripFor& round_trip_for, int grid = 20,
                                const std::function<void(int, int)>& done = {});

}  // namespace tsr::quant
