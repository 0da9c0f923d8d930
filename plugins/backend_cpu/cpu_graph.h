// Graphs on the CPU backend (ABI 1.2): a recording is the list of ops with copies of their
// params and of every tensor those point to, since the caller's structs live only for the
// call. A launch runs the ops again, checks and all. The CPU has no launch overhead to
// save; recording here lets every machine run the host's graph path against the eager one.
#pragma once

#include <functional>
#include <vector>

#include "cpu_ops.h"
#include "tessera/backend.h"

namespace tsr::cpu {

class Recording {
 public:
  void add(const tsr_get_rows_params& p);
  void add(const tsr_rms_norm_params& p);
  void add(const tsr_matmul_params& p);
  void add(const tsr_rope_params& p);
  void add(const tsr_kv_write_params& p);
  void add(const tsr_attention_params& p);
  void add(const tsr_silu_mul_params& p);
  void add(const tsr_add_params& p);
  void add(const tsr_copy_blocks_params& p);
  void add(const tsr_mul_params& p);
  void add(const tsr_scale_params& p);
  // GELU and GELU_MUL share their params: the op says which.
  void add(const tsr_gelu_params& p, bool mul);
  void add(const tsr_layer_norm_params& p);
  void add(const tsr_bias_add_params& p);
  void add(const tsr_softmax_params& p);
  void add(const tsr_top_k_params& p);
  void add(const tsr_matmul_id_params& p);
  void add(const tsr_softcap_params& p);
  void add(const tsr_moe_combine_params& p);
  void add(const tsr_swiglu_oai_params& p);
  void add(const tsr_cast_params& p);

  void run(OpContext& ctx) const;

 private:
  std::vector<std::function<void(OpContext&)>> ops_;
};

}  // namespace tsr::cpu
