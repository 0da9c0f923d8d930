#include "cpu_graph.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace tsr::cpu {

namespace {

// A params struct repointed at owned copies of its tensors.
template <class P>
struct Recorded {
  P params{};
  std::vector<std::unique_ptr<tsr_tensor>> tensors;
  std::vector<const tsr_tensor*> caches;  // copy_blocks' array of caches

  const tsr_tensor* own(const tsr_tensor* t) {
    if (t == nullptr) return nullptr;  // the op refuses it when run
    tensors.push_back(std::make_unique<tsr_tensor>(*t));
    return tensors.back().get();
  }
};

// Copies the struct as its writer sized it (a newer writer's extra fields are not ours).
template <class P>
std::shared_ptr<Recorded<P>> copy_params(const P& p) {
  auto r = std::make_shared<Recorded<P>>();
  std::memcpy(&r->params, &p, std::min(p.struct_size, sizeof(P)));
  r->params.struct_size = std::min(p.struct_size, sizeof(P));
  return r;
}

template <class P, class... Fields>
std::function<void(OpContext&)> record(const P& p, void (*op)(OpContext&, const P&),
                                       Fields... fields) {
  auto r = copy_params(p);
  ((r->params.*fields = r->own(r->params.*fields)), ...);
  return [r, op](OpContext& ctx) { op(ctx, r->params); };
}

}  // namespace

void Recording::add(const tsr_get_rows_params& p) {
  using P = tsr_get_rows_params;
  ops_.push_back(record(p, op_get_rows, &P::out, &P::table, &P::ids));
}

void Recording::add(const tsr_rms_norm_params& p) {
  using P = tsr_rms_norm_params;
  ops_.push_back(record(p, op_rms_norm, &P::out, &P::x, &P::weight));
}

void Recording::add(const tsr_matmul_params& p) {
  using P = tsr_matmul_params;
  ops_.push_back(record(p, op_matmul, &P::out, &P::x, &P::w));
}

void Recording::add(const tsr_rope_params& p) {
  using P = tsr_rope_params;
  ops_.push_back(record(p, op_rope, &P::x, &P::positions, &P::freq_factors));
}

void Recording::add(const tsr_kv_write_params& p) {
  using P = tsr_kv_write_params;
  ops_.push_back(record(p, op_kv_write, &P::k_cache, &P::v_cache, &P::k, &P::v, &P::slot_mapping));
}

void Recording::add(const tsr_attention_params& p) {
  using P = tsr_attention_params;
  ops_.push_back(record(p, op_attention, &P::out, &P::q, &P::k_cache, &P::v_cache, &P::block_tables,
                        &P::seq_lens, &P::query_start_loc, &P::positions, &P::sinks));
}

void Recording::add(const tsr_silu_mul_params& p) {
  using P = tsr_silu_mul_params;
  ops_.push_back(record(p, op_silu_mul, &P::out, &P::gate, &P::up));
}

void Recording::add(const tsr_add_params& p) {
  using P = tsr_add_params;
  ops_.push_back(record(p, op_add, &P::out, &P::a, &P::b));
}

void Recording::add(const tsr_copy_blocks_params& p) {
  auto r = copy_params(p);
  r->params.pairs = r->own(p.pairs);
  if (p.caches != nullptr && p.n_caches > 0) {
    for (int32_t c = 0; c < p.n_caches; ++c) r->caches.push_back(r->own(p.caches[c]));
    r->params.caches = r->caches.data();
  }
  ops_.push_back([r](OpContext& ctx) { op_copy_blocks(ctx, r->params); });
}

void Recording::add(const tsr_mul_params& p) {
  using P = tsr_mul_params;
  ops_.push_back(record(p, op_mul, &P::out, &P::a, &P::b));
}

void Recording::add(const tsr_scale_params& p) {
  using P = tsr_scale_params;
  ops_.push_back(record(p, op_scale, &P::out, &P::x));
}

void Recording::add(const tsr_gelu_params& p, bool mul) {
  using P = tsr_gelu_params;
  ops_.push_back(record(p, mul ? op_gelu_mul : op_gelu, &P::out, &P::x, &P::up));
}

void Recording::add(const tsr_layer_norm_params& p) {
  using P = tsr_layer_norm_params;
  ops_.push_back(record(p, op_layer_norm, &P::out, &P::x, &P::weight, &P::bias));
}

void Recording::add(const tsr_bias_add_params& p) {
  using P = tsr_bias_add_params;
  ops_.push_back(record(p, op_bias_add, &P::out, &P::x, &P::bias));
}

void Recording::add(const tsr_softmax_params& p) {
  using P = tsr_softmax_params;
  ops_.push_back(record(p, op_softmax, &P::out, &P::x));
}

void Recording::add(const tsr_top_k_params& p) {
  using P = tsr_top_k_params;
  ops_.push_back(record(p, op_top_k, &P::ids, &P::values, &P::x));
}

void Recording::add(const tsr_matmul_id_params& p) {
  using P = tsr_matmul_id_params;
  ops_.push_back(record(p, op_matmul_id, &P::out, &P::x, &P::w, &P::ids));
}

void Recording::add(const tsr_softcap_params& p) {
  using P = tsr_softcap_params;
  ops_.push_back(record(p, op_softcap, &P::out, &P::x));
}

void Recording::add(const tsr_moe_combine_params& p) {
  using P = tsr_moe_combine_params;
  ops_.push_back(record(p, op_moe_combine, &P::out, &P::x, &P::weights));
}

void Recording::add(const tsr_swiglu_oai_params& p) {
  using P = tsr_swiglu_oai_params;
  ops_.push_back(record(p, op_swiglu_oai, &P::out, &P::gate, &P::up));
}

void Recording::add(const tsr_cast_params& p) {
  using P = tsr_cast_params;
  ops_.push_back(record(p, op_cast, &P::out, &P::x));
}

void Recording::run(OpContext& ctx) const {
  for (const auto& op : ops_) op(ctx);
}

}  // namespace tsr::cpu
