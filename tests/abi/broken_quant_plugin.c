/* A quant plugin that loads cleanly but declares a dtype its rows do not have, chosen at
 * compile time: BROKEN_GEOMETRY tags Q8_0 with blocks of 64 elements in 34 bytes (half the
 * bytes Q8_0 rows take), BROKEN_DTYPE tags its weights as i32. The host must refuse both
 * before a backend addresses the rows by the tag. */
#include <stddef.h>

#include "tessera/quant.h"

#ifndef PLUGIN_NAME
#error "PLUGIN_NAME must be defined"
#endif

static tsr_status fail(tsr_error** error) {
  (void)error;
  return TSR_STATUS_UNSUPPORTED;
}

static int64_t row_bytes(int64_t n) { return n / 64 * 34; }
static tsr_status quantize(const float* x, int64_t rows, int64_t cols, void* out, tsr_error** e) {
  (void)x; (void)rows; (void)cols; (void)out;
  return fail(e);
}
static tsr_status dequantize(const void* in, int64_t rows, int64_t cols, float* out, tsr_error** e) {
  (void)in; (void)rows; (void)cols; (void)out;
  return fail(e);
}
static tsr_status dot(const void* row, const float* x, int64_t n, float* out, tsr_error** e) {
  (void)row; (void)x; (void)n; (void)out;
  return fail(e);
}
static const tsr_quant_kernels* kernels(const char* backend) {
  (void)backend;
  return NULL;
}

#ifdef BROKEN_GEOMETRY
#define DTYPE TSR_DTYPE_Q8_0
#else
#define DTYPE TSR_DTYPE_I32
#endif

static const tsr_quant_iface g_iface = {
    sizeof(tsr_quant_iface), PLUGIN_NAME, DTYPE, 64, row_bytes, quantize, dequantize, dot, kernels,
};

static const tsr_plugin_desc g_desc = {
    sizeof(tsr_plugin_desc), TSR_ABI_MAJOR, TSR_ABI_MINOR, TSR_PLUGIN_QUANT, PLUGIN_NAME, "0.0.1", &g_iface,
};

TSR_EXPORT const tsr_plugin_desc* tsr_plugin_query(const tsr_host_api* host, uint32_t major, uint32_t minor) {
  (void)host; (void)major; (void)minor;
  return &g_desc;
}
