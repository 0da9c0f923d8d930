// The q4_0 quant plugin: see plugins/quant_common/formats.h and quant_formats/.
#include "plugins/quant_common/formats.h"
#include "plugins/quant_common/quant_plugin.h"

TSR_QUANT_PLUGIN(tsr::quant_plugin::Q4_0, "q4_0", "0.1.0")
