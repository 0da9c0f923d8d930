// Checks of an op's scalar params, made the same way by every backend (the CPU reference
// and the GPU backends use them, so that a bad value is refused with the same words
// everywhere). Tensor operands are each backend's own business: their views differ.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tessera/backend.h"
#include "tessera/sdk/status.hpp"

namespace tsr::sdk {

// rope's params once checked: the pairing and the factor of cos and sin (attn_factor, and
// YaRN's 1 + 0.1 ln(1 / freq_scale) when ext_factor is set; backend.h).
struct RopeScalars {
  bool neox = false;
  double mscale = 1;
};

inline RopeScalars check_rope_scalars(const tsr_rope_params& p, int64_t head_dim) {
  require(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= head_dim, "rope: n_rot must be even and at most head_dim");
  int32_t mode = 0;  // read as an int: a C caller may pass any
  std::memcpy(&mode, &p.mode, sizeof(mode));
  require(mode == TSR_ROPE_NORMAL || mode == TSR_ROPE_NEOX, "rope: unknown mode");
  require(p.freq_base > 0 && p.freq_scale > 0, "rope: frequency base and scale must be > 0");
  require(std::isfinite(p.ext_factor) && p.ext_factor >= 0 && p.ext_factor <= 1, "rope: ext_factor must be in [0, 1]");
  require(std::isfinite(p.attn_factor) && p.attn_factor >= 0, "rope: attn_factor must be finite and >= 0");
  require(std::isfinite(p.corr_low) && std::isfinite(p.corr_high) && p.corr_low <= p.corr_high && p.corr_low >= 0 &&
              p.corr_high <= float(p.n_rot),
          "rope: corr_low and corr_high must lie in [0, n_rot] with corr_low <= corr_high");
  RopeScalars r;
  r.neox = mode == TSR_ROPE_NEOX;
  r.mscale = p.attn_factor == 0 ? 1.0 : p.attn_factor;
  if (p.ext_factor != 0) r.mscale *= 1.0 + 0.1 * std::log(1.0 / p.freq_scale);
  return r;
}

// attention's operand ranks, before a backend views them: q [n, heads, head_dim], the
// caches [slots, kv_heads, head_dim], block_tables [num_seqs, max_blocks].
inline void check_attention_layout(const tsr_attention_params& p) {
  require(p.q != nullptr && p.q->ndim == 3, "attention: q must be [n, heads, head_dim]");
  require(p.k_cache != nullptr && p.k_cache->ndim == 3, "attention: caches must be [slots, kv_heads, head_dim]");
  require(p.block_tables != nullptr && p.block_tables->ndim == 2,
          "attention: block_tables must be [num_seqs, max_blocks]");
}

// attention's optional scalars (window, softcap); sinks are a tensor, checked by the backend.
inline void check_attention_scalars(const tsr_attention_params& p) {
  require(p.window >= 0, "attention: window must be >= 0");
  require(std::isfinite(p.softcap) && p.softcap >= 0, "attention: softcap must be finite and >= 0");
}

inline void check_softcap_scalars(const tsr_softcap_params& p) {
  require(std::isfinite(p.cap) && p.cap > 0, "softcap: cap must be finite and > 0");
}

inline void check_scale_scalars(const tsr_scale_params& p) {
  require(std::isfinite(p.scale), "scale: the factor must be finite");
}

inline void check_softmax_scalars(const tsr_softmax_params& p) {
  require(std::isfinite(p.scale), "softmax: scale must be finite");
}

inline void check_layer_norm_scalars(const tsr_layer_norm_params& p) {
  require(std::isfinite(p.eps) && p.eps >= 0, "layer_norm: eps must be finite and >= 0");
}

inline void check_top_k_scalars(const tsr_top_k_params& p, int64_t row_length) {
  require(p.k > 0 && p.k <= row_length, "top_k: k must be in [1, row length]");
}

#if TSR_ABI_MAJOR > 2 || (TSR_ABI_MAJOR == 2 && TSR_ABI_MINOR >= 1)
// moe_combine's operand shapes (x [n, n_used, d], weights [n, n_used], out [n, d]) and
// its scale; dtypes and strides are each backend's to check.
inline void check_moe_combine_layout(const tsr_moe_combine_params& p) {
  require(p.x != nullptr && p.x->ndim == 3, "moe_combine: x must be [n, n_used, d]");
  require(p.weights != nullptr && p.weights->ndim == 2 && p.weights->shape[0] == p.x->shape[0] &&
              p.weights->shape[1] == p.x->shape[1],
          "moe_combine: weights must be [n, n_used], as x's first two dims");
  require(p.out != nullptr && p.out->ndim == 2 && p.out->shape[0] == p.x->shape[0] && p.out->shape[1] == p.x->shape[2],
          "moe_combine: out must be [n, d], as x's first and last dims");
  require(std::isfinite(p.scale), "moe_combine: scale must be finite");
}
#endif

#if TSR_ABI_MAJOR > 2 || (TSR_ABI_MAJOR == 2 && TSR_ABI_MINOR >= 4)
inline void check_swiglu_oai_scalars(const tsr_swiglu_oai_params& p) {
  require(std::isfinite(p.alpha), "swiglu_oai: alpha must be finite");
  require(std::isfinite(p.limit) && p.limit > 0, "swiglu_oai: limit must be finite and > 0");
}
#endif

}  // namespace tsr::sdk
