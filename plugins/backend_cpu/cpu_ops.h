// The CPU backend's ops. Each validates its operands and throws tsr::sdk::Failure on bad
// input; none throws past the plugin boundary (backend_cpu.cpp guards every entry).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "tessera/backend.h"
#include "tessera/sdk/backend.hpp"

namespace tsr::cpu {

struct MatmulCache;  // oneDNN primitives by shape (cpu_matmul.cpp)

// Per-backend state the ops share. Externally synchronized, like the backend handle.
struct OpContext {
  int32_t n_threads = 1;
  std::unique_ptr<MatmulCache> matmul;
  sdk::QuantKernelRegistry plugin_kernels;  // quant plugins' matmuls, by weight dtype
  OpContext();
  ~OpContext();
};

void op_get_rows(OpContext& ctx, const tsr_get_rows_params& p);
void op_rms_norm(OpContext& ctx, const tsr_rms_norm_params& p);
void op_matmul(OpContext& ctx, const tsr_matmul_params& p);
void op_rope(OpContext& ctx, const tsr_rope_params& p);
void op_kv_write(OpContext& ctx, const tsr_kv_write_params& p);
void op_attention(OpContext& ctx, const tsr_attention_params& p);
void op_silu_mul(OpContext& ctx, const tsr_silu_mul_params& p);
void op_add(OpContext& ctx, const tsr_add_params& p);
void op_copy_blocks(OpContext& ctx, const tsr_copy_blocks_params& p);
// ABI 2.0 (cpu_elementwise.cpp, cpu_row_ops.cpp, cpu_matmul_id.cpp).
void op_mul(OpContext& ctx, const tsr_mul_params& p);
void op_scale(OpContext& ctx, const tsr_scale_params& p);
void op_gelu(OpContext& ctx, const tsr_gelu_params& p);
void op_gelu_mul(OpContext& ctx, const tsr_gelu_params& p);
void op_layer_norm(OpContext& ctx, const tsr_layer_norm_params& p);
void op_bias_add(OpContext& ctx, const tsr_bias_add_params& p);
void op_softmax(OpContext& ctx, const tsr_softmax_params& p);
void op_top_k(OpContext& ctx, const tsr_top_k_params& p);
void op_matmul_id(OpContext& ctx, const tsr_matmul_id_params& p);
void op_softcap(OpContext& ctx, const tsr_softcap_params& p);
// ABI 2.1 (cpu_row_ops.cpp).
void op_moe_combine(OpContext& ctx, const tsr_moe_combine_params& p);
void op_swiglu_oai(OpContext& ctx, const tsr_swiglu_oai_params& p);
void op_cast(OpContext& ctx, const tsr_cast_params& p);
// Whether cast converts `from` into `to`.
bool cast_supports(tsr_dtype from, tsr_dtype to);

bool op_supports(tsr_op op, tsr_dtype dtype);

}  // namespace tsr::cpu
