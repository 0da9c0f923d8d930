/* Quant plugins: weight formats. A plugin describes one scheme (its name, the dtype tag
 * its weights carry, its block geometry), converts f32 rows to and from it, computes the
 * reference dot product, and offers matmul kernels per backend. The host quantizes a
 * model's weights at load time (`[quant] scheme`) and runs each matmul on the backend's
 * own kernel when the backend supports the dtype, else registers the plugin's kernels for
 * that backend into it (backend.h, kernel_register): the backend then enqueues them on its
 * own stream like any op, also inside graphs, and the host never sees them. A scheme with
 * neither is refused at load, naming both. Added in ABI 1.1: the host refuses quant
 * plugins that claim ABI 1.0. ABI 2.0 gave kernels their operands as tensors and the
 * backend's stream (tsr_quant_matmul_args); a 1.x plugin's host-memory kernels run behind
 * the host's adapter on CPU backends.
 *
 * A quant plugin's tsr_plugin_desc has kind TSR_PLUGIN_QUANT and its `iface` points at a
 * static tsr_quant_iface.
 *
 * Thread-safety: every entry is thread-safe and stateless; kernels may use their own
 * threads (the CPU kernels use the process's OpenMP pool, `n_threads` of it). A kernel is
 * called by one backend thread at a time per stream, as the backend's ops are.
 */
#ifndef TESSERA_QUANT_H
#define TESSERA_QUANT_H

#include "tessera/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_quant_kernels tsr_quant_kernels;

/* One matmul of this scheme, as the backend the kernels are registered into calls it: the
 * operands are tensors in that backend's memory (device addresses on a GPU), `stream` is
 * the backend's own stream in its runtime's terms (NULL for "cpu", whose ops run before
 * they return; a cudaStream_t for "cuda" and "hip"), and the kernel enqueues its work
 * there and returns. */
typedef struct tsr_quant_matmul_args {
  size_t struct_size;
  const tsr_quant_kernels* kernels; /* the table the call came through */
  /* out[i, j] = sum_k x[i, k] * w[j, k]: x [m, k] f32, w [n, k] of this scheme (a row is
   * strides[0] bytes), out [m, n] f32; rows strided, elements contiguous. */
  const tsr_matmul_params* params;
  void* stream;
  int32_t n_threads;                /* host threads the backend uses (CPU backends) */
  int32_t reserved;
} tsr_quant_matmul_args;
TSR_ABI_PIN_SIZE(tsr_quant_matmul_args, 40);

/* Kernels of one scheme for one backend. */
struct tsr_quant_kernels {
  size_t struct_size;
  const char* backend; /* the backend plugin name they run on, e.g. "cpu" */
  tsr_status (*matmul)(const tsr_quant_matmul_args* args, tsr_error** error);
};
TSR_ABI_PIN_SIZE(tsr_quant_kernels, 24);

typedef struct tsr_quant_iface {
  size_t struct_size;
  const char* scheme;     /* e.g. "int4_g128"; equals the plugin's name */
  tsr_dtype dtype;        /* the dtype tag of weights in this scheme */
  int32_t block_elems;    /* a row's length must be a multiple of this */
  /* Bytes of one row of n elements (n a multiple of block_elems). */
  int64_t (*row_bytes)(int64_t n);
  /* `rows` rows of `cols` f32 values into rows of this scheme, row_bytes(cols) apart. */
  tsr_status (*quantize)(const float* x, int64_t rows, int64_t cols, void* out, tsr_error** error);
  /* The reference dequantization: the values the scheme stands for, exactly. */
  tsr_status (*dequantize)(const void* in, int64_t rows, int64_t cols, float* out,
                           tsr_error** error);
  /* The reference dot product of one row of this scheme with n f32 values. */
  tsr_status (*dot)(const void* row, const float* x, int64_t n, float* out, tsr_error** error);
  /* Kernels for the backend named `backend`, or NULL when the plugin has none for it. */
  const tsr_quant_kernels* (*kernels)(const char* backend);
  /* ABI 2.4. The scheme's numeric options from the host's [quant] table (e.g. llm_int8's
   * "outlier_threshold"), before any weight is quantized; NULL when the scheme has none.
   * An unknown key or a value out of range is refused with an error naming it. The
   * options are the plugin's, for every model loaded after the call (a process loading
   * two models with different options quantizes each before the other sets its own). */
  tsr_status (*option_set)(const char* key, double value, tsr_error** error);
} tsr_quant_iface;
TSR_ABI_PIN_SIZE(tsr_quant_iface, 72);
/* The table through ABI 2.3 (the host reads option_set only from longer tables). */
#define TSR_QUANT_IFACE_SIZE_V1_1 TSR_SIZE_THROUGH(tsr_quant_iface, kernels)

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_QUANT_H */
