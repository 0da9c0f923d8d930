// Kernel launchers of the GPU backends (CUDA, and HIP through gpu_runtime.h). Operands
// arrive checked by backend_gpu.cpp: shapes agree, indices are in range, pointers and row
// strides are aligned to their element type. Strides are in bytes, as in tsr_tensor.
#pragma once

#include <cstdint>

#include "gpu_runtime.h"
#include "tessera/abi.h"

namespace tsr::gpu {

// A tensor seen as rows x cols: row r starts at data + r * stride; a row is packed.
struct Mat {
  void* data = nullptr;
  tsr_dtype dtype = TSR_DTYPE_F32;
  int64_t rows = 0, cols = 0, stride = 0;
  int64_t row_bytes = 0;  // bytes of a row's own data (FP8_E4M3: a scale per innermost row)
};

// Whether this build has kernels the current device can run (e.g. an sm_80 device with an
// sm_90-only build does not): the error a launch would report, or cudaSuccess.
cudaError_t probe_kernels();

// Kernel launch failures (bad configuration) are reported by the caller through
// cudaGetLastError; faults during execution surface at the next synchronization.
void get_rows(cudaStream_t s, const Mat& out, const Mat& table, const int32_t* ids);
void rms_norm(cudaStream_t s, const Mat& out, const Mat& x, const float* weight, float eps);

// tsr_rope_params, checked: angles as the CPU backend computes them (YaRN included).
struct RopeArgs {
  int64_t heads = 0, head_dim = 0;
  const int32_t* pos = nullptr;
  int32_t n_rot = 0;
  bool neox = false;
  float freq_base = 10000, freq_scale = 1;
  const float* factors = nullptr;  // n_rot / 2 divisors of the pairs' angles, or NULL
  float ext_factor = 0, corr_low = 0, corr_high = 0;
  float mscale = 1;  // the factor of cos and sin: attn_factor, with YaRN's own term
};
void rope(cudaStream_t s, const Mat& x, const RopeArgs& a);
// Each head of head_dim elements of a row of k and v as one row of the cache's dtype.
void kv_write(cudaStream_t s, const Mat& k_cache, const Mat& v_cache, const Mat& k, const Mat& v,
              const int32_t* slots, int32_t head_dim);

// Elementwise f32 ops (gpu_elementwise.cu); out may alias an input.
enum class Binary { kAdd, kMul, kSiluMul, kGeluMul };
enum class Unary { kScale, kGelu, kSoftcap };
void binary(cudaStream_t s, Binary op, const Mat& out, const Mat& a, const Mat& b);
// kScale: x * arg; kGelu: gelu(x) (tanh form); kSoftcap: arg * tanh(x / arg).
void unary(cudaStream_t s, Unary op, const Mat& out, const Mat& x, float arg);
void bias_add(cudaStream_t s, const Mat& out, const Mat& x, const float* bias);
// gpt-oss's clamped SwiGLU (tsr_swiglu_oai_params).
void swiglu_oai(cudaStream_t s, const Mat& out, const Mat& gate, const Mat& up, float alpha, float limit);
// Between F32, F16 and BF16 (round to nearest even); out and x of the same shape.
void cast(cudaStream_t s, const Mat& out, const Mat& x);

// Per-row reductions (gpu_row_ops.cu).
void layer_norm(cudaStream_t s, const Mat& out, const Mat& x, const float* weight, const float* bias,
                float eps);
void softmax(cudaStream_t s, const Mat& out, const Mat& x, float scale);
// ids and values: [x.rows, k]; largest first, the lower index first among equals, NaN last.
void top_k(cudaStream_t s, const Mat& ids, const Mat& values, const Mat& x, int32_t k);
// tsr_moe_combine_params: out [n, d]; x [n, n_used * d] (slots packed); weights [n, n_used].
void moe_combine(cudaStream_t s, const Mat& out, const Mat& x, const Mat& weights, int64_t n_used, int normalize,
                 float scale);
// Copies `block_size` rows from block pairs[2i] to block pairs[2i+1], for i in [first, first + n).
void copy_blocks(cudaStream_t s, const Mat& cache, const int32_t* pairs, int64_t first, int64_t n,
                 int32_t block_size);

// out = x · wᵀ for few rows of x: each weight row is read once per 8 rows of x, decoded in
// registers, with f32 activations (no rounding of x).
void gemv(cudaStream_t s, const Mat& out, const Mat& x, const Mat& w);
// MoE's grouped matmul (tsr_matmul_id_params): for token i and slot s, out[i, s] =
// x[i, s or 0] · w[ids[i, s]]ᵀ, one warp per output feature, weights decoded in registers
// as the GEMV does. An id outside [0, n_expert) (possible only for ids the device wrote,
// which the host cannot check without a synchronization) gives a row of NaNs.
struct ExpertWeights {
  const void* data = nullptr;
  tsr_dtype dtype = TSR_DTYPE_F32;
  int64_t n_expert = 0, rows = 0, cols = 0;
  int64_t expert_stride = 0, row_stride = 0;  // bytes
};
struct MatmulIdArgs {
  float* out;
  const float* x;
  const int32_t* ids;  // [n, n_used], packed
  int64_t n, n_used;
  int64_t out_stride, out_slot_stride;  // bytes
  int64_t x_stride, x_slot_stride;      // bytes; x_slot_stride 0: every slot reads the token's row
};
void matmul_id(cudaStream_t s, const MatmulIdArgs& a, const ExpertWeights& w);
// The same product as a shared-memory tiled f32 GEMM: the HIP backend's GEMM (Debian has no
// rocBLAS), and the CUDA backend's with TESSERA_GPU_NO_BLAS=1.
void gemm_tiled(cudaStream_t s, const Mat& out, const Mat& x, const Mat& w);

#if !defined(TSR_GPU_HIP)
// The Q8_0 GEMV of the CUDA backend (gpu_gemv_q8.cu): x quantized to Q8_0 blocks in
// `scratch` (gemv_q8_0_scratch bytes, 16-byte aligned), then int8 dot products against
// the weights; one quantized x serves several weights.
size_t gemv_q8_0_scratch(int64_t rows, int64_t k);
void quantize_q8_0(cudaStream_t s, const Mat& x, void* scratch);
void gemv_q8_0(cudaStream_t s, const Mat& out, int64_t x_rows, const Mat& w, const void* scratch);

// Inputs of the cuBLAS path: x as packed f16 or bf16 rows, and rows [first, first + rows) of
// a quantized weight decoded to packed bf16.
void to_half(cudaStream_t s, const Mat& x, bool bf16, uint16_t* dst);
void dequant_bf16(cudaStream_t s, const Mat& w, int64_t first, int64_t rows, uint16_t* dst);
#endif

// Paged causal attention (tsr_attention_params). One kernel serves prefill and decode: a
// block takes a tile of up to `rows_per_tile` query rows of one sequence and a group of
// `heads_per_block` query heads sharing one KV head (GQA: each K/V tile is loaded once for
// all of them), walks its keys in tiles with an online softmax, and, when the keys are
// split over `splits` blocks (Flash-Decoding, for batches too small to fill the device),
// leaves partial results that a second kernel combines.
struct AttentionPlan {
  int32_t heads_per_block = 1, rows_per_tile = 1, tile_keys = 32;
  int32_t tiles = 0;        // grid y: sum over sequences of ceil(query rows / rows_per_tile)
  int32_t splits = 1;       // grid z
  int32_t split_keys = 0;   // keys per split (a multiple of tile_keys)
  size_t shared_bytes = 0;
};

struct AttentionArgs {
  float* out;
  const float* q;
  // The caches in their dtypes (F32, F16, BF16, Q8_0, Q4_0, FP8_E4M3: gpu_decode.cuh), each
  // key decoded as its tile is loaded.
  const uint8_t* k_cache;
  const uint8_t* v_cache;
  int32_t k_dtype, v_dtype;
  int64_t k_stride, v_stride;  // bytes from one slot to the next
  int64_t out_stride, q_stride;  // in floats
  const int32_t* tables;
  const int32_t* qsl;
  const int32_t* pos;
  // [tiles][2]: sequence and first query row of each tile; NULL when every sequence has at
  // most rows_per_tile query rows, so that tile y is sequence y.
  const int32_t* tile_map;
  int32_t max_blocks, block_size;
  int32_t heads, kv_heads, head_dim;
  int64_t n;
  float scale;
  float* partial;  // [n, heads, splits, head_dim + 2] when splits > 1
  // The optional parts (tsr_attention_params), off when 0 / NULL: keys at positions
  // <= pos - window are masked, logits are softcapped, sinks[h] joins the denominator.
  int32_t window;
  float softcap;
  const float* sinks;
  // Tree attention (ABI 2.8), NULL: causal. [n]: each row's parent row or -1 (validated).
  const int32_t* parents;
};

// Tile sizes for a head shape; false when head_dim is too large for the kernel.
bool attention_tiles(int32_t heads, int32_t kv_heads, int32_t head_dim, AttentionPlan& plan);
void attention(cudaStream_t s, const AttentionArgs& a, const AttentionPlan& plan);

}  // namespace tsr::gpu
