// What a model's matmul weights see on a calibration text: per input, the sum of x x^T over
// the tokens (the Hessian GPTQ and AWQ's search weigh errors with), the mean and largest
// magnitude of each input channel (AWQ's and SmoothQuant's activation statistics) and its
// sum of squares (an importance matrix's). Collected from the model as the engine
// runs it (every matmul's input, ForwardOptions::matmul_observer), in f32 on the CPU backend.
// Weights that read the same input (Q, K and V; gate and up) share one InputStats.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/model/gguf.h"
#include "core/model/llama_model.h"
#include "core/plugin_host/backend.h"

namespace tsr::quant {

struct InputStats {
  int64_t cols = 0;
  int64_t tokens = 0;
  std::vector<float> hessian;   // [cols, cols]; empty unless CalibrationOptions::hessian
  std::vector<double> abs_sum;  // [cols]: sum of |x|
  std::vector<float> abs_max;   // [cols]: max of |x| (SmoothQuant's statistic)
  std::vector<double> sq_sum;   // [cols]: sum of x² (llama-imatrix's statistic); MoE experts:
                                // [n_expert * cols], each expert's over the tokens routed to it
  std::vector<int64_t> expert_tokens;  // MoE experts: [n_expert] tokens routed to each; else empty
  std::vector<float> abs_mean() const;
};

// By GGUF tensor name ("blk.0.attn_q.weight", "output.weight"). A MoE layer's experts
// ("blk.0.ffn_up_exps.weight") have only the per-expert sums of squares and token counts
// (no Hessian: GPTQ, AWQ and SmoothQuant leave experts to round-to-nearest).
using CalibrationStats = std::map<std::string, std::shared_ptr<InputStats>>;

struct CalibrationOptions {
  int32_t ctx = 512;   // tokens per chunk; each chunk opens with BOS, as perplexity's do
  int32_t chunks = 0;  // 0: as many as the text fills
  bool hessian = true;  // false: the per-column sums only (an importance matrix needs no more)
};

// Runs `model` (loaded from `gguf` on `backend`, whose memory must be host-visible, without
// a quant scheme) over `tokens` in chunks of opt.ctx. `progress` (can be empty) is called
// with (chunks done, chunks total). Throws tsr::Error when the text does not fill a chunk.
CalibrationStats calibrate(const GgufFile& gguf, const LlamaModel& model, Backend& backend,
                           std::span<const int32_t> tokens, int32_t bos /* < 0: none */, const CalibrationOptions& opt,
                           const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace tsr::quant
