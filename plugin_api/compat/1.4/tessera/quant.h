/* Quant plugins: weight formats. A plugin describes one scheme (its name, the dtype tag
 * its weights carry, its block geometry), converts f32 rows to and from it, computes the
 * reference dot product, and offers matmul kernels per backend. The host quantizes a
 * model's weights at load time (`[quant] scheme`) and runs each matmul on the backend's
 * own kernel when the backend supports the dtype, else on the plugin's kernel for that
 * backend; a scheme with neither is refused at load, naming both. Added in ABI 1.1: the
 * host refuses quant plugins that claim ABI 1.0.
 *
 * A quant plugin's tsr_plugin_desc has kind TSR_PLUGIN_QUANT and its `iface` points at a
 * static tsr_quant_iface.
 *
 * Thread-safety: every entry is thread-safe and stateless; kernels may use their own
 * threads (the CPU kernels use the process's OpenMP pool, `n_threads` of it).
 */
#ifndef TESSERA_QUANT_H
#define TESSERA_QUANT_H

#include "tessera/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kernels of one scheme for one backend. Pointers are in that backend's memory (host
 * memory for "cpu"). */
typedef struct tsr_quant_kernels {
  size_t struct_size;
  const char* backend; /* the backend plugin name they run on, e.g. "cpu" */
  /* y[i, j] = sum_k x[i, k] * W[j, k] for i < m, j < n: x is m f32 rows of k elements
   * (x_stride floats apart), W is n rows of this scheme (w_row_bytes apart), y is m f32
   * rows (y_stride floats apart). */
  tsr_status (*matmul)(const float* x, int64_t x_stride, int64_t m, int64_t k, const void* w,
                       int64_t w_row_bytes, int64_t n, float* y, int64_t y_stride,
                       int32_t n_threads, tsr_error** error);
} tsr_quant_kernels;
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
} tsr_quant_iface;
TSR_ABI_PIN_SIZE(tsr_quant_iface, 64);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_QUANT_H */
