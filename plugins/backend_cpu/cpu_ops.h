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

bool op_supports(tsr_op op, tsr_dtype dtype);

}  // namespace tsr::cpu
