/* A quant plugin that claims ABI 1.0, a minor without quant plugins (they came with 1.1):
 * the core's loader and tessera-conformance must refuse it. Its table is never called; the
 * refusal comes first. */
#include "tessera/quant.h"

static const tsr_quant_iface g_iface = {sizeof(tsr_quant_iface), "claims_1_0", TSR_DTYPE_PLUGIN, 32};

static const tsr_plugin_desc g_desc = {
    sizeof(tsr_plugin_desc), 1, 0, TSR_PLUGIN_QUANT, "claims_1_0", "0.1.0", &g_iface,
};

TSR_EXPORT const tsr_plugin_desc* tsr_plugin_query(const tsr_host_api* host, uint32_t major,
                                                   uint32_t minor) {
  (void)host;
  (void)major;
  (void)minor;
  return &g_desc;
}
