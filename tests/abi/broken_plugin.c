/* A backend plugin broken in exactly one way, chosen at compile time (BROKEN_*), so that
 * the host's refusal of each defect can be tested. Without a BROKEN_* define it is a
 * well-formed plugin whose entries all fail cleanly. */
#include <stddef.h>

#include "tessera/backend.h"

#ifndef PLUGIN_NAME
#error "PLUGIN_NAME must be defined"
#endif

static const tsr_host_api* g_host;

static tsr_status fail(tsr_error** error) {
  static const char msg[] = "broken test plugin";
  if (error && g_host) *error = g_host->error_new(TSR_STATUS_UNSUPPORTED, msg, sizeof msg - 1);
  return TSR_STATUS_UNSUPPORTED;
}

static tsr_status device_count(int32_t* count, tsr_error** error) {
  (void)error;
  *count = 0;
  return TSR_STATUS_OK;
}
static tsr_status device_props(int32_t d, tsr_device_props* p, tsr_error** e) { (void)d; (void)p; return fail(e); }
static tsr_status backend_create(const tsr_backend_params* p, tsr_backend** o, tsr_error** e) { (void)p; (void)o; return fail(e); }
static void backend_destroy(tsr_backend* b) { (void)b; }
static int32_t supports(const tsr_backend* b, tsr_op op, const tsr_dtype* d, int32_t n) { (void)b; (void)op; (void)d; (void)n; return 0; }
static tsr_status buffer_alloc(tsr_backend* b, uint64_t s, tsr_buffer** o, tsr_error** e) { (void)b; (void)s; (void)o; return fail(e); }
static void buffer_free(tsr_backend* b, tsr_buffer* buf) { (void)b; (void)buf; }
static void* buffer_base(const tsr_buffer* b) { (void)b; return NULL; }
static tsr_status buffer_write(tsr_backend* b, tsr_stream* s, tsr_buffer* d, uint64_t o, const void* src, uint64_t n, tsr_error** e) { (void)b; (void)s; (void)d; (void)o; (void)src; (void)n; return fail(e); }
static tsr_status buffer_read(tsr_backend* b, tsr_stream* s, const tsr_buffer* src, uint64_t o, void* d, uint64_t n, tsr_error** e) { (void)b; (void)s; (void)src; (void)o; (void)d; (void)n; return fail(e); }
static tsr_status buffer_memset(tsr_backend* b, tsr_stream* s, tsr_buffer* d, uint64_t o, int v, uint64_t n, tsr_error** e) { (void)b; (void)s; (void)d; (void)o; (void)v; (void)n; return fail(e); }
static tsr_status stream_create(tsr_backend* b, tsr_stream** o, tsr_error** e) { (void)b; (void)o; return fail(e); }
static void stream_destroy(tsr_backend* b, tsr_stream* s) { (void)b; (void)s; }
static tsr_status stream_synchronize(tsr_backend* b, tsr_stream* s, tsr_error** e) { (void)b; (void)s; return fail(e); }
static tsr_status event_create(tsr_backend* b, tsr_event** o, tsr_error** e) { (void)b; (void)o; return fail(e); }
static void event_destroy(tsr_backend* b, tsr_event* ev) { (void)b; (void)ev; }
static tsr_status event_record(tsr_backend* b, tsr_event* ev, tsr_stream* s, tsr_error** e) { (void)b; (void)ev; (void)s; return fail(e); }
static tsr_status event_wait(tsr_backend* b, tsr_stream* s, tsr_event* ev, tsr_error** e) { (void)b; (void)s; (void)ev; return fail(e); }
static tsr_status event_synchronize(tsr_backend* b, tsr_event* ev, tsr_error** e) { (void)b; (void)ev; return fail(e); }

#define OP(name, type) \
  static tsr_status name(tsr_backend* b, tsr_stream* s, const type* p, tsr_error** e) { (void)b; (void)s; (void)p; return fail(e); }
OP(get_rows, tsr_get_rows_params)
OP(rms_norm, tsr_rms_norm_params)
OP(matmul, tsr_matmul_params)
OP(rope, tsr_rope_params)
OP(kv_write, tsr_kv_write_params)
OP(attention, tsr_attention_params)
OP(silu_mul, tsr_silu_mul_params)
OP(add, tsr_add_params)
OP(copy_blocks, tsr_copy_blocks_params)

#ifdef BROKEN_PARTIAL_GRAPHS
static tsr_status fail_graph_begin(tsr_backend* b, tsr_stream* s, tsr_error** e) { (void)b; (void)s; return fail(e); }
#endif

static tsr_backend_iface g_iface = {
#ifdef BROKEN_SMALL_TABLE
    16,
#else
    sizeof(tsr_backend_iface),
#endif
    device_count, device_props, backend_create, backend_destroy, supports,
    buffer_alloc, NULL, buffer_free, buffer_base, buffer_write, buffer_read, buffer_memset,
    stream_create, stream_destroy, stream_synchronize,
    event_create, event_destroy, event_record, event_wait, event_synchronize,
    get_rows, rms_norm,
#ifdef BROKEN_MISSING_ENTRY
    NULL,
#else
    matmul,
#endif
    rope, kv_write, attention, silu_mul, add, copy_blocks,
#ifdef BROKEN_PARTIAL_GRAPHS
    fail_graph_begin, NULL, NULL, NULL,
#endif
};

static tsr_plugin_desc g_desc = {
#ifdef BROKEN_SMALL_DESC
    8,
#else
    sizeof(tsr_plugin_desc),
#endif
#ifdef BROKEN_MAJOR
    TSR_ABI_MAJOR + 1,
#else
    TSR_ABI_MAJOR,
#endif
#ifdef BROKEN_NEWER_MINOR
    TSR_ABI_MINOR + 1,
#else
    TSR_ABI_MINOR,
#endif
#ifdef BROKEN_WRONG_KIND
    TSR_PLUGIN_QUANT,
#else
    TSR_PLUGIN_BACKEND,
#endif
#ifdef BROKEN_WRONG_NAME
    "somebody_else",
#else
    PLUGIN_NAME,
#endif
    "0.0.1",
#ifdef BROKEN_NULL_TABLE
    NULL,
#else
    &g_iface,
#endif
};

#ifndef BROKEN_NO_SYMBOL
TSR_EXPORT const tsr_plugin_desc* tsr_plugin_query(const tsr_host_api* host, uint32_t major,
                                                    uint32_t minor) {
  (void)major;
  (void)minor;
  g_host = host;
#ifdef BROKEN_DECLINES
  static const char msg[] = "test plugin declines: it needs a device this host lacks";
  host->log(TSR_LOG_ERROR, msg, sizeof msg - 1);
  return NULL;
#else
  return &g_desc;
#endif
}
#endif
