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

static tsr_status device_count(tsr_device_count_args* a, tsr_error** error) {
  (void)error;
  a->count = 0;
  return TSR_STATUS_OK;
}
static tsr_status device_props(tsr_device_props_args* a, tsr_error** e) { (void)a; return fail(e); }
static tsr_status backend_create(tsr_backend_create_args* a, tsr_error** e) { (void)a; return fail(e); }
static void backend_destroy(tsr_backend* b) { (void)b; }
static int32_t supports(const tsr_backend* b, const tsr_op_support_query* q) { (void)b; (void)q; return 0; }
static tsr_status buffer_alloc(tsr_buffer_alloc_args* a, tsr_error** e) { (void)a; return fail(e); }
static void buffer_free(tsr_backend* b, tsr_buffer* buf) { (void)b; (void)buf; }
static void* buffer_base(const tsr_buffer* b) { (void)b; return NULL; }
static tsr_status buffer_write(const tsr_buffer_write_args* a, tsr_error** e) { (void)a; return fail(e); }
static tsr_status buffer_read(const tsr_buffer_read_args* a, tsr_error** e) { (void)a; return fail(e); }
static tsr_status buffer_memset(const tsr_buffer_memset_args* a, tsr_error** e) { (void)a; return fail(e); }
static tsr_status stream_create(tsr_stream_args* a, tsr_error** e) { (void)a; return fail(e); }
static void stream_destroy(tsr_backend* b, tsr_stream* s) { (void)b; (void)s; }
static tsr_status stream_synchronize(const tsr_stream_args* a, tsr_error** e) { (void)a; return fail(e); }
static tsr_status event_create(tsr_event_args* a, tsr_error** e) { (void)a; return fail(e); }
static void event_destroy(tsr_backend* b, tsr_event* ev) { (void)b; (void)ev; }
static tsr_status event_use(const tsr_event_args* a, tsr_error** e) { (void)a; return fail(e); }
static tsr_status enqueue(tsr_backend* b, tsr_stream* s, const tsr_op_desc* d, tsr_error** e) { (void)b; (void)s; (void)d; return fail(e); }

#ifdef BROKEN_PARTIAL_GRAPHS
static tsr_status fail_graph_begin(const tsr_stream_args* a, tsr_error** e) { (void)a; return fail(e); }
#endif

static const tsr_backend_iface g_backend = {
#ifdef BROKEN_SMALL_TABLE
    16,
#else
    sizeof(tsr_backend_iface),
#endif
    backend_destroy, supports,
    buffer_alloc, NULL, buffer_free, buffer_base, buffer_write, buffer_read, buffer_memset,
    stream_create, stream_destroy, stream_synchronize,
    event_create, event_destroy, event_use, event_use, event_use,
#ifdef BROKEN_MISSING_ENTRY
    NULL,
#else
    enqueue,
#endif
#ifdef BROKEN_PARTIAL_GRAPHS
    fail_graph_begin, NULL, NULL, NULL,
#else
    NULL, NULL, NULL, NULL,
#endif
    NULL, NULL,
};

static const tsr_backend_reg_iface g_iface = {
    sizeof(tsr_backend_reg_iface), device_count, device_props, backend_create, NULL, &g_backend,
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
