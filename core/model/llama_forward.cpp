#include "core/model/llama_forward.h"

#include "core/plugin_host/host_services.h"

#include <cmath>

#include "core/error.h"
#include "core/plugin_host/tensor.h"

namespace tsr {

// Activations and per-step metadata in backend memory, grown when a larger batch comes.
struct LlamaForward::Scratch {
  int32_t cap_tokens = 0, cap_logits = 0;
  size_t cap_meta = 0;
  std::unique_ptr<BackendBuffer> act, meta, logits;
  // Views for the current step.
  tsr_tensor x, xn, q, k, v, attn, gate, up, last, last_norm, out_logits;
  tsr_tensor tokens, positions, slots, qsl, seq_lens, tables, logit_rows;
};

LlamaForward::LlamaForward(const LlamaModel& model, Backend& backend, KvCache& cache)
    : model_(model), backend_(backend), cache_(cache), s_(std::make_unique<Scratch>()) {}

LlamaForward::~LlamaForward() = default;

void LlamaForward::ensure_scratch(int32_t n, int32_t n_logits, size_t meta_ints) {
  const LlamaHParams& hp = model_.hparams();
  if (n > s_->cap_tokens) {
    // x, xn, q, k, v, attn, gate, up, and the output rows (at most one per token).
    const int64_t per_token = 4 * int64_t(hp.n_embd) + 2 * int64_t(hp.n_head) * hp.head_dim +
                              2 * int64_t(hp.n_head_kv) * hp.head_dim + 2 * int64_t(hp.n_ff);
    s_->act = backend_.alloc(uint64_t(per_token) * n * sizeof(float));
    s_->cap_tokens = n;
  }
  if (n_logits > s_->cap_logits) {
    s_->logits = backend_.alloc(uint64_t(n_logits) * hp.n_vocab * sizeof(float));
    s_->cap_logits = n_logits;
  }
  if (meta_ints > s_->cap_meta) {
    s_->meta = backend_.alloc(meta_ints * sizeof(int32_t));
    s_->cap_meta = meta_ints;
  }
}

void LlamaForward::upload_metadata(const StepBatch& b) {
  auto* base = reinterpret_cast<int32_t*>(s_->meta->base());
  size_t offset = 0;
  auto put = [&](const std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
    backend_.write(*s_->meta, offset * sizeof(int32_t), v.data(), v.size() * sizeof(int32_t));
    tsr_tensor t = tensor_make(TSR_DTYPE_I32, base + offset, shape);
    offset += v.size();
    return t;
  };
  const int64_t n = b.num_tokens(), seqs = b.num_seqs();
  s_->tokens = put(b.tokens, {n});
  s_->positions = put(b.positions, {n});
  s_->slots = put(b.slot_mapping, {n});
  s_->qsl = put(b.query_start_loc, {seqs + 1});
  s_->seq_lens = put(b.seq_lens, {seqs});
  s_->tables = put(b.block_tables, {seqs, b.max_blocks});
  s_->logit_rows = put(b.logit_rows, {int64_t(b.logit_rows.size())});
}

void LlamaForward::run(const StepBatch& b, std::vector<float>& logits) {
  const LlamaHParams& hp = model_.hparams();
  const int32_t n = b.num_tokens();
  const int32_t n_out = static_cast<int32_t>(b.logit_rows.size());
  if (n == 0 || n_out > n || b.num_seqs() == 0 || b.max_blocks <= 0 ||
      b.positions.size() != size_t(n) || b.slot_mapping.size() != size_t(n) ||
      b.query_start_loc.size() != size_t(b.num_seqs() + 1) ||
      b.block_tables.size() != size_t(b.num_seqs()) * b.max_blocks) {
    throw Error("malformed step batch", TSR_STATUS_INTERNAL);
  }
  const size_t meta = 3 * size_t(n) + 2 * b.seq_lens.size() + 1 + b.block_tables.size() + n_out;
  ensure_scratch(n, n_out, meta);
  upload_metadata(b);

  // Carve the activation buffer into this step's tensors.
  float* p = reinterpret_cast<float*>(s_->act->base());
  auto take = [&](std::initializer_list<int64_t> shape) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    tsr_tensor t = tensor_make(TSR_DTYPE_F32, p, shape);
    p += count;
    return t;
  };
  s_->x = take({n, hp.n_embd});
  s_->xn = take({n, hp.n_embd});
  s_->q = take({n, hp.n_head, hp.head_dim});
  s_->k = take({n, hp.n_head_kv, hp.head_dim});
  s_->v = take({n, hp.n_head_kv, hp.head_dim});
  s_->attn = take({n, int64_t(hp.n_head) * hp.head_dim});
  s_->gate = take({n, hp.n_ff});
  s_->up = take({n, hp.n_ff});
  s_->last = take({n_out, hp.n_embd});
  s_->last_norm = take({n_out, hp.n_embd});

  backend_.get_rows({sizeof(tsr_get_rows_params), &s_->x, &model_.tok_embd(), &s_->tokens});
  for (int l = 0; l < hp.n_layer; ++l) {
    attention_block(l, b);
    ffn_block(l);
  }
  logits.resize(size_t(n_out) * hp.n_vocab);
  if (n_out == 0) {  // a step of prefill chunks only: no token to sample yet
    backend_.synchronize();
    return;
  }
  // Only the rows whose logits are wanted go through the output head.
  backend_.get_rows({sizeof(tsr_get_rows_params), &s_->last, &s_->x, &s_->logit_rows});
  backend_.rms_norm({sizeof(tsr_rms_norm_params), &s_->last_norm, &s_->last,
                     &model_.output_norm(), hp.rms_eps, 0});
  s_->out_logits = tensor_make(TSR_DTYPE_F32, s_->logits->base(), {n_out, hp.n_vocab});
  matmul(s_->out_logits, s_->last_norm, model_.output());
  backend_.read(*s_->logits, 0, logits.data(), logits.size() * sizeof(float));
  backend_.synchronize();
}

// y = x · wᵀ on the backend, or on the quant plugin's kernels for the weights of a scheme
// the backend cannot multiply itself (which run on host memory: CPU backends).
void LlamaForward::matmul(tsr_tensor& y, const tsr_tensor& x, const tsr_tensor& w) {
  const tsr_quant_kernels* k = model_.plugin_kernels();
  if (k == nullptr || w.dtype != model_.plugin_dtype()) {
    backend_.matmul({sizeof(tsr_matmul_params), &y, &x, &w});
    return;
  }
  backend_.synchronize();
  const int64_t m = tensor_rows(x), in = x.shape[x.ndim - 1];
  const int64_t x_stride = x.ndim > 1 ? x.strides[x.ndim - 2] / int64_t(sizeof(float)) : in;
  const int64_t y_stride = y.ndim > 1 ? y.strides[y.ndim - 2] / int64_t(sizeof(float)) : w.shape[0];
  call_plugin("quant kernel matmul", [&](tsr_error** e) {
    return k->matmul(static_cast<const float*>(x.data), x_stride, m, in, w.data, w.strides[0], w.shape[0],
                     static_cast<float*>(y.data), y_stride, backend_.threads(), e);
  });
}

void LlamaForward::attention_block(int l, const StepBatch& b) {
  const LlamaHParams& hp = model_.hparams();
  const LlamaLayer& w = model_.layer(l);
  const int64_t n = b.num_tokens();
  backend_.rms_norm({sizeof(tsr_rms_norm_params), &s_->xn, &s_->x, &w.attn_norm, hp.rms_eps, 0});
  // Projections see q/k/v as [n, heads * head_dim] matrices.
  tsr_tensor q2 = tensor_make(TSR_DTYPE_F32, s_->q.data, {n, int64_t(hp.n_head) * hp.head_dim});
  tsr_tensor k2 = tensor_make(TSR_DTYPE_F32, s_->k.data, {n, int64_t(hp.n_head_kv) * hp.head_dim});
  tsr_tensor v2 = tensor_make(TSR_DTYPE_F32, s_->v.data, {n, int64_t(hp.n_head_kv) * hp.head_dim});
  matmul(q2, s_->xn, w.wq);
  matmul(k2, s_->xn, w.wk);
  matmul(v2, s_->xn, w.wv);
  for (tsr_tensor* t : {&s_->q, &s_->k}) {
    backend_.rope({sizeof(tsr_rope_params), t, &s_->positions, hp.n_rot, hp.rope_mode,
                   hp.rope_freq_base, hp.rope_freq_scale});
  }
  backend_.kv_write({sizeof(tsr_kv_write_params), &cache_.k(l), &cache_.v(l), &s_->k, &s_->v,
                     &s_->slots});
  tsr_tensor attn3 = tensor_make(TSR_DTYPE_F32, s_->attn.data, {n, hp.n_head, hp.head_dim});
  backend_.attention({sizeof(tsr_attention_params), &attn3, &s_->q, &cache_.k(l), &cache_.v(l),
                      &s_->tables, &s_->seq_lens, &s_->qsl, &s_->positions,
                      cache_.shape().block_size, 1.0f / std::sqrt(float(hp.head_dim))});
  matmul(s_->xn, s_->attn, w.wo);
  backend_.add({sizeof(tsr_add_params), &s_->x, &s_->x, &s_->xn});
}

void LlamaForward::ffn_block(int l) {
  const LlamaHParams& hp = model_.hparams();
  const LlamaLayer& w = model_.layer(l);
  backend_.rms_norm({sizeof(tsr_rms_norm_params), &s_->xn, &s_->x, &w.ffn_norm, hp.rms_eps, 0});
  matmul(s_->gate, s_->xn, w.w_gate);
  matmul(s_->up, s_->xn, w.w_up);
  backend_.silu_mul({sizeof(tsr_silu_mul_params), &s_->gate, &s_->gate, &s_->up});
  matmul(s_->xn, s_->gate, w.w_down);
  backend_.add({sizeof(tsr_add_params), &s_->x, &s_->x, &s_->xn});
}

}  // namespace tsr
