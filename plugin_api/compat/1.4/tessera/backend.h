/* Backend plugins: devices, memory, streams and the ops of a llama-family forward pass.
 *
 * A backend plugin's tsr_plugin_desc has kind TSR_PLUGIN_BACKEND and its `iface` points
 * at a static tsr_backend_iface.
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
 * Errors: every fallible entry returns tsr_status and, when `error` is not NULL and the
 * call fails, stores an error made with the host's error_new (the caller frees it with
 * the host's error_free). Asynchronous failures surface at the next synchronizing call.
 *
 * Thread-safety: device_count and device_props are thread-safe. A tsr_backend and
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
typedef struct tsr_graph tsr_graph; /* ABI 1.2: a recorded sequence of ops */

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

/* Op identifiers for supports(). */
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
  TSR_OP_COUNT_ = 9
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
  /* ABI 1.4. Can be NULL (all factors 1): [n_rot / 2] f32, each finite and > 0 (Llama
   * 3.1's rope_freqs.weight, llama.cpp's ggml_rope_ext freq_factors). The host passes
   * it only to backends built for 1.4 or newer; a model that needs it does not load on
   * an older one. */
  const tsr_tensor* freq_factors;
} tsr_rope_params;
TSR_ABI_PIN_SIZE(tsr_rope_params, 48);

/* k_cache[slot_mapping[i]] = k[i]; likewise v. k, v: [n, kv_heads, head_dim];
 * caches: [num_slots, kv_heads, head_dim]; slot_mapping: [n] i32, -1 skips the row. */
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
} tsr_attention_params;
TSR_ABI_PIN_SIZE(tsr_attention_params, 80);

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

typedef struct tsr_backend_iface {
  size_t struct_size;

  /* ---- devices (thread-safe) ---- */
  /* Number of usable devices. A plugin whose driver or device is absent returns
   * TSR_STATUS_DEVICE_ERROR with a message, never crashes. */
  tsr_status (*device_count)(int32_t* count, tsr_error** error);
  tsr_status (*device_props)(int32_t device, tsr_device_props* props, tsr_error** error);

  /* ---- backend handle ---- */
  tsr_status (*backend_create)(const tsr_backend_params* params, tsr_backend** out,
                               tsr_error** error);
  void (*backend_destroy)(tsr_backend* backend); /* NULL is ignored */
  /* Nonzero when `op` runs with these operand dtypes. MATMUL: {weight dtype};
   * GET_ROWS: {table dtype}; ATTENTION, KV_WRITE, COPY_BLOCKS: {cache dtype};
   * others: {TSR_DTYPE_F32}. */
  int32_t (*supports)(const tsr_backend* backend, tsr_op op, const tsr_dtype* dtypes,
                      int32_t n_dtypes);

  /* ---- buffers ---- */
  tsr_status (*buffer_alloc)(tsr_backend* backend, uint64_t size, tsr_buffer** out,
                             tsr_error** error);
  /* Wraps host memory the caller keeps alive (e.g. mmap'd weights) without copying.
   * Can be NULL: the backend then needs buffer_alloc + buffer_write. */
  tsr_status (*buffer_from_host)(tsr_backend* backend, void* ptr, uint64_t size,
                                 tsr_buffer** out, tsr_error** error);
  void (*buffer_free)(tsr_backend* backend, tsr_buffer* buffer); /* NULL is ignored */
  /* Address of the buffer's first byte, for tsr_tensor.data. */
  void* (*buffer_base)(const tsr_buffer* buffer);
  tsr_status (*buffer_write)(tsr_backend* backend, tsr_stream* stream, tsr_buffer* dst,
                             uint64_t offset, const void* src, uint64_t size,
                             tsr_error** error);
  /* The bytes are in `dst` once the stream is synchronized. */
  tsr_status (*buffer_read)(tsr_backend* backend, tsr_stream* stream, const tsr_buffer* src,
                            uint64_t offset, void* dst, uint64_t size, tsr_error** error);
  tsr_status (*buffer_memset)(tsr_backend* backend, tsr_stream* stream, tsr_buffer* dst,
                              uint64_t offset, int value, uint64_t size, tsr_error** error);

  /* ---- streams and events ---- */
  tsr_status (*stream_create)(tsr_backend* backend, tsr_stream** out, tsr_error** error);
  void (*stream_destroy)(tsr_backend* backend, tsr_stream* stream);
  tsr_status (*stream_synchronize)(tsr_backend* backend, tsr_stream* stream,
                                   tsr_error** error);
  tsr_status (*event_create)(tsr_backend* backend, tsr_event** out, tsr_error** error);
  void (*event_destroy)(tsr_backend* backend, tsr_event* event);
  tsr_status (*event_record)(tsr_backend* backend, tsr_event* event, tsr_stream* stream,
                             tsr_error** error);
  /* Makes `stream` wait for `event` without blocking the host. */
  tsr_status (*event_wait)(tsr_backend* backend, tsr_stream* stream, tsr_event* event,
                           tsr_error** error);
  tsr_status (*event_synchronize)(tsr_backend* backend, tsr_event* event, tsr_error** error);

  /* ---- ops (enqueued on `stream`) ---- */
  tsr_status (*get_rows)(tsr_backend* b, tsr_stream* s, const tsr_get_rows_params* p,
                         tsr_error** error);
  tsr_status (*rms_norm)(tsr_backend* b, tsr_stream* s, const tsr_rms_norm_params* p,
                         tsr_error** error);
  tsr_status (*matmul)(tsr_backend* b, tsr_stream* s, const tsr_matmul_params* p,
                       tsr_error** error);
  tsr_status (*rope)(tsr_backend* b, tsr_stream* s, const tsr_rope_params* p,
                     tsr_error** error);
  tsr_status (*kv_write)(tsr_backend* b, tsr_stream* s, const tsr_kv_write_params* p,
                         tsr_error** error);
  tsr_status (*attention)(tsr_backend* b, tsr_stream* s, const tsr_attention_params* p,
                          tsr_error** error);
  tsr_status (*silu_mul)(tsr_backend* b, tsr_stream* s, const tsr_silu_mul_params* p,
                         tsr_error** error);
  tsr_status (*add)(tsr_backend* b, tsr_stream* s, const tsr_add_params* p,
                    tsr_error** error);
  tsr_status (*copy_blocks)(tsr_backend* b, tsr_stream* s, const tsr_copy_blocks_params* p,
                            tsr_error** error);

  /* ---- graphs (ABI 1.2; all four NULL when the backend cannot record) ----
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
  tsr_status (*graph_begin)(tsr_backend* b, tsr_stream* s, tsr_error** error);
  /* *out receives the graph (owned by the caller, freed with graph_destroy). */
  tsr_status (*graph_end)(tsr_backend* b, tsr_stream* s, tsr_graph** out, tsr_error** error);
  tsr_status (*graph_launch)(tsr_backend* b, tsr_stream* s, const tsr_graph* g,
                             tsr_error** error);
  void (*graph_destroy)(tsr_backend* b, tsr_graph* g); /* NULL is ignored */

  /* ---- weight packing (ABI 1.3; NULL: every weight stays as stored) ----
   * Offers the matmul weight `w` ([rows, cols], not NULL) to be kept in a layout of the
   * backend's own, as llama.cpp's CPU backend repacks weights for its kernels. On
   * TSR_STATUS_OK the backend has allocated *buffer (owned by the caller, freed with
   * buffer_free) and filled *packed (not NULL) with a tensor over it: w's shape, dtype
   * TSR_DTYPE_PACKED, which this backend's matmul accepts as the weight operand in place
   * of w with the same results (within rounding), and no other op reads. On
   * TSR_STATUS_UNSUPPORTED (no error object) the backend keeps no layout of its own for
   * such a weight and leaves *packed and *buffer alone. w is read during the call only;
   * the call completes before it returns (no stream). One thread at a time, as the
   * backend. */
  tsr_status (*weight_pack)(tsr_backend* b, const tsr_tensor* w, tsr_tensor* packed,
                            tsr_buffer** buffer, tsr_error** error);
} tsr_backend_iface;
TSR_ABI_PIN_SIZE(tsr_backend_iface, 280);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_BACKEND_H */
