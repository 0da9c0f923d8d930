/* A draft plugin whose `needs` the host cannot serve, chosen at compile time (BROKEN_*):
 * the host must refuse it before draft_create, naming the need. Its entries all fail. */
#include <stddef.h>

#include "tessera/draft.h"

#ifndef PLUGIN_NAME
#error "PLUGIN_NAME must be defined"
#endif

static const tsr_host_api* g_host;

static tsr_status fail(tsr_error** error) {
  static const char msg[] = "broken draft plugin: created although its needs cannot be served";
  if (error && g_host) *error = g_host->error_new(TSR_STATUS_INTERNAL, msg, sizeof msg - 1);
  return TSR_STATUS_INTERNAL;
}

static tsr_status draft_create(const tsr_draft_params* p, tsr_draft** out, tsr_error** e) { (void)p; (void)out; return fail(e); }
static void draft_destroy(tsr_draft* d) { (void)d; }
static tsr_status seq_create(tsr_draft* d, const int32_t* p, size_t n, tsr_draft_seq** out, tsr_error** e) {
  (void)d; (void)p; (void)n; (void)out;
  return fail(e);
}
static void seq_destroy(tsr_draft* d, tsr_draft_seq* s) { (void)d; (void)s; }
static tsr_status propose(tsr_draft* d, tsr_draft_seq* s, const int32_t* h, size_t n, tsr_draft_proposal* p,
                          tsr_error** e) {
  (void)d; (void)s; (void)h; (void)n; (void)p;
  return fail(e);
}
static tsr_status on_verified(tsr_draft* d, tsr_draft_seq* s, int32_t a, int32_t t, tsr_error** e) {
  (void)d; (void)s; (void)a; (void)t;
  return fail(e);
}

static const tsr_draft_iface g_iface = {
    sizeof(tsr_draft_iface),
#if defined(BROKEN_HIDDEN_NEEDS)
    TSR_DRAFT_NEEDS_TOKENS | TSR_DRAFT_NEEDS_HIDDEN,
#else
    TSR_DRAFT_NEEDS_TOKENS | 0x100u,
#endif
    0, draft_create, draft_destroy, seq_create, seq_destroy, propose, on_verified,
};

static tsr_plugin_desc g_desc = {
    sizeof(tsr_plugin_desc), TSR_ABI_MAJOR, TSR_ABI_MINOR, TSR_PLUGIN_DRAFT, PLUGIN_NAME, "0.0.1", &g_iface,
};

TSR_EXPORT const tsr_plugin_desc* tsr_plugin_query(const tsr_host_api* host, uint32_t major, uint32_t minor) {
  (void)minor;
  if (major != TSR_ABI_MAJOR) return NULL;
  g_host = host;
  return &g_desc;
}
