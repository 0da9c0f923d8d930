/* Backend plugins: devices, memory, streams and the ops of a forward pass.
 *
 * A backend plugin's tsr_plugin_desc has kind TSR_PLUGIN_BACKEND and its `iface` points
 * at a static tsr_backend_reg_iface (the registry: devices, backend_create, get_proc),
 * whose `backend` points at the table of the backends it creates. Ops are data: one
 * `enqueue` entry takes a tsr_op_desc (an op identifier and its params struct), and
 * `supports` answers per op, dtype and operands.
 *
 * Memory model: the core asks the backend for buffers and addresses tensors inside them
 * by `tsr_tensor.data` (a device address for device backends). Host data moves only
 * through buffer_write / buffer_read. Every op is enqueued on a stream and may run
 * asynchronously; results are visible to the host after stream_synchronize or an event.
 *
 * Attention is paged from the start: the KV cache of every layer is a tensor of
 * [num_slots, n_kv_heads, head_dim]; slot = block * block_size + offset. A sequence's
 * blocks are listed in its row of `block_tables`; a single sequence uses a trivial table.
 *
 * Errors: every fallible entry takes one size-prefixed args struct (or, for enqueue, the
 * op desc), returns tsr_status and, when `error` is not NULL and the call fails, stores an error made with the host's error_new (the caller frees it with
 * the host's error_free). Asynchronous failures surface at the next synchronizing call.
 *
 * Thread-safety: the registry's entries are thread-safe. A tsr_backend and
 * everything created from it are externally synchronized: one thread at a time per
 * backend handle. Distinct backend handles may be used from distinct threads.
 */
#ifndef TESSERA_BACKEND_H
#define TESSERA_BACKEND_H

#include "tessera/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_backend tsr_backend; /* opaque, created and destroyed by the plugin */
typedef struct tsr_buffer tsr_buffer;
typedef struct tsr_stream tsr_stream;
typedef struct tsr_event tsr_event;
typedef struct tsr_graph tsr_graph; /* a recorded sequence of ops */

typedef enum tsr_device_type {
  TSR_DEVICE_CPU = 0,
  TSR_DEVICE_GPU = 1,
  TSR_DEVICE_ACCEL = 2
} tsr_device_type;

typedef struct tsr_device_props {
  size_t struct_size;
  char name[128];             /* NUL-terminated */
  tsr_device_type type;
  int32_t compute_units;      /* cores or multiprocessors */
  uint64_t memory_total;      /* bytes */
  uint64_t memory_free;       /* bytes, 0 when unknown */
  int32_t host_visible;       /* nonzero: tensor data pointers are host addresses */
  int32_t reserved;
} tsr_device_props;
TSR_ABI_PIN_SIZE(tsr_device_props, 168);

typedef struct tsr_backend_params {
  size_t struct_size;
  int32_t device;             /* index below device_count */
  int32_t n_threads;          /* host threads the backend may use; 0 = its default */
  const tsr_ext_header* next; /* can be NULL */
} tsr_backend_params;
TSR_ABI_PIN_SIZE(tsr_backend_params, 24);

/* Op identifiers. Appended to in later minors; a backend answers supports() with 0 and
 * enqueue with TSR_STATUS_UNSUPPORTED for an op it does not know. */
typedef enum tsr_op {
  TSR_OP_GET_ROWS = 0,
  TSR_OP_RMS_NORM = 1,
  TSR_OP_MATMUL = 2,
  TSR_OP_ROPE = 3,
  TSR_OP_KV_WRITE = 4,
  TSR_OP_ATTENTION = 5,
  TSR_OP_SILU_MUL = 6,
  TSR_OP_ADD = 7,
  TSR_OP_COPY_BLOCKS = 8,
  /* 2.0 */
  TSR_OP_MUL = 9,
  TSR_OP_SCALE = 10,
  TSR_OP_GELU = 11,
  TSR_OP_GELU_MUL = 12,
  TSR_OP_LAYER_NORM = 13,
  TSR_OP_BIAS_ADD = 14,
  TSR_OP_SOFTMAX = 15,
  TSR_OP_TOP_K = 16,
  TSR_OP_MATMUL_ID = 17,
  TSR_OP_SOFTCAP = 18,
  TSR_OP_CAST = 19,
  /* ABI 2.1 */
  TSR_OP_MOE_COMBINE = 20,
  /* ABI 2.4 */
  TSR_OP_SWIGLU_OAI = 21,
  TSR_OP_COUNT_ = 22
} tsr_op;

typedef enum tsr_rope_mode {
  TSR_ROPE_NORMAL = 0, /* rotate adjacent pairs (x[2i], x[2i+1]): llama */
  TSR_ROPE_NEOX = 1    /* rotate halves (x[i], x[i + n_rot/2]): GPT-NeoX, Qwen */
} tsr_rope_mode;

/* out[i, :] = table[ids[i], :] converted to f32. table: [rows, d] any supported dtype;
 * ids: [n] i32; out: [n, d] f32. */
typedef struct tsr_get_rows_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* table;
  const tsr_tensor* ids;
} tsr_get_rows_params;
TSR_ABI_PIN_SIZE(tsr_get_rows_params, 32);

/* out = x / sqrt(mean(x^2) + eps) * weight, per row. x, out: [n, d] f32; weight: [d] f32.
 * out may alias x. */
typedef struct tsr_rms_norm_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
  const tsr_tensor* weight;
  float eps;
  int32_t reserved;
} tsr_rms_norm_params;
TSR_ABI_PIN_SIZE(tsr_rms_norm_params, 40);

/* out = x · wᵀ. x: [n, k] f32; w: [m, k] in any dtype supports() accepts (GGUF row
 * layout: one output feature per row); out: [n, m] f32. */
typedef struct tsr_matmul_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
  const tsr_tensor* w;
} tsr_matmul_params;
TSR_ABI_PIN_SIZE(tsr_matmul_params, 32);

/* Rotary embedding in place. x: [n, heads, head_dim] f32; positions: [n] i32. The first
 * n_rot dims of each head rotate, pair i by pos * freq_scale * freq_base^(-2i/n_rot)
 * / freq_factors[i]. */
typedef struct tsr_rope_params {
  size_t struct_size;
  const tsr_tensor* x;
  const tsr_tensor* positions;
  int32_t n_rot;
  tsr_rope_mode mode;
  float freq_base;
  float freq_scale;
  /* Can be NULL (all factors 1): [n_rot / 2] f32, each finite and > 0 (Llama 3.1's
   * rope_freqs.weight, llama.cpp's ggml_rope_ext freq_factors). */
  const tsr_tensor* freq_factors;
  /* YaRN (llama.cpp's ggml_rope_ext): with ext_factor 0 the angle is the one above. Else
   * pair i's angle mixes the interpolated angle (with freq_scale) and the extrapolated one
   * (without) by ramp(i) * ext_factor, ramp(i) = 1 - clamp((i - corr_low) /
   * max(0.001, corr_high - corr_low), 0, 1), and cos and sin are scaled by attn_factor *
   * (1 + 0.1 ln(1 / freq_scale)). corr_low and corr_high are the pair indices the host
   * derives from the trained context and beta_fast / beta_slow (ggml_rope_yarn_corr_dims),
   * in [0, n_rot].
   * attn_factor scales cos and sin without YaRN too; 0 stands for 1, so that a struct
   * that leaves these fields zero is plain RoPE. Partial rotary is n_rot < head_dim. */
  float ext_factor;
  float attn_factor;
  float corr_low;
  float corr_high;
} tsr_rope_params;
TSR_ABI_PIN_SIZE(tsr_rope_params, 64);

/* k_cache[slot_mapping[i]] = k[i]; likewise v. k, v: [n, kv_heads, head_dim];
 * caches: [num_slots, kv_heads, head_dim]; slot_mapping: [n] i32, -1 skips the row.
 * Each head of a row is stored as one row of head_dim elements of the cache's dtype
 * (2.3: an FP8_E4M3 cache thus holds a scale per token and head, abi.h). */
typedef struct tsr_kv_write_params {
  size_t struct_size;
  const tsr_tensor* k_cache;
  const tsr_tensor* v_cache;
  const tsr_tensor* k;
  const tsr_tensor* v;
  const tsr_tensor* slot_mapping;
} tsr_kv_write_params;
TSR_ABI_PIN_SIZE(tsr_kv_write_params, 48);

/* Causal paged attention with GQA, for prefill and decode alike. The batch holds the
 * query tokens of num_seqs sequences, contiguous per sequence: sequence s owns rows
 * query_start_loc[s] .. query_start_loc[s+1]-1. Query row i at absolute position
 * positions[i] attends to its sequence's cached keys at positions 0 .. positions[i]
 * (already written by kv_write); seq_lens[s] is the number of cached tokens of s
 * visible to this step. Query head h reads KV head h / (heads / kv_heads).
 * q, out: [n, heads, head_dim] f32; caches: [num_slots, kv_heads, head_dim];
 * block_tables: [num_seqs, max_blocks] i32; seq_lens: [num_seqs] i32;
 * query_start_loc: [num_seqs + 1] i32; positions: [n] i32. */
typedef struct tsr_attention_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* q;
  const tsr_tensor* k_cache;
  const tsr_tensor* v_cache;
  const tsr_tensor* block_tables;
  const tsr_tensor* seq_lens;
  const tsr_tensor* query_start_loc;
  const tsr_tensor* positions;
  int32_t block_size;
  float scale;                /* usually 1/sqrt(head_dim) */
  /* Optional, each off when zero or NULL (supports() with the params says whether a
   * backend implements them):
   * - window > 0: query row at position p attends to keys at positions > p - window
   *   only (sliding-window layers of Gemma 2/3, Mistral);
   * - softcap > 0: each logit (after scale) becomes softcap * tanh(logit / softcap)
   *   (Gemma 2);
   * - sinks: [heads] f32, one extra logit per head that joins the softmax's denominator
   *   and attends to nothing (gpt-oss attention sinks). */
  int32_t window;
  float softcap;
  const tsr_tensor* sinks;
  /* ABI 2.8, optional (NULL: causal, as above): tree attention, which verifies a tree of
   * draft tokens in one pass. [n] i32: parents[i] is -1 or the index of an earlier row of
   * row i's sequence. Row i's path is its chain of parents up to a row with -1 (its
   * root), itself included: root = r_0, r_1, ..., r_d = i. Row i attends to the cached
   * keys at positions 0 .. positions[r_0] - 1 and then to the keys at positions[r_0],
   * positions[r_1], ..., positions[r_d], as one causal sequence in that order: it computes
   * what it would as the last row of a causal step holding its path, key for key (a
   * backend keeps the order of its reductions, so that a tree's row gives the bits the
   * same row gives in a chain). The window counts along that sequence: a row's position
   * there is positions[r_0] + d. A row whose parent is the row before it in the batch and
   * which itself is at the position after its parent's is causal as without parents. */
  const tsr_tensor* parents;
} tsr_attention_params;
TSR_ABI_PIN_SIZE(tsr_attention_params, 104);
/* The params through ABI 2.7 (no tree attention). */
#define TSR_ATTENTION_PARAMS_SIZE_V2_7 TSR_SIZE_THROUGH(tsr_attention_params, sinks)

/* out = silu(gate) * up, elementwise; all [n, d] f32. out may alias gate or up. */
typedef struct tsr_silu_mul_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* gate;
  const tsr_tensor* up;
} tsr_silu_mul_params;
TSR_ABI_PIN_SIZE(tsr_silu_mul_params, 32);

/* out = a + b, elementwise; all [n, d] f32. out may alias a or b. */
typedef struct tsr_add_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* a;
  const tsr_tensor* b;
} tsr_add_params;
TSR_ABI_PIN_SIZE(tsr_add_params, 32);

/* For every (src, dst) row of pairs ([n, 2] i32, block ids), copies block src to block
 * dst in each of the n_caches cache tensors ([num_slots, ...]): copy-on-write and swap. */
typedef struct tsr_copy_blocks_params {
  size_t struct_size;
  const tsr_tensor* const* caches;
  int32_t n_caches;
  int32_t block_size;
  const tsr_tensor* pairs;
} tsr_copy_blocks_params;
TSR_ABI_PIN_SIZE(tsr_copy_blocks_params, 32);

/* ---- ops of ABI 2.0 ----
 * Row ops: tensors are [n, d] f32 rows (strided rows, contiguous elements) unless a
 * comment says otherwise; out may alias an input of its shape. */

/* out = a * b, elementwise. */
typedef struct tsr_mul_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* a;
  const tsr_tensor* b;
} tsr_mul_params;
TSR_ABI_PIN_SIZE(tsr_mul_params, 32);

/* out = x * scale. */
typedef struct tsr_scale_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
  float scale;
  int32_t reserved;
} tsr_scale_params;
TSR_ABI_PIN_SIZE(tsr_scale_params, 32);

/* GELU, tanh form (llama.cpp's ggml_gelu): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
 * GELU: out = gelu(x); `up` is NULL. GELU_MUL: out = gelu(x) * up (GeGLU). A backend may
 * evaluate gelu at f16 precision, as llama.cpp's CPU backend does (x rounded to f16, the
 * result of a table of f16 values; 0 below -10, x above 10): the CPU plugin does. */
typedef struct tsr_gelu_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
  const tsr_tensor* up;
} tsr_gelu_params;
TSR_ABI_PIN_SIZE(tsr_gelu_params, 32);

/* out = (x - mean) / sqrt(var + eps) * weight + bias per row (var the biased variance);
 * weight, bias: [d] f32; bias can be NULL. */
typedef struct tsr_layer_norm_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
  const tsr_tensor* weight;
  const tsr_tensor* bias;
  float eps;
  int32_t reserved;
} tsr_layer_norm_params;
TSR_ABI_PIN_SIZE(tsr_layer_norm_params, 48);

/* out[i, :] = x[i, :] + bias[:]; bias: [d] f32. */
typedef struct tsr_bias_add_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
  const tsr_tensor* bias;
} tsr_bias_add_params;
TSR_ABI_PIN_SIZE(tsr_bias_add_params, 32);

/* out = softmax(x * scale) over each row. */
typedef struct tsr_softmax_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
  float scale;
  int32_t reserved;
} tsr_softmax_params;
TSR_ABI_PIN_SIZE(tsr_softmax_params, 32);

/* The k largest values of each row of x ([n, d] f32, 0 < k <= d), largest first, the
 * lower index first among equal values: ids [n, k] i32, values [n, k] f32 (MoE routing). */
typedef struct tsr_top_k_params {
  size_t struct_size;
  const tsr_tensor* ids;
  const tsr_tensor* values;
  const tsr_tensor* x;
  int32_t k;
  int32_t reserved;
} tsr_top_k_params;
TSR_ABI_PIN_SIZE(tsr_top_k_params, 40);

/* Grouped matmul of MoE layers (llama.cpp's ggml_mul_mat_id): for token i and slot s,
 * out[i, s, :] = x[i, s or 0, :] · w[ids[i, s]]ᵀ. w: [n_expert, m, k] in any dtype matmul
 * supports (one expert's matrix per outer index, GGUF row layout); ids: [n, n_used] i32,
 * each in [0, n_expert); x: [n, k] (every slot reads the token's row) or [n, n_used, k];
 * out: [n, n_used, m] f32. */
typedef struct tsr_matmul_id_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
  const tsr_tensor* w;
  const tsr_tensor* ids;
} tsr_matmul_id_params;
TSR_ABI_PIN_SIZE(tsr_matmul_id_params, 40);

/* out = cap * tanh(x / cap), cap > 0 (Gemma 2's final-logit softcapping). */
typedef struct tsr_softcap_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
  float cap;
  int32_t reserved;
} tsr_softcap_params;
TSR_ABI_PIN_SIZE(tsr_softcap_params, 32);

/* out = x converted elementwise between F32, F16 and BF16 (round to nearest even; a copy
 * when the dtypes are equal). Same shape, any rank; rows strided, elements contiguous. */
typedef struct tsr_cast_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
} tsr_cast_params;
TSR_ABI_PIN_SIZE(tsr_cast_params, 24);

/* ---- ops of ABI 2.1 ---- */

/* The weighted sum of a mixture-of-experts layer's expert outputs (llama.cpp's weighting
 * and view-add aggregation in build_moe_ffn): for each token i,
 *   w[s] = weights[i, s] / sum_t weights[i, t]   when normalize is nonzero, else weights[i, s];
 *   w[s] = w[s] * scale                           when scale is nonzero (0 stands for 1);
 *   out[i, :] = x[i, 0, :] * w[0] + x[i, 1, :] * w[1] + ...   in slot order, in f32.
 * x: [n, n_used, d] f32 (matmul_id's out); weights: [n, n_used] f32 (top_k's values, or
 * what the host made of them); out: [n, d] f32, which must not alias x or weights. A
 * normalized row whose weights sum to 0 gives NaN or infinities, as llama.cpp's does. */
typedef struct tsr_moe_combine_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* x;
  const tsr_tensor* weights;
  int32_t normalize;
  float scale;
} tsr_moe_combine_params;
TSR_ABI_PIN_SIZE(tsr_moe_combine_params, 40);

/* ---- ops of ABI 2.4 ---- */

/* gpt-oss's clamped SwiGLU (llama.cpp's ggml_swiglu_oai), elementwise in f32:
 *   g = min(gate, limit);  u = clamp(up, -limit, limit);
 *   out = g / (1 + exp(-alpha * g)) * (u + 1).
 * out, gate, up: the same shape, f32, rows strided, elements contiguous; out may alias
 * gate or up. alpha finite; limit > 0 and finite (gpt-oss: alpha 1.702, limit 7). */
typedef struct tsr_swiglu_oai_params {
  size_t struct_size;
  const tsr_tensor* out;
  const tsr_tensor* gate;
  const tsr_tensor* up;
  float alpha;
  float limit;
} tsr_swiglu_oai_params;
TSR_ABI_PIN_SIZE(tsr_swiglu_oai_params, 40);

/* ---- ops as data (ABI 2.0) ----
 * An op is its identifier and a pointer to its params struct above (the one its comment
 * names), both size-prefixed so either can grow in a later minor; `next` chains typed
 * extensions (tsr_ext_header) that a backend skips when it does not know them. */
typedef struct tsr_op_desc {
  size_t struct_size;
  tsr_op op;
  int32_t reserved;
  const void* params;         /* the op's params struct, e.g. const tsr_matmul_params* */
  const tsr_ext_header* next; /* can be NULL */
} tsr_op_desc;
TSR_ABI_PIN_SIZE(tsr_op_desc, 32);

/* What supports() is asked. `dtypes` are the operand dtypes that select a kernel (MATMUL,
 * MATMUL_ID: {weight}; GET_ROWS: {table}; ATTENTION, KV_WRITE, COPY_BLOCKS: {cache};
 * CAST: {x, out}; others: {TSR_DTYPE_F32}). `params` can be NULL: "ops of these dtypes in general"; when set it
 * is the op's params struct, and the answer is for those operands (their shapes and the
 * optional params they set, such as rope's freq_factors). */
typedef struct tsr_op_support_query {
  size_t struct_size;
  tsr_op op;
  int32_t n_dtypes;
  const tsr_dtype* dtypes;    /* n_dtypes entries */
  const void* params;         /* can be NULL */
} tsr_op_support_query;
TSR_ABI_PIN_SIZE(tsr_op_support_query, 32);

/* ---- args of the fallible entries (PJRT's rule: each can grow without a new entry).
 * The caller sets struct_size; fields marked "out" are written by the backend on
 * TSR_STATUS_OK. */

typedef struct tsr_backend_reg_iface tsr_backend_reg_iface;

typedef struct tsr_device_count_args {
  size_t struct_size;
  const tsr_backend_reg_iface* reg; /* the registry asked (the plugin's own table) */
  int32_t count;                    /* out */
  int32_t reserved;
} tsr_device_count_args;
TSR_ABI_PIN_SIZE(tsr_device_count_args, 24);

typedef struct tsr_device_props_args {
  size_t struct_size;
  const tsr_backend_reg_iface* reg;
  int32_t device;                   /* index below device_count */
  int32_t reserved;
  tsr_device_props* props;          /* out: the backend sets props->struct_size to its own */
} tsr_device_props_args;
TSR_ABI_PIN_SIZE(tsr_device_props_args, 32);

typedef struct tsr_backend_create_args {
  size_t struct_size;
  const tsr_backend_reg_iface* reg;
  const tsr_backend_params* params;
  tsr_backend* backend;             /* out: destroyed with backend_destroy */
} tsr_backend_create_args;
TSR_ABI_PIN_SIZE(tsr_backend_create_args, 32);

typedef struct tsr_buffer_alloc_args {
  size_t struct_size;
  tsr_backend* backend;
  uint64_t size;
  tsr_buffer* buffer;               /* out: freed with buffer_free */
} tsr_buffer_alloc_args;
TSR_ABI_PIN_SIZE(tsr_buffer_alloc_args, 32);

/* Wraps host memory the caller keeps alive (e.g. mmap'd weights) without copying. */
typedef struct tsr_buffer_from_host_args {
  size_t struct_size;
  tsr_backend* backend;
  void* ptr;
  uint64_t size;
  tsr_buffer* buffer;               /* out: freed with buffer_free (the memory stays the caller's) */
} tsr_buffer_from_host_args;
TSR_ABI_PIN_SIZE(tsr_buffer_from_host_args, 40);

typedef struct tsr_buffer_write_args {
  size_t struct_size;
  tsr_backend* backend;
  tsr_stream* stream;
  tsr_buffer* buffer;
  uint64_t offset;
  const void* src;                  /* read during the call */
  uint64_t size;
} tsr_buffer_write_args;
TSR_ABI_PIN_SIZE(tsr_buffer_write_args, 56);

/* The bytes are in `dst` once the stream is synchronized. */
typedef struct tsr_buffer_read_args {
  size_t struct_size;
  tsr_backend* backend;
  tsr_stream* stream;
  const tsr_buffer* buffer;
  uint64_t offset;
  void* dst;
  uint64_t size;
} tsr_buffer_read_args;
TSR_ABI_PIN_SIZE(tsr_buffer_read_args, 56);

typedef struct tsr_buffer_memset_args {
  size_t struct_size;
  tsr_backend* backend;
  tsr_stream* stream;
  tsr_buffer* buffer;
  uint64_t offset;
  uint64_t size;
  int32_t value;                    /* the byte value, as memset's */
  int32_t reserved;
} tsr_buffer_memset_args;
TSR_ABI_PIN_SIZE(tsr_buffer_memset_args, 56);

/* stream_create (stream is out), stream_synchronize and graph_begin. */
typedef struct tsr_stream_args {
  size_t struct_size;
  tsr_backend* backend;
  tsr_stream* stream;
} tsr_stream_args;
TSR_ABI_PIN_SIZE(tsr_stream_args, 24);

/* event_create (event is out), event_record (event on stream), event_wait (stream waits
 * for event without blocking the host) and event_synchronize (the host waits). */
typedef struct tsr_event_args {
  size_t struct_size;
  tsr_backend* backend;
  tsr_event* event;
  tsr_stream* stream;
} tsr_event_args;
TSR_ABI_PIN_SIZE(tsr_event_args, 32);

/* graph_end (graph is out, owned by the caller) and graph_launch. */
typedef struct tsr_graph_args {
  size_t struct_size;
  tsr_backend* backend;
  tsr_stream* stream;
  tsr_graph* graph;
} tsr_graph_args;
TSR_ABI_PIN_SIZE(tsr_graph_args, 32);

typedef struct tsr_weight_pack_args {
  size_t struct_size;
  tsr_backend* backend;
  const tsr_tensor* w;              /* [rows, cols] (2.5: or [n_expert, rows, cols]), read during the call only */
  tsr_tensor* packed;               /* out */
  tsr_buffer* buffer;               /* out: holds *packed, freed with buffer_free */
} tsr_weight_pack_args;
TSR_ABI_PIN_SIZE(tsr_weight_pack_args, 40);

typedef struct tsr_quant_kernels tsr_quant_kernels; /* quant.h */

/* Gives the backend a quant plugin's kernels (quant.h) for weights of `dtype`. */
typedef struct tsr_kernel_register_args {
  size_t struct_size;
  tsr_backend* backend;
  tsr_dtype dtype;                  /* the weight dtype the kernels multiply */
  int32_t reserved;
  /* Static data of a loaded quant plugin, kernels->backend naming this backend; the
   * caller keeps the plugin loaded while the backend lives. */
  const tsr_quant_kernels* kernels;
} tsr_kernel_register_args;
TSR_ABI_PIN_SIZE(tsr_kernel_register_args, 32);

/* ---- the backend level: one table for every backend a registry creates ---- */
typedef struct tsr_backend_iface {
  size_t struct_size;

  void (*backend_destroy)(tsr_backend* backend); /* NULL is ignored */
  /* Nonzero when the op described by `query` runs on this backend. Unknown ops, dtypes
   * and params are unsupported (0), never an error. */
  int32_t (*supports)(const tsr_backend* backend, const tsr_op_support_query* query);

  /* ---- buffers ---- */
  tsr_status (*buffer_alloc)(tsr_buffer_alloc_args* args, tsr_error** error);
  /* Can be NULL: the backend then needs buffer_alloc + buffer_write. */
  tsr_status (*buffer_from_host)(tsr_buffer_from_host_args* args, tsr_error** error);
  void (*buffer_free)(tsr_backend* backend, tsr_buffer* buffer); /* NULL is ignored */
  /* Address of the buffer's first byte, for tsr_tensor.data. */
  void* (*buffer_base)(const tsr_buffer* buffer);
  tsr_status (*buffer_write)(const tsr_buffer_write_args* args, tsr_error** error);
  tsr_status (*buffer_read)(const tsr_buffer_read_args* args, tsr_error** error);
  tsr_status (*buffer_memset)(const tsr_buffer_memset_args* args, tsr_error** error);

  /* ---- streams and events ---- */
  tsr_status (*stream_create)(tsr_stream_args* args, tsr_error** error);
  void (*stream_destroy)(tsr_backend* backend, tsr_stream* stream);
  tsr_status (*stream_synchronize)(const tsr_stream_args* args, tsr_error** error);
  tsr_status (*event_create)(tsr_event_args* args, tsr_error** error);
  void (*event_destroy)(tsr_backend* backend, tsr_event* event);
  tsr_status (*event_record)(const tsr_event_args* args, tsr_error** error);
  tsr_status (*event_wait)(const tsr_event_args* args, tsr_error** error);
  tsr_status (*event_synchronize)(const tsr_event_args* args, tsr_error** error);

  /* ---- ops ----
   * Enqueues `op` on `stream` (NULL: the backend's default stream). An op or params the
   * backend does not know fails with TSR_STATUS_UNSUPPORTED; bad operands with
   * TSR_STATUS_INVALID_ARGUMENT, before anything is written. */
  tsr_status (*enqueue)(tsr_backend* backend, tsr_stream* stream, const tsr_op_desc* op,
                        tsr_error** error);

  /* ---- graphs (all four NULL when the backend cannot record) ----
   * graph_begin starts recording the ops enqueued on `stream` (not NULL): until graph_end
   * they are recorded, not run, and nothing else may be enqueued on that stream (no buffer
   * write, read or memset, no synchronize). graph_end ends the recording and returns the
   * graph; it always ends it, also when it fails. Launching a graph replays its ops with the
   * operands they were recorded with (tensor addresses, shapes, scalars), reading whatever
   * those addresses hold at launch: the caller changes inputs by writing into the same
   * buffers between launches. A backend checks operands when it records an op (an op
   * refused then voids the recording: graph_end fails) or when it launches the graph (the
   * launch fails). A device backend may check index operands only when recording: the
   * caller keeps what it writes into them within the limits they had then (ids, slots and
   * blocks in range, no sequence longer than its block table's width). A graph is destroyed
   * before the backend; the buffers its ops use outlive it. One thread at a time, as the
   * backend. */
  tsr_status (*graph_begin)(const tsr_stream_args* args, tsr_error** error);
  tsr_status (*graph_end)(tsr_graph_args* args, tsr_error** error);
  tsr_status (*graph_launch)(const tsr_graph_args* args, tsr_error** error);
  void (*graph_destroy)(tsr_backend* backend, tsr_graph* graph); /* NULL is ignored */

  /* ---- weight packing (NULL: every weight stays as stored) ----
   * Offers the matmul weight `w` to be kept in a layout of the backend's own, as
   * llama.cpp's CPU backend repacks weights for its kernels. On TSR_STATUS_OK the backend
   * has allocated `buffer` and filled `packed` with a tensor over it: w's shape, dtype
   * TSR_DTYPE_PACKED, which this backend's matmul accepts as the weight operand in place
   * of w with the same results (within rounding), and no other op reads. On
   * TSR_STATUS_UNSUPPORTED (no error object) the backend keeps no layout of its own for
   * such a weight and leaves the outs alone. The call completes before it returns (no
   * stream). Since 2.5 the host also offers matmul_id's expert weights, [n_expert, rows,
   * cols] with the experts one after the other; their packed tensor keeps that shape and
   * matmul_id takes it as its weight. A host offers those only to a backend built for 2.5
   * or later; one that keeps no layout for them answers UNSUPPORTED. */
  tsr_status (*weight_pack)(tsr_weight_pack_args* args, tsr_error** error);

  /* ---- kernels of quant plugins (NULL: the backend takes none) ----
   * After it, supports(MATMUL, {dtype}) answers 1 and every matmul whose weight has that
   * dtype runs on kernels->matmul, called by the backend on the stream of the enqueue
   * (recorded into graphs like any op). A dtype the backend multiplies itself, or one that
   * has other kernels already, is refused (TSR_STATUS_INVALID_ARGUMENT); registering the
   * same kernels again does nothing. One thread at a time, as the backend. */
  tsr_status (*kernel_register)(const tsr_kernel_register_args* args, tsr_error** error);
} tsr_backend_iface;
TSR_ABI_PIN_SIZE(tsr_backend_iface, 200);

/* ---- the registry level: devices without a backend, named optional features ----
 * A backend plugin's tsr_plugin_desc.iface points at its static registry. Every entry is
 * thread-safe. */
struct tsr_backend_reg_iface {
  size_t struct_size;
  /* Number of usable devices. A plugin whose driver or device is absent fails with
   * TSR_STATUS_DEVICE_ERROR and a message, never crashes. */
  tsr_status (*device_count)(tsr_device_count_args* args, tsr_error** error);
  tsr_status (*device_props)(tsr_device_props_args* args, tsr_error** error);
  tsr_status (*backend_create)(tsr_backend_create_args* args, tsr_error** error);
  /* The address of the optional feature `name` (NUL-terminated; its header documents the
   * function's type), or NULL when the plugin has none of that name. Can be NULL. */
  void* (*get_proc)(const tsr_backend_reg_iface* reg, const char* name);
  const tsr_backend_iface* backend; /* the table of the backends this registry creates */
};
TSR_ABI_PIN_SIZE(tsr_backend_reg_iface, 48);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_BACKEND_H */
