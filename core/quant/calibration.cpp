#include "core/quant/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "core/quant/layer_error.h"
#include "core/runner/model_runner.h"

namespace tsr::quant {

std::vector<float> InputStats::abs_mean() const {
  std::vector<float> m(abs_sum.size());
  for (size_t i = 0; i < m.size(); ++i) m[i] = tokens > 0 ? float(abs_sum[i] / double(tokens)) : 0.0f;
  return m;
}

namespace {

// The GGUF name of each dense weight the forward multiplies by, by its data address. A
// fused tensor (Phi-3's attn_qkv, gate-up ffn_up) is named by its first block, whose input
// the other blocks share.
std::map<const void*, std::string> weight_names(const GgufFile& gguf, const LlamaModel& model) {
  std::map<const void*, std::string> names;
  auto add = [&](const tsr_tensor& t, const std::string& name) {
    if (t.data != nullptr && gguf.find_tensor(name) != nullptr) names.emplace(t.data, name);
  };
  for (int l = 0; l < model.hparams().n_layer; ++l) {
    const LlamaLayer& w = model.layer(l);
    const std::string p = fmt::format("blk.{}.", l);
    add(w.wq, p + (gguf.find_tensor(p + "attn_qkv.weight") ? "attn_qkv.weight" : "attn_q.weight"));
    add(w.wk, p + "attn_k.weight");
    add(w.wv, p + "attn_v.weight");
    add(w.wo, p + "attn_output.weight");
    add(w.w_gate, p + (model.hparams().fused_gate_up ? "ffn_up.weight" : "ffn_gate.weight"));
    if (!model.hparams().fused_gate_up) add(w.w_up, p + "ffn_up.weight");
    add(w.w_down, p + "ffn_down.weight");
    add(w.gate_exps, p + "ffn_gate_exps.weight");
    add(w.up_exps, p + "ffn_up_exps.weight");
    add(w.down_exps, p + "ffn_down_exps.weight");
  }
  add(model.output(), model.output().data == model.tok_embd().data ? "token_embd.weight" : "output.weight");
  return names;
}

class Collector {
 public:
  Collector(std::map<const void*, std::string> names, bool hessian) : names_(std::move(names)), hessian_(hessian) {}

  // Consecutive matmuls on one input buffer (Q, K, V) read the same values: the later ones
  // share the first one's statistics instead of adding the same tokens again.
  void observe(const tsr_tensor& x, const tsr_tensor& w) {
    const auto it = names_.find(w.data);
    if (it == names_.end() || x.dtype != TSR_DTYPE_F32 || x.ndim != 2 || x.strides[0] != x.shape[1] * 4) return;
    const std::string& name = it->second;
    const bool same_input = x.data == prev_x_ && x.shape[0] == prev_rows_;
    prev_x_ = x.data, prev_rows_ = x.shape[0];
    if (same_input) {
      stats_.try_emplace(name, stats_.at(prev_name_));
      return;
    }
    prev_name_ = name;
    std::shared_ptr<InputStats>& s = stats_[name];
    if (!s) {
      const auto cols = size_t(x.shape[1]);
      s = std::make_shared<InputStats>(InputStats{x.shape[1], 0, std::vector<float>(hessian_ ? cols * cols : 0),
                                                  std::vector<double>(cols), std::vector<float>(cols),
                                                  std::vector<double>(cols), {}});
    }
    accumulate(*s, static_cast<const float*>(x.data), x.shape[0]);
  }

  // A MoE layer's expert matmul: each token's row (x [n, K]: one row for all its experts;
  // [n, n_used, K]: one per chosen expert) adds to the sums of the experts it was routed to.
  void observe_experts(const tsr_tensor& x, const tsr_tensor& w, const tsr_tensor& ids) {
    const auto it = names_.find(w.data);
    if (it == names_.end() || x.dtype != TSR_DTYPE_F32 || ids.dtype != TSR_DTYPE_I32 || w.ndim != 3 || ids.ndim != 2) return;
    const int64_t n_expert = w.shape[0], k = x.shape[x.ndim - 1], n = ids.shape[0], used = ids.shape[1];
    const bool contiguous = x.strides[x.ndim - 2] == k * 4 && (x.ndim == 2 || (x.ndim == 3 && x.strides[0] == used * k * 4));
    if (!contiguous || x.shape[0] != n) return;
    std::shared_ptr<InputStats>& s = stats_[it->second];
    if (!s) {
      s = std::make_shared<InputStats>();
      s->cols = k;
      s->sq_sum.assign(size_t(n_expert * k), 0.0);
      s->expert_tokens.assign(size_t(n_expert), 0);
    }
    const auto* xv = static_cast<const float*>(x.data);
    const auto* id = static_cast<const int32_t*>(ids.data);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t u = 0; u < used; ++u) {
        const int32_t e = id[t * used + u];
        if (e < 0 || e >= n_expert) continue;
        const float* row = xv + (x.ndim == 3 ? (t * used + u) * k : t * k);
        double* sums = &s->sq_sum[size_t(e * k)];
        for (int64_t c = 0; c < k; ++c) sums[c] += double(row[c]) * row[c];
        ++s->expert_tokens[size_t(e)];
      }
    }
    s->tokens += n;
  }

  CalibrationStats take() { return std::move(stats_); }

 private:
  static void accumulate(InputStats& s, const float* x, int64_t rows) {
    if (!s.hessian.empty()) sgemm('T', 'N', s.cols, s.cols, rows, 1.0f, x, s.cols, x, s.cols, 1.0f, s.hessian.data(), s.cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < s.cols; ++c) {
        const float a = std::fabs(x[r * s.cols + c]);
        s.abs_sum[size_t(c)] += a;
        s.sq_sum[size_t(c)] += double(a) * a;
        s.abs_max[size_t(c)] = std::max(s.abs_max[size_t(c)], a);
      }
    }
    s.tokens += rows;
  }

  std::map<const void*, std::string> names_;
  bool hessian_;
  CalibrationStats stats_;
  const void* prev_x_ = nullptr;
  int64_t prev_rows_ = 0;
  std::string prev_name_;
};

}  // namespace

CalibrationStats calibrate(const GgufFile& gguf, const LlamaModel& model, Backend& backend,
                           std::span<const int32_t> tokens, int32_t bos, const CalibrationOptions& opt,
                           const std::function<void(int64_t, int64_t)>& progress) {
  if (opt.ctx < 2) throw Error("calibration: chunks need at least 2 tokens");
  const bool has_bos = bos >= 0;
  const int64_t per_chunk = opt.ctx - (has_bos ? 1 : 0);
  int64_t chunks = int64_t(tokens.size()) / per_chunk;
  if (opt.chunks > 0) chunks = std::min<int64_t>(chunks, opt.chunks);
  if (chunks == 0) {
    throw Error(fmt::format("calibration: the text has {} tokens, fewer than one chunk of {}", tokens.size(), opt.ctx));
  }
  Collector collector(weight_names(gguf, model), opt.hessian);
  ModelRunnerOptions o;
  o.num_blocks = (opt.ctx + o.block_size - 1) / o.block_size;
  o.forward.matmul_observer = [&collector](const tsr_tensor& x, const tsr_tensor& w) { collector.observe(x, w); };
  o.forward.matmul_id_observer = [&collector](const tsr_tensor& x, const tsr_tensor& w, const tsr_tensor& ids) {
    collector.observe_experts(x, w, ids);
  };
  ModelRunner runner(model, backend, o);
  constexpr SeqId kSeq = 1;
  if (!runner.kv().allocate(kSeq, opt.ctx, 0)) throw Error("calibration: no KV blocks for a chunk");
  std::vector<int32_t> chunk(size_t(opt.ctx));
  std::vector<float> logits;
  for (int64_t c = 0; c < chunks; ++c) {
    if (has_bos) chunk[0] = bos;
    std::copy_n(tokens.begin() + c * per_chunk, per_chunk, chunk.begin() + (has_bos ? 1 : 0));
    runner.run_sequence(kSeq, 0, chunk, false, logits);
    if (progress) progress(c + 1, chunks);
  }
  return collector.take();
}

}  // namespace tsr::quant
