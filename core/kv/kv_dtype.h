// The KV cache's formats: the dtypes K and V are stored in ([cache] dtype / dtype_k /
// dtype_v, llama.cpp's -ctk / -ctv) and the Hadamard rotation of 4-bit caches.
//
// Rotation ([cache] rotation): with "hadamard", each head of q, k and v is multiplied by
// the normalized Hadamard matrix H (symmetric, H·H = I) before K and V are stored, and the
// attention's output by H again: q·k = (Hq)·(Hk), and Σ p·v = H·Σ p·(Hv), so attention is
// unchanged in exact arithmetic while the rotated rows spread an outlier over the whole
// head and quantize with a smaller error (QuaRot; ik_llama.cpp's Hadamard K cache). The
// rotations are backend matmuls, so every backend runs them. "auto" rotates q4_0 caches.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/kv/kv_dtype_names.h"
#include "core/plugin_host/backend.h"

namespace tsr {

// Defaults: the exact cache (F32, unrotated), as the references are computed; the
// config's default is f16 ([cache] dtype).
struct KvFormat {
  tsr_dtype k = TSR_DTYPE_F32;
  tsr_dtype v = TSR_DTYPE_F32;
  bool rotated = false;
};

// The format for K and V dtypes named as in kKvDtypeNames and a rotation of kKvRotations;
// an unknown name, or a rotation a head_dim that is not a power of two cannot take, is a
// tsr::Error naming it.
KvFormat kv_format_resolve(std::string_view k_name, std::string_view v_name, std::string_view rotation,
                           int32_t head_dim);

// Bytes of one token's K or V for one head of head_dim elements; -1 when head_dim is not a
// whole number of the dtype's blocks.
int64_t kv_head_bytes(tsr_dtype dtype, int32_t head_dim);

// Refuses, naming the backend and the dtype, a format whose caches `backend` cannot write
// or attend over.
void kv_format_check(const Backend& backend, const KvFormat& format);

// `format` where `backend` takes it (kv_format_check). Else, when `is_default` (the
// config's default f16 cache, left unchanged), F32 with a warning: a backend without f16
// caches, such as the SDK's example, still runs with the defaults. Else the refusal.
KvFormat kv_format_for_backend(const Backend& backend, const KvFormat& format, bool is_default);

// The normalized Hadamard matrix of order n (a power of two), row-major: Sylvester's
// construction scaled by 1/sqrt(n).
std::vector<float> hadamard_matrix(int32_t n);

}  // namespace tsr
