// The int4_g128 quant plugin: see plugins/quant_common/formats.h and quant_formats/.
#include "plugins/quant_common/formats.h"
#include "plugins/quant_common/quant_plugin.h"

TSR_QUANT_PLUGIN(tsr::quant_plugin::Int4G128, "int4_g128", "0.1.0")
