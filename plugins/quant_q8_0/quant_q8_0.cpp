// The q8_0 quant plugin: see plugins/quant_common/formats.h and quant_formats/.
#include "plugins/quant_common/formats.h"
#include "plugins/quant_common/quant_plugin.h"

TSR_QUANT_PLUGIN(tsr::quant_plugin::Q8_0, "q8_0", "0.1.0")
