// `tessera quantize --method gptq|awq --calib TEXT` and `quantize IN OUT w8a8_smooth
// --calib TEXT`: the weights of a calibrated method. The model runs over the text on the CPU
// backend (core/quant/calibration.h); GPTQ then quantizes each calibrated weight with error
// compensation (core/quant/gptq.h), AWQ scales weights and the ops before them
// (core/quant/awq.h) before rounding to nearest, and SmoothQuant migrates activation
// outliers into the weights (core/quant/smoothquant.h) for the w8a8_smooth scheme.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/model/gguf.h"
#include "core/quant/calibration.h"

namespace tsr::app {

struct CalibratedFlags {
  std::string method = "rtn";  // rtn | gptq | awq | smoothquant
  std::string calib;           // the calibration text
  int32_t ctx = 512;           // tokens per calibration chunk
  int32_t chunks = 0;          // 0: all the text fills
  double damp = 0.01;          // GPTQ's damping, a fraction of the Hessian's mean diagonal
  bool act_order = false;      // GPTQ's desc_act: columns by decreasing H_ii, grids fitted first
  int32_t awq_grid = 20;       // AWQ's alpha candidates
  bool awq_clip = true;        // AWQ's weight clipping after the scales
  double smooth_alpha = 0.5;   // SmoothQuant's migration strength
  int32_t threads = 0;         // the CPU backend's; 0: every core
};

// `in` in f32 on the CPU backend, run over the text f.calib in chunks of f.ctx (capped at
// the model's training context): each weight input's statistics, the Hessians only where
// `hessian`; *chunk_tokens (can be NULL) receives the chunk length used. A progress bar on
// stderr; throws tsr::Error for an unreadable or too short text.
quant::CalibrationStats calibration_stats(const GgufFile& in, const CalibratedFlags& f, bool hessian,
                                          int32_t* chunk_tokens = nullptr);

// A tensor as a calibrated method wrote it.
struct CalibratedTensor {
  GgmlType type;
  std::vector<uint8_t> bytes;
};

// The tensors of `in` the method wrote, by name; `types` is the plan (the type each tensor
// is written in). `int4_g128`: for the load-time `int4_g128` scheme, the weights stay in their
// stored float type: AWQ's scaled (as SmoothQuant's always are), GPTQ's on the scheme's grid,
// so that its quantizer recovers GPTQ's codes. Tensors not returned are converted as
// round-to-nearest converts them. Throws tsr::Error naming what does not fit the method.
std::map<std::string, CalibratedTensor> quantize_calibrated(const GgufFile& in, const std::vector<GgmlType>& types,
                                                            const CalibratedFlags& f, bool int4_g128);

}  // namespace tsr::app
