#include "core/model/llama_forward.h"

#include "core/plugin_host/host_services.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "base/error.h"
#include "core/model/decode_graphs.h"
#include "core/plugin_host/tensor.h"

namespace tsr {

// Activations and per-step metadata in backend memory, grown when a larger batch comes.
struct LlamaForward::Scratch {
  int32_t cap_tokens = 0, cap_logits = 0, cap_hidden = 0;
  size_t cap_meta = 0;
  std::unique_ptr<BackendBuffer> act, meta, logits, hidden;
  std::unique_ptr<BackendBuffer> head;  // an EAGLE-3 head's [n, 2 n_embd] attention input and its features
  int64_t cap_head = 0;                 // floats
  // Views for the current step.
  tsr_tensor x, xn, q, k, v, attn, gate, up, last, last_norm, out_logits, out_hidden;
  tsr_tensor k_rot, v_rot;  // k and v rotated, for a rotated cache (KvCache::rotation)
  // MoE layers: router logits [n, n_expert], the chosen experts' ids and weights
  // [n, n_used], and their gate, up and down outputs [n, n_used, width]; with expert
  // biases, the chosen experts' bias rows gathered [n * n_used, width].
  tsr_tensor router, expert_ids, expert_weights, expert_gate, expert_up, expert_down, expert_bias;
  // deepseek2: the router's biased selection scores [n, n_expert], the chosen experts'
  // biases [n * n_used, 1], the [n * n_expert, 2] pairs whose softmax is the sigmoid, and the
  // shared experts' output [n, n_embd].
  tsr_tensor selection, chosen_bias, sigmoid_pairs, shared;
  // Group-limited routing: each group's two best scores [n * groups, 2] (and their ids),
  // the groups' scores [n, groups], the chosen groups [n, group_used] (ids and scores),
  // their members [n, group_used, n_expert] and the mask of chosen experts [n, n_expert].
  tsr_tensor group_top, group_top_ids, group_scores, group_ids, group_vals, members, chosen_mask;
  std::unique_ptr<BackendBuffer> ones;  // cap_tokens * max(1, group_used) floats of 1
  int64_t cap_ones = 0;
  // MLA (deepseek2): the low-rank query [n, n_lora_q], the heads' queries [n, n_head *
  // head_dim_qk], their RoPE parts [n, n_head, n_rot], and the heads' outputs [n, n_head *
  // head_dim_v] (q, k and attn then hold the latent query, key row and output).
  tsr_tensor q_lora, q_full, q_pe, attn_v;
  tsr_tensor tokens, positions, cache_positions, slots, qsl, seq_lens, tables, logit_rows, hidden_rows, parents;
  std::vector<int32_t> host_meta;  // the metadata packed for its one write, reused
};

namespace {

// The width of a dense SwiGLU's gate and up: the dense layers' (all of them without
// experts, deepseek2's leading ones) or the shared experts', whichever is wider.
int64_t dense_ffn_width(const LlamaHParams& hp) {
  const int64_t dense = hp.moe() && hp.n_layer_dense_lead == 0 ? 0 : hp.n_ff;
  return std::max(dense, int64_t(hp.n_expert_shared) * hp.n_ff_exp);
}

// Whether the router's scores go through the selection scratch (a bias or groups).
bool selection_scratch(const LlamaHParams& hp) { return hp.arch == "deepseek2" || hp.group_routing(); }

// Group-limited routing's scratch of a token (Scratch::group_top .. chosen_mask).
int64_t group_floats_per_token(const LlamaHParams& hp) {
  if (!hp.group_routing()) return 0;
  return 5 * int64_t(hp.n_expert_groups) + 2 * int64_t(hp.n_group_used) + int64_t(hp.n_group_used + 1) * hp.n_expert;
}

// The feed-forward scratch of a token: gate and up, and the MoE tensors (ids take 4
// bytes, as floats do).
int64_t ffn_floats_per_token(const LlamaHParams& hp) {
  int64_t floats = 2 * dense_ffn_width(hp) + (hp.n_expert_shared > 0 ? hp.n_embd : 0);
  if (!hp.moe()) return floats;
  const int64_t bias = hp.moe_biases ? std::max<int64_t>(hp.n_ff_exp, hp.n_embd) : 0;
  floats += hp.n_expert + int64_t(hp.n_expert_used) * (2 + 2 * int64_t(hp.n_ff_exp) + hp.n_embd + bias);
  if (selection_scratch(hp)) floats += hp.n_expert * (hp.moe_sigmoid ? 3 : 1) + hp.n_expert_used;
  return floats + group_floats_per_token(hp);
}

// MLA's own scratch of a token (LlamaForward::Scratch's q_lora, q_full, q_pe, attn_v).
int64_t mla_floats_per_token(const LlamaHParams& hp) {
  if (!hp.mla()) return 0;
  return hp.n_lora_q + int64_t(hp.n_head) * (hp.head_dim_qk + hp.n_rot + hp.head_dim_v);
}

}  // namespace

LlamaForward::LlamaForward(const LlamaModel& model, Backend& backend, KvCache& cache,
                           const ForwardOptions& options)
    : model_(model), backend_(backend), cache_(cache), rope_factors_(model.rope_factors(options.context)),
      observer_(options.matmul_observer), id_observer_(options.matmul_id_observer), eager_(std::make_unique<Scratch>()) {
  if (model.hparams().group_routing()) make_group_constants();
  if (!options.graphs || observer_ || id_observer_) return;
  if (!backend.has_graphs()) {
    spdlog::warn("graphs: backend '{}' cannot record graphs; decode steps run eagerly", backend.name());
  } else {
    graphs_ = std::make_unique<DecodeGraphs>(options.graph_max_batch, options.graph_max_blocks);
    spdlog::info("graphs: decode steps of up to {} sequences and {} KV blocks each replay recorded graphs",
                 graphs_->max_batch(), graphs_->max_blocks());
  }
}

LlamaForward::~LlamaForward() = default;

// Group-limited routing's constants (limit_to_groups): each group's membership column
// [groups, n_expert, 1] and the mask's offset, -1e30 for every expert.
void LlamaForward::make_group_constants() {
  const LlamaHParams& hp = model_.hparams();
  const int64_t groups = hp.n_expert_groups, experts = hp.n_expert, per_group = experts / groups;
  std::vector<float> host(size_t(groups * experts + experts), 0.0f);
  for (int64_t e = 0; e < experts; ++e) host[size_t(e / per_group * experts + e)] = 1.0f;
  std::fill(host.begin() + groups * experts, host.end(), -1e30f);
  group_consts_ = backend_.alloc(host.size() * sizeof(float));
  backend_.write(*group_consts_, 0, host.data(), host.size() * sizeof(float));
  auto* base = reinterpret_cast<float*>(group_consts_->base());
  group_members_ = tensor_make(TSR_DTYPE_F32, base, {groups, experts, 1});
  mask_offset_ = tensor_make(TSR_DTYPE_F32, base + groups * experts, {experts});
}

int32_t LlamaForward::graphs_recorded() const { return graphs_ ? graphs_->recorded() : 0; }

void LlamaForward::ensure_scratch(Scratch& s, int32_t n, int32_t n_logits, int32_t n_hidden, size_t meta_ints) {
  const LlamaHParams& hp = model_.hparams();
  if (n > s.cap_tokens) {
    // x, xn, q, k, v, attn, the feed-forward's, and the output rows (at most one per token).
    const int64_t per_token = 4 * int64_t(hp.n_embd) + 2 * int64_t(hp.n_head) * hp.head_dim +
                              2 * int64_t(hp.n_head_kv) * hp.head_dim * (cache_.rotation() ? 2 : 1) +
                              ffn_floats_per_token(hp) + mla_floats_per_token(hp);
    s.act = backend_.alloc(uint64_t(per_token) * n * sizeof(float));
    s.cap_tokens = n;
  }
  if (hp.group_routing() && n > s.cap_ones) {
    const std::vector<float> ones(size_t(n) * hp.n_group_used, 1.0f);
    s.ones = backend_.alloc(ones.size() * sizeof(float));
    backend_.write(*s.ones, 0, ones.data(), ones.size() * sizeof(float));
    s.cap_ones = n;
  }
  if (n_logits > s.cap_logits) {
    s.logits = backend_.alloc(uint64_t(n_logits) * hp.n_vocab * sizeof(float));
    s.cap_logits = n_logits;
  }
  if (n_hidden > s.cap_hidden) {
    s.hidden = backend_.alloc(uint64_t(n_hidden) * hp.n_embd * sizeof(float));
    s.cap_hidden = n_hidden;
  }
  if (meta_ints > s.cap_meta) {
    s.meta = backend_.alloc(meta_ints * sizeof(int32_t));
    s.cap_meta = meta_ints;
  }
}

namespace {

// A [rows, cols] f32 view at `data` whose rows lie `stride` floats apart (a column block of
// a wider matrix: the backend's row ops take rows strided, elements contiguous).
tsr_tensor strided_rows(void* data, int64_t rows, int64_t cols, int64_t stride) {
  tsr_tensor t = tensor_make(TSR_DTYPE_F32, data, {rows, cols});
  t.strides[0] = stride * int64_t(sizeof(float));
  return t;
}

float* floats(const tsr_tensor& t) { return static_cast<float*>(t.data); }

// Step metadata: tokens, positions, cache positions, slots, query starts, lengths, tables,
// logit rows and hidden rows.
size_t metadata_ints(size_t tokens, size_t seqs, size_t table_entries, size_t out_rows) {
  return 4 * tokens + 2 * seqs + 1 + table_entries + out_rows;
}

size_t metadata_ints(const StepBatch& b) {
  return metadata_ints(b.tokens.size(), b.seq_lens.size(), b.block_tables.size(),
                       b.logit_rows.size() + b.hidden_rows.size() + b.parents.size());
}

}  // namespace

// Packs the metadata on the host and writes it with one buffer_write (a device backend
// pays a staged copy per write, every step).
void LlamaForward::upload_metadata(Scratch& s, const StepBatch& b) {
  auto* base = reinterpret_cast<int32_t*>(s.meta->base());
  s.host_meta.clear();
  auto put = [&](const std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
    tsr_tensor t = tensor_make(TSR_DTYPE_I32, base + s.host_meta.size(), shape);
    s.host_meta.insert(s.host_meta.end(), v.begin(), v.end());
    return t;
  };
  const int64_t n = b.num_tokens(), seqs = b.num_seqs();
  s.tokens = put(b.tokens, {n});
  s.positions = put(b.positions, {n});
  s.cache_positions = put(b.cache_positions, {n});
  s.slots = put(b.slot_mapping, {n});
  s.qsl = put(b.query_start_loc, {seqs + 1});
  s.seq_lens = put(b.seq_lens, {seqs});
  s.tables = put(b.block_tables, {seqs, b.max_blocks});
  s.logit_rows = put(b.logit_rows, {int64_t(b.logit_rows.size())});
  s.hidden_rows = put(b.hidden_rows, {int64_t(b.hidden_rows.size())});
  s.parents = put(b.parents, {int64_t(b.parents.size())});
  if (b.parents.empty()) s.parents.data = nullptr;  // causal
  backend_.write(*s.meta, 0, s.host_meta.data(), s.host_meta.size() * sizeof(int32_t));
}

void LlamaForward::check(const StepBatch& b, bool hidden) const {
  const int32_t n = b.num_tokens();
  const int32_t n_out = static_cast<int32_t>(b.logit_rows.size());
  const int32_t n_hidden = static_cast<int32_t>(b.hidden_rows.size());
  if (n == 0 || n_out > n || n_hidden > n || (n_hidden > 0 && !hidden) || b.num_seqs() == 0 ||
      b.max_blocks <= 0 ||
      b.positions.size() != size_t(n) || b.cache_positions.size() != size_t(n) || b.slot_mapping.size() != size_t(n) ||
      b.query_start_loc.size() != size_t(b.num_seqs() + 1) ||
      b.block_tables.size() != size_t(b.num_seqs()) * b.max_blocks || (!b.parents.empty() && b.parents.size() != size_t(n))) {
    throw Error("malformed step batch", TSR_STATUS_INTERNAL);
  }
}

bool LlamaForward::run(const StepBatch& b, std::vector<float>& logits, std::vector<float>* hidden,
                       const StepInterrupt* interrupt) {
  check(b, hidden != nullptr);
  if (model_.hparams().eagle3()) throw Error("an EAGLE-3 head steps through run_head", TSR_STATUS_INTERNAL);
  const int32_t n = b.num_tokens();
  const int32_t n_out = static_cast<int32_t>(b.logit_rows.size());
  const int32_t n_hidden = static_cast<int32_t>(b.hidden_rows.size());
  if (graphs_ && n_hidden == 0 && capture_layers_.empty() && b.parents.empty() && run_graph(b, logits)) return true;
  ensure_scratch(*eager_, n, n_out, n_hidden, metadata_ints(b));
  if (!capture_layers_.empty() && n > capture_rows_) {
    capture_ = backend_.alloc(uint64_t(capture_layers_.size()) * n * model_.hparams().n_embd * sizeof(float));
    capture_rows_ = n;
  }
  upload_metadata(*eager_, b);
  if (!enqueue(*eager_, b, interrupt)) {
    backend_.synchronize();
    return false;
  }
  if (hidden != nullptr) {
    hidden->resize(size_t(n_hidden) * model_.hparams().n_embd);
    if (n_hidden > 0) backend_.read(*eager_->hidden, 0, hidden->data(), hidden->size() * sizeof(float));
  }
  read_logits(*eager_, n_out, logits);
  return true;
}

void LlamaForward::run_head(const StepBatch& b, const float* features, int32_t width, std::vector<float>& logits,
                            std::vector<float>& states) {
  check(b, false);
  const LlamaHParams& hp = model_.hparams();
  if (!hp.eagle3() || (width != hp.eagle3_features && width != hp.n_embd) || features == nullptr) {
    throw Error("run_head: not an EAGLE-3 head, or features of another width", TSR_STATUS_INTERNAL);
  }
  const int32_t n = b.num_tokens(), n_out = static_cast<int32_t>(b.logit_rows.size());
  Scratch& s = *eager_;
  ensure_scratch(s, n, n_out, 0, metadata_ints(b));
  const int64_t head_floats = int64_t(n) * (2 * int64_t(hp.n_embd) + hp.eagle3_features);
  if (head_floats > s.cap_head) {
    s.head = backend_.alloc(uint64_t(head_floats) * sizeof(float));
    s.cap_head = head_floats;
  }
  upload_metadata(s, b);
  backend_.write(*s.head, uint64_t(n) * 2 * hp.n_embd * sizeof(float), features, size_t(n) * width * sizeof(float));
  enqueue_head(s, b, width);
  states.resize(size_t(n_out) * hp.n_embd);
  if (n_out > 0) {
    const auto offset = static_cast<uint64_t>(static_cast<uint8_t*>(s.last.data) - s.act->base());
    backend_.read(*s.act, offset, states.data(), states.size() * sizeof(float));
  }
  read_logits(s, n_out, logits);
}

void LlamaForward::read_logits(Scratch& s, int32_t rows, std::vector<float>& logits) {
  logits.resize(size_t(rows) * model_.hparams().n_vocab);
  if (rows > 0) backend_.read(*s.logits, 0, logits.data(), logits.size() * sizeof(float));
  backend_.synchronize();
}

// A decode step on its bucket's graph: the first step of a bucket runs eagerly on the
// graph's buffers (warming the backend up) and then records; later ones replay.
bool LlamaForward::run_graph(const StepBatch& b, std::vector<float>& logits) {
  const int32_t bucket = graphs_->bucket(b);
  if (bucket == 0) return false;
  const StepBatch padded = graphs_->pad(b, bucket);
  if (!graph_scratch_) {  // sized once for the largest bucket: graphs keep these addresses
    graph_scratch_ = std::make_unique<Scratch>();
    const int32_t max = graphs_->max_batch();
    ensure_scratch(*graph_scratch_, max, max, 0,
                   metadata_ints(max, max, size_t(max) * graphs_->max_blocks(), max));
  }
  Scratch& s = *graph_scratch_;
  upload_metadata(s, padded);
  if (const BackendGraph* graph = graphs_->find(bucket)) {
    backend_.graph_launch(*graph);
    ++graph_replays_;
  } else {
    enqueue(s, padded);
    backend_.synchronize();
    record_graph(s, padded, bucket);
  }
  read_logits(s, b.num_tokens(), logits);
  return true;
}

// Records the ops of a padded step. A backend that refuses (an op it cannot record, say)
// turns graphs off: every later step runs eagerly, as before.
void LlamaForward::record_graph(Scratch& s, const StepBatch& padded, int32_t bucket) {
  try {
    backend_.graph_begin();
    try {
      enqueue(s, padded);
    } catch (...) {
      try { (void)backend_.graph_end(); } catch (const Error&) {}  // ends the recording
      throw;
    }
    graphs_->store(bucket, backend_.graph_end());
    spdlog::debug("graphs: recorded the decode step of {} sequences", bucket);
  } catch (const Error& e) {
    spdlog::warn("graphs: recording a decode step failed, decode steps run eagerly from now: {}", e.what());
    graphs_.reset();
  }
}

// Carves the activation buffer into a step's tensors for n tokens; returns the rest.
float* LlamaForward::carve(Scratch& s, int64_t n) {
  const LlamaHParams& hp = model_.hparams();
  float* p = reinterpret_cast<float*>(s.act->base());
  auto take = [&](std::initializer_list<int64_t> shape, tsr_dtype dtype = TSR_DTYPE_F32) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    tsr_tensor t = tensor_make(dtype, p, shape);
    p += count;
    return t;
  };
  s.x = take({n, hp.n_embd});
  s.xn = take({n, hp.n_embd});
  s.q = take({n, hp.n_head, hp.head_dim});
  s.k = take({n, hp.n_head_kv, hp.head_dim});
  s.v = take({n, hp.n_head_kv, hp.head_dim});
  s.attn = take({n, int64_t(hp.n_head) * hp.head_dim});
  if (cache_.rotation() != nullptr) {
    s.k_rot = take({n, hp.n_head_kv, hp.head_dim});
    s.v_rot = take({n, hp.n_head_kv, hp.head_dim});
  }
  if (const int64_t dense = dense_ffn_width(hp); dense > 0) {
    s.gate = take({n, dense});
    s.up = take({n, dense});
  }
  if (hp.n_expert_shared > 0) s.shared = take({n, hp.n_embd});
  if (hp.mla()) {
    if (hp.n_lora_q > 0) s.q_lora = take({n, hp.n_lora_q});
    s.q_full = take({n, int64_t(hp.n_head) * hp.head_dim_qk});
    s.q_pe = take({n, hp.n_head, hp.n_rot});
    s.attn_v = take({n, int64_t(hp.n_head) * hp.head_dim_v});
  }
  if (hp.moe()) {
    const int64_t used = hp.n_expert_used;
    s.router = take({n, hp.n_expert});
    s.expert_ids = take({n, used}, TSR_DTYPE_I32);
    s.expert_weights = take({n, used});
    s.expert_gate = take({n, used, hp.n_ff_exp});
    s.expert_up = take({n, used, hp.n_ff_exp});
    s.expert_down = take({n, used, hp.n_embd});
    if (hp.moe_biases) s.expert_bias = take({n * used, std::max<int64_t>(hp.n_ff_exp, hp.n_embd)});
    if (selection_scratch(hp)) {
      s.selection = take({n, hp.n_expert});
      s.chosen_bias = take({n * used, 1});
      if (hp.moe_sigmoid) s.sigmoid_pairs = take({n * hp.n_expert, 2});
    }
    if (hp.group_routing()) {
      const int64_t groups = hp.n_expert_groups, group_used = hp.n_group_used;
      s.group_top = take({n * groups, 2});
      s.group_top_ids = take({n * groups, 2}, TSR_DTYPE_I32);
      s.group_scores = take({n, groups});
      s.group_ids = take({n, group_used}, TSR_DTYPE_I32);
      s.group_vals = take({n, group_used});
      s.members = take({n, group_used, hp.n_expert});
      s.chosen_mask = take({n, hp.n_expert});
    }
  }
  return p;
}

// Enqueues the whole step: embedding, the layers, and the output head for logit_rows;
// false when `interrupt` abandoned it. Past half the layers a step is always finished: the
// work thrown away would outweigh the wait saved.
bool LlamaForward::enqueue(Scratch& s, const StepBatch& b, const StepInterrupt* interrupt) {
  const LlamaHParams& hp = model_.hparams();
  const int64_t n = b.num_tokens();
  float* free = carve(s, n);
  backend_.get_rows({sizeof(tsr_get_rows_params), &s.x, &model_.tok_embd(), &s.tokens});
  if (hp.embd_scale != 1.0f) backend_.scale({sizeof(tsr_scale_params), &s.x, &s.x, hp.embd_scale, 0});
  capture_layer(s, 0, n);
  for (int l = 0; l < hp.n_layer; ++l) {
    if (interrupt != nullptr && 2 * l < hp.n_layer && (*interrupt)()) return false;
    attention_block(s, l, n);
    ffn_block(s, l);
    capture_layer(s, l + 1, n);
  }
  output_hidden(s, int64_t(b.hidden_rows.size()));
  output_logits(s, b, free);
  return true;
}

// The head's step: x = the features (through fc when they are the target's); the layer's
// attention reads [norm(embedding) | norm(x)], written as the two halves of one buffer
// (row ops write strided rows), and adds to x (or to norm(x), norm_before_residual); then
// the feed-forward and the output head, as llama.cpp's llama_model_eagle3 graph.
void LlamaForward::enqueue_head(Scratch& s, const StepBatch& b, int32_t width) {
  const LlamaHParams& hp = model_.hparams();
  const LlamaLayer& w = model_.layer(0);
  const int64_t n = b.num_tokens(), e = hp.n_embd;
  float* free = carve(s, n);
  auto* h = reinterpret_cast<float*>(s.head->base());
  const tsr_tensor in = tensor_make(TSR_DTYPE_F32, h, {n, 2 * e});
  const tsr_tensor features = tensor_make(TSR_DTYPE_F32, h + n * 2 * e, {n, int64_t(width)});
  auto half = [&](int64_t offset) {
    tsr_tensor t = tensor_make(TSR_DTYPE_F32, h + offset, {n, e});
    t.strides[0] = 2 * e * int64_t(sizeof(float));
    return t;
  };
  const tsr_tensor embd_half = half(0), feature_half = half(e);
  backend_.get_rows({sizeof(tsr_get_rows_params), &s.xn, &model_.tok_embd(), &s.tokens});
  backend_.rms_norm({sizeof(tsr_rms_norm_params), &embd_half, &s.xn, &w.attn_norm, hp.rms_eps, 0});
  if (width == hp.eagle3_features) {
    matmul(s.x, features, model_.fc());
  } else {
    backend_.scale({sizeof(tsr_scale_params), &s.x, &features, 1.0f, 0});
  }
  backend_.rms_norm({sizeof(tsr_rms_norm_params), &feature_half, &s.x, &w.hidden_norm, hp.rms_eps, 0});
  if (hp.eagle3_norm_before_residual) backend_.scale({sizeof(tsr_scale_params), &s.x, &feature_half, 1.0f, 0});
  attention_from(s, 0, n, in);
  ffn_block(s, 0);
  output_logits(s, b, free);
}

// The rows of x whose logits are wanted through the output norm and matrix, into the
// logits buffer; s.last keeps them before the norm. `free`: unused activation memory.
void LlamaForward::output_logits(Scratch& s, const StepBatch& b, float* free) {
  const LlamaHParams& hp = model_.hparams();
  const int64_t n_out = static_cast<int64_t>(b.logit_rows.size());
  if (n_out == 0) return;  // a step of prefill chunks only: no token to sample yet
  s.last = tensor_make(TSR_DTYPE_F32, free, {n_out, hp.n_embd});
  s.last_norm = tensor_make(TSR_DTYPE_F32, free + n_out * hp.n_embd, {n_out, hp.n_embd});
  backend_.get_rows({sizeof(tsr_get_rows_params), &s.last, &s.x, &s.logit_rows});
  backend_.rms_norm({sizeof(tsr_rms_norm_params), &s.last_norm, &s.last,
                     &model_.output_norm(), hp.rms_eps, 0});
  s.out_logits = tensor_make(TSR_DTYPE_F32, s.logits->base(), {n_out, hp.n_vocab});
  matmul(s.out_logits, s.last_norm, model_.output());
}

void LlamaForward::set_capture_layers(std::vector<int32_t> layers) {
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] > model_.hparams().n_layer || (i > 0 && layers[i] <= layers[i - 1])) {
      throw Error("capture layers must be strictly increasing layer indices from 0 to " +
                  std::to_string(model_.hparams().n_layer));
    }
  }
  capture_layers_ = std::move(layers);
  capture_.reset();
  capture_rows_ = 0;
  captured_ = {};
}

// The residual stream entering `layer` (n_layer: leaving the last), when captured, copied
// (scaled by 1: exact) into its slice of the capture buffer; the step's rows one after the
// other, layer after layer.
void LlamaForward::capture_layer(Scratch& s, int layer, int64_t n) {
  const auto it = std::find(capture_layers_.begin(), capture_layers_.end(), layer);
  if (it == capture_layers_.end()) return;
  const int64_t n_embd = model_.hparams().n_embd;
  auto* base = reinterpret_cast<float*>(capture_->base());
  const auto index = static_cast<int64_t>(it - capture_layers_.begin());
  const tsr_tensor slice = tensor_make(TSR_DTYPE_F32, base + index * n * n_embd, {n, n_embd});
  backend_.scale({sizeof(tsr_scale_params), &slice, &s.x, 1.0f, 0});
  captured_ = tensor_make(TSR_DTYPE_F32, base, {int64_t(capture_layers_.size()), n, n_embd});
}

// The hidden rows through the output norm into the hidden buffer, gathered into xn (free
// once the layers are done; n_hidden <= n).
void LlamaForward::output_hidden(Scratch& s, int64_t n_hidden) {
  if (n_hidden == 0) return;
  const LlamaHParams& hp = model_.hparams();
  tsr_tensor rows = tensor_make(TSR_DTYPE_F32, s.xn.data, {n_hidden, hp.n_embd});
  backend_.get_rows({sizeof(tsr_get_rows_params), &rows, &s.x, &s.hidden_rows});
  s.out_hidden = tensor_make(TSR_DTYPE_F32, s.hidden->base(), {n_hidden, hp.n_embd});
  backend_.rms_norm({sizeof(tsr_rms_norm_params), &s.out_hidden, &rows, &model_.output_norm(), hp.rms_eps, 0});
}

// y = x · wᵀ on the backend (on a quant plugin's kernels registered into it, for a
// scheme the backend does not multiply itself).
void LlamaForward::matmul(tsr_tensor& y, const tsr_tensor& x, const tsr_tensor& w) {
  if (observer_) {
    backend_.synchronize();
    observer_(x, w);
  }
  backend_.matmul({sizeof(tsr_matmul_params), &y, &x, &w});
}

void LlamaForward::attention_block(Scratch& s, int l, int64_t n) {
  const LlamaHParams& hp = model_.hparams();
  backend_.rms_norm({sizeof(tsr_rms_norm_params), &s.xn, &s.x, &model_.layer(l).attn_norm, hp.rms_eps, 0});
  attention_from(s, l, n, s.xn);
}

// Layer l's attention over `in` (the normalized residual stream; an EAGLE-3 head's wider
// input), added to the residual stream x.
void LlamaForward::attention_from(Scratch& s, int l, int64_t n, const tsr_tensor& in) {
  const LlamaHParams& hp = model_.hparams();
  const LlamaLayer& w = model_.layer(l);
  if (hp.mla()) return mla_attention(s, l, n, in);
  // Projections see q/k/v as [n, heads * head_dim] matrices.
  tsr_tensor q2 = tensor_make(TSR_DTYPE_F32, s.q.data, {n, int64_t(hp.n_head) * hp.head_dim});
  tsr_tensor k2 = tensor_make(TSR_DTYPE_F32, s.k.data, {n, int64_t(hp.n_head_kv) * hp.head_dim});
  tsr_tensor v2 = tensor_make(TSR_DTYPE_F32, s.v.data, {n, int64_t(hp.n_head_kv) * hp.head_dim});
  matmul(q2, in, w.wq);
  matmul(k2, in, w.wk);
  matmul(v2, in, w.wv);
  if (hp.qkv_bias) {
    for (auto [t, b] : {std::pair{&q2, &w.bq}, {&k2, &w.bk}, {&v2, &w.bv}}) {
      backend_.bias_add({sizeof(tsr_bias_add_params), t, t, b});
    }
  }
  if (hp.qk_norm) {
    // Each head normalized on its own: q and k seen as [n * heads, head_dim] rows.
    for (auto [t, norm, heads] : {std::tuple{&s.q, &w.q_norm, hp.n_head}, {&s.k, &w.k_norm, hp.n_head_kv}}) {
      tsr_tensor rows = tensor_make(TSR_DTYPE_F32, t->data, {n * heads, hp.head_dim});
      backend_.rms_norm({sizeof(tsr_rms_norm_params), &rows, &rows, norm, hp.rms_eps, 0});
    }
  }
  rope(s, s.q, l);
  rope(s, s.k, l);
  if (cache_.rotation() != nullptr) return rotated_attention(s, l, n);
  backend_.kv_write({sizeof(tsr_kv_write_params), &cache_.k(l), &cache_.v(l), &s.k, &s.v,
                     &s.slots});
  tsr_tensor attn3 = tensor_make(TSR_DTYPE_F32, s.attn.data, {n, hp.n_head, hp.head_dim});
  attention(attn3, s.q, s, l);
  output_projection(s, w);
}

// RoPE of layer l over t ([n, heads, dims], its first n_rot dims rotated).
void LlamaForward::rope(Scratch& s, const tsr_tensor& t, int l) {
  const LlamaHParams& hp = model_.hparams();
  const float base = hp.layer_rope_base(l);
  const std::array<float, 2> corr = hp.rope_ext_factor != 0.0f ? hp.yarn_corr_dims(base) : std::array<float, 2>{};
  backend_.rope({sizeof(tsr_rope_params), &t, &s.positions, hp.n_rot, hp.rope_mode, base, hp.layer_rope_scale(l),
                 rope_factors_, hp.rope_ext_factor, hp.rope_attn_factor, corr[0], corr[1]});
}

void LlamaForward::copy(const tsr_tensor& dst, const tsr_tensor& src) {
  backend_.scale({sizeof(tsr_scale_params), &dst, &src, 1.0f, 0});
}

// deepseek2's latent attention (LlamaHParams::mla), as llama.cpp's absorbed MLA. The key
// row [normalized latent | rotated RoPE key] is all the cache holds; each head's query is
// [its no-RoPE part through attn_k_b | its rotated RoPE part], so attention over the
// cached rows, read as keys and as values, leaves each head's output in the latent space
// (the first n_lora_kv of each output row), which attn_v_b expands to head_dim_v.
void LlamaForward::mla_attention(Scratch& s, int l, int64_t n, const tsr_tensor& in) {
  const LlamaHParams& hp = model_.hparams();
  const LlamaLayer& w = model_.layer(l);
  const int64_t heads = hp.n_head, dqk = hp.head_dim_qk, nope = dqk - hp.n_rot, latent = hp.n_lora_kv;
  const int64_t row = hp.head_dim;  // latent + n_rot: a key row, and each head's query and output
  if (hp.n_lora_q > 0) {
    matmul(s.q_lora, in, w.wq_a);
    backend_.rms_norm({sizeof(tsr_rms_norm_params), &s.q_lora, &s.q_lora, &w.q_a_norm, hp.rms_eps, 0});
    matmul(s.q_full, s.q_lora, w.wq_b);
  } else {
    matmul(s.q_full, in, w.wq);
  }
  tsr_tensor key_rows = tensor_make(TSR_DTYPE_F32, s.k.data, {n, row});
  matmul(key_rows, in, w.wkv_a);
  const tsr_tensor latents = strided_rows(s.k.data, n, latent, row);
  backend_.rms_norm({sizeof(tsr_rms_norm_params), &latents, &latents, &w.kv_a_norm, hp.rms_eps, 0});
  tsr_tensor k_pe = tensor_make(TSR_DTYPE_F32, floats(s.k) + latent, {n, 1, hp.n_rot});
  k_pe.strides[0] = row * int64_t(sizeof(float));
  rope(s, k_pe, l);
  // The queries' RoPE parts are rotated in a copy of their own (rope takes heads packed).
  const tsr_tensor pe_rows = tensor_make(TSR_DTYPE_F32, s.q_pe.data, {n * heads, hp.n_rot});
  copy(pe_rows, strided_rows(floats(s.q_full) + nope, n * heads, hp.n_rot, dqk));
  rope(s, s.q_pe, l);
  copy(strided_rows(floats(s.q) + latent, n * heads, hp.n_rot, row), pe_rows);
  for (int64_t h = 0; h < heads; ++h) {
    tsr_tensor absorbed = strided_rows(floats(s.q) + h * row, n, latent, heads * row);
    matmul(absorbed, strided_rows(floats(s.q_full) + h * dqk, n, nope, heads * dqk), w.wk_b[size_t(h)]);
  }
  backend_.kv_write({sizeof(tsr_kv_write_params), &cache_.k(l), &cache_.v(l), &s.k, &s.k, &s.slots});
  const tsr_tensor out = tensor_make(TSR_DTYPE_F32, s.attn.data, {n, heads, row});
  attention(out, s.q, s, l);
  for (int64_t h = 0; h < heads; ++h) {
    tsr_tensor expanded = strided_rows(floats(s.attn_v) + h * hp.head_dim_v, n, hp.head_dim_v, heads * hp.head_dim_v);
    matmul(expanded, strided_rows(floats(s.attn) + h * row, n, latent, heads * row), w.wv_b[size_t(h)]);
  }
  matmul(s.xn, s.attn_v, w.wo);
  residual_add(s, w.attn_post_norm);
}

// The attention output through wo (and its bias) into the residual stream.
void LlamaForward::output_projection(Scratch& s, const LlamaLayer& w) {
  matmul(s.xn, s.attn, w.wo);
  if (model_.hparams().attn_out_bias) backend_.bias_add({sizeof(tsr_bias_add_params), &s.xn, &s.xn, &w.bo});
  residual_add(s, w.attn_post_norm);
}

void LlamaForward::attention(const tsr_tensor& out, const tsr_tensor& q, Scratch& s, int l) {
  const LlamaHParams& hp = model_.hparams();
  backend_.attention({sizeof(tsr_attention_params), &out, &q, &cache_.k(l), &cache_.v(l),
                      &s.tables, &s.seq_lens, &s.qsl, &s.cache_positions, cache_.shape().block_size,
                      hp.attn_scale, hp.layer_is_swa(l) ? hp.n_swa : 0, 0.0f,
                      hp.attn_sinks ? &model_.layer(l).sinks : nullptr, s.parents.data ? &s.parents : nullptr});
}

// Attention over a Hadamard-rotated cache (core/kv/kv_dtype.h): q, k and v rotated head by
// head (rows of head_dim times the symmetric H), and the output rotated back. q' goes to
// the attention buffer and the output to q's, which is free by then.
void LlamaForward::rotated_attention(Scratch& s, int l, int64_t n) {
  const LlamaHParams& hp = model_.hparams();
  const tsr_tensor& h = *cache_.rotation();
  auto heads = [&](const tsr_tensor& t, int64_t count) { return tensor_make(TSR_DTYPE_F32, t.data, {n * count, hp.head_dim}); };
  for (auto [from, to, count] : {std::tuple{&s.q, &s.attn, hp.n_head}, {&s.k, &s.k_rot, hp.n_head_kv}, {&s.v, &s.v_rot, hp.n_head_kv}}) {
    tsr_tensor y = heads(*to, count);
    matmul(y, heads(*from, count), h);
  }
  backend_.kv_write({sizeof(tsr_kv_write_params), &cache_.k(l), &cache_.v(l), &s.k_rot, &s.v_rot, &s.slots});
  const tsr_tensor q_rot = tensor_make(TSR_DTYPE_F32, s.attn.data, {n, hp.n_head, hp.head_dim});
  attention(s.q, q_rot, s, l);
  tsr_tensor back = heads(s.attn, hp.n_head);
  matmul(back, heads(s.q, hp.n_head), h);
  output_projection(s, model_.layer(l));
}

// x += out, with out RMS-normalized first where the architecture has post-norms (Gemma).
void LlamaForward::residual_add(Scratch& s, const tsr_tensor& post_norm) {
  const LlamaHParams& hp = model_.hparams();
  if (hp.post_norms) backend_.rms_norm({sizeof(tsr_rms_norm_params), &s.xn, &s.xn, &post_norm, hp.rms_eps, 0});
  backend_.add({sizeof(tsr_add_params), &s.x, &s.x, &s.xn});
}

void LlamaForward::ffn_block(Scratch& s, int l) {
  const LlamaHParams& hp = model_.hparams();
  const LlamaLayer& w = model_.layer(l);
  backend_.rms_norm({sizeof(tsr_rms_norm_params), &s.xn, &s.x, &w.ffn_norm, hp.rms_eps, 0});
  if (!hp.layer_moe(l)) {
    dense_ffn(s, s.xn, w.w_gate, w.w_up, w.w_down);
  } else {
    // DeepSeek's shared experts see the same input; their output joins the routed ones'.
    if (hp.n_expert_shared > 0) dense_ffn(s, s.shared, w.gate_shexp, w.up_shexp, w.down_shexp);
    moe_ffn(s, w);
    if (hp.n_expert_shared > 0) backend_.add({sizeof(tsr_add_params), &s.xn, &s.xn, &s.shared});
  }
  residual_add(s, w.ffn_post_norm);
}

// out = (act(xn · gateᵀ) ⊙ xn · upᵀ) · downᵀ, act GELU (Gemma) or SiLU; out may be xn.
void LlamaForward::dense_ffn(Scratch& s, const tsr_tensor& out, const tsr_tensor& gate_w, const tsr_tensor& up_w,
                             const tsr_tensor& down_w) {
  const int64_t n = s.xn.shape[0], width = gate_w.shape[0];
  tsr_tensor gate = tensor_make(TSR_DTYPE_F32, s.gate.data, {n, width});
  tsr_tensor up = tensor_make(TSR_DTYPE_F32, s.up.data, {n, width});
  matmul(gate, s.xn, gate_w);
  matmul(up, s.xn, up_w);
  if (model_.hparams().gelu_ffn) {
    backend_.gelu_mul({sizeof(tsr_gelu_params), &gate, &gate, &up});
  } else {
    backend_.silu_mul({sizeof(tsr_silu_mul_params), &gate, &gate, &up});
  }
  tsr_tensor y = out;
  matmul(y, gate, down_w);
}

// The experts' feed-forward of xn into xn, as llama.cpp's build_moe_ffn. Softmax gating
// with norm_w (qwen3moe, Mixtral): the router's softmax, its top n_used, their
// probabilities renormalized as the weights. gpt-oss's SOFTMAX_WEIGHT: the top n_used of
// the biased logits, the softmax of those as the weights. Then SwiGLU (gpt-oss: clamped,
// after each expert's biases) through the chosen experts, and their outputs weighted and
// summed.
void LlamaForward::moe_ffn(Scratch& s, const LlamaLayer& w) {
  const LlamaHParams& hp = model_.hparams();
  matmul(s.router, s.xn, w.ffn_gate_inp);
  if (hp.moe_biases) backend_.bias_add({sizeof(tsr_bias_add_params), &s.router, &s.router, &w.ffn_gate_inp_b});
  if (hp.moe_sigmoid) {
    sigmoid_router(s);
  } else if (!hp.moe_weight_softmax) {
    backend_.softmax({sizeof(tsr_softmax_params), &s.router, &s.router, 1.0f, 0});
  }
  const bool biased = w.exp_probs_b.data != nullptr;
  if (biased) backend_.bias_add({sizeof(tsr_bias_add_params), &s.selection, &s.router, &w.exp_probs_b});
  if (hp.group_routing()) limit_to_groups(s, biased ? s.selection : s.router);
  backend_.top_k({sizeof(tsr_top_k_params), &s.expert_ids, &s.expert_weights,
                  biased || hp.group_routing() ? &s.selection : &s.router, hp.n_expert_used, 0});
  if (biased) unbias_weights(s, w);
  if (hp.moe_weight_softmax) {
    backend_.softmax({sizeof(tsr_softmax_params), &s.expert_weights, &s.expert_weights, 1.0f, 0});
  }
  expert_matmul(s, s.expert_gate, s.xn, w.gate_exps, w.gate_exps_b);
  expert_matmul(s, s.expert_up, s.xn, w.up_exps, w.up_exps_b);
  // SwiGLU over the [n * n_used, n_ff_exp] rows of both.
  const int64_t rows = s.expert_gate.shape[0] * hp.n_expert_used;
  tsr_tensor gate = tensor_make(TSR_DTYPE_F32, s.expert_gate.data, {rows, hp.n_ff_exp});
  tsr_tensor up = tensor_make(TSR_DTYPE_F32, s.expert_up.data, {rows, hp.n_ff_exp});
  if (hp.swiglu_oai) {
    backend_.swiglu_oai({sizeof(tsr_swiglu_oai_params), &gate, &gate, &up, 1.702f, 7.0f});
  } else {
    backend_.silu_mul({sizeof(tsr_silu_mul_params), &gate, &gate, &up});
  }
  expert_matmul(s, s.expert_down, s.expert_gate, w.down_exps, w.down_exps_b);
  backend_.moe_combine({sizeof(tsr_moe_combine_params), &s.xn, &s.expert_down, &s.expert_weights,
                        hp.moe_norm_w ? 1 : 0, hp.moe_w_scale});
}

// selection = scores where the expert's group is among the n_group_used best, else
// -1e30, as llama.cpp's build_moe_ffn masks them: a group scores the sum of its two best
// scores. No op of the ABI scatters, so the chosen groups' members are found by matmul_id
// against the constant [groups, n_expert, 1] membership matrix (a 1 for each expert of the
// group) and summed by moe_combine into a 0/1 mask; chosen scores then pass unchanged
// (+ 1e30·1 − 1e30 = + 0).
void LlamaForward::limit_to_groups(Scratch& s, const tsr_tensor& scores) {
  const LlamaHParams& hp = model_.hparams();
  const int64_t n = scores.shape[0], groups = hp.n_expert_groups, group_used = hp.n_group_used;
  const tsr_tensor grouped = tensor_make(TSR_DTYPE_F32, scores.data, {n * groups, hp.n_expert / groups});
  backend_.top_k({sizeof(tsr_top_k_params), &s.group_top_ids, &s.group_top, &grouped, 2, 0});
  const tsr_tensor best = strided_rows(floats(s.group_top), n * groups, 1, 2);
  const tsr_tensor second = strided_rows(floats(s.group_top) + 1, n * groups, 1, 2);
  const tsr_tensor sums = tensor_make(TSR_DTYPE_F32, s.group_scores.data, {n * groups, 1});
  backend_.add({sizeof(tsr_add_params), &sums, &best, &second});
  backend_.top_k({sizeof(tsr_top_k_params), &s.group_ids, &s.group_vals, &s.group_scores, hp.n_group_used, 0});
  const tsr_tensor one_each = tensor_make(TSR_DTYPE_F32, s.ones->base(), {n, 1});
  const tsr_tensor ones = tensor_make(TSR_DTYPE_F32, s.ones->base(), {n, group_used});
  backend_.matmul_id({sizeof(tsr_matmul_id_params), &s.members, &one_each, &group_members_, &s.group_ids});
  backend_.moe_combine({sizeof(tsr_moe_combine_params), &s.chosen_mask, &s.members, &ones, 0, 0.0f});
  backend_.scale({sizeof(tsr_scale_params), &s.chosen_mask, &s.chosen_mask, 1e30f, 0});
  backend_.bias_add({sizeof(tsr_bias_add_params), &s.chosen_mask, &s.chosen_mask, &mask_offset_});
  backend_.add({sizeof(tsr_add_params), &s.selection, &scores, &s.chosen_mask});
}

// router = σ(router) (DeepSeek-V3's gating), as the softmax of each logit paired with a
// zero: e^x / (e^x + e^0). No op of the ABI computes a sigmoid; this one is exact to float
// rounding and runs on every backend.
void LlamaForward::sigmoid_router(Scratch& s) {
  const int64_t rows = s.router.shape[0] * s.router.shape[1];
  const tsr_tensor logits = tensor_make(TSR_DTYPE_F32, s.router.data, {rows, 1});
  const tsr_tensor first = strided_rows(floats(s.sigmoid_pairs), rows, 1, 2);
  const tsr_tensor second = strided_rows(floats(s.sigmoid_pairs) + 1, rows, 1, 2);
  copy(first, logits);
  backend_.scale({sizeof(tsr_scale_params), &second, &logits, 0.0f, 0});
  backend_.softmax({sizeof(tsr_softmax_params), &s.sigmoid_pairs, &s.sigmoid_pairs, 1.0f, 0});
  copy(logits, first);
}

// The chosen experts' weights are their unbiased probabilities: top_k returned them with
// the selection bias added, which is taken off again (exact to a rounding of the sum).
void LlamaForward::unbias_weights(Scratch& s, const LlamaLayer& w) {
  const LlamaHParams& hp = model_.hparams();
  const int64_t rows = s.expert_ids.shape[0] * s.expert_ids.shape[1];
  const tsr_tensor ids = tensor_make(TSR_DTYPE_I32, s.expert_ids.data, {rows});
  const tsr_tensor table = tensor_make(TSR_DTYPE_F32, w.exp_probs_b.data, {hp.n_expert, 1});
  const tsr_tensor weights = tensor_make(TSR_DTYPE_F32, s.expert_weights.data, {rows, 1});
  backend_.get_rows({sizeof(tsr_get_rows_params), &s.chosen_bias, &table, &ids});
  backend_.scale({sizeof(tsr_scale_params), &s.chosen_bias, &s.chosen_bias, -1.0f, 0});
  backend_.add({sizeof(tsr_add_params), &weights, &weights, &s.chosen_bias});
}

// out [n, n_used, m] = x through each chosen expert, plus that expert's bias row where the
// architecture has them (llama.cpp's ggml_add_id: gathered by get_rows, then one add).
void LlamaForward::expert_matmul(Scratch& s, const tsr_tensor& out, const tsr_tensor& x, const tsr_tensor& w,
                                 const tsr_tensor& bias) {
  if (id_observer_) {
    backend_.synchronize();
    id_observer_(x, w, s.expert_ids);
  }
  backend_.matmul_id({sizeof(tsr_matmul_id_params), &out, &x, &w, &s.expert_ids});
  if (!model_.hparams().moe_biases) return;
  const int64_t rows = out.shape[0] * out.shape[1], m = out.shape[2];
  const tsr_tensor ids = tensor_make(TSR_DTYPE_I32, s.expert_ids.data, {rows});
  const tsr_tensor gathered = tensor_make(TSR_DTYPE_F32, s.expert_bias.data, {rows, m});
  const tsr_tensor flat = tensor_make(TSR_DTYPE_F32, out.data, {rows, m});
  backend_.get_rows({sizeof(tsr_get_rows_params), &gathered, &bias, &ids});
  backend_.add({sizeof(tsr_add_params), &flat, &flat, &gathered});
}

}  // namespace tsr
