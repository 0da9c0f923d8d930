// The fp8_e4m3 quant plugin: see plugins/quant_common/formats.h and quant_formats/.
#include "plugins/quant_common/formats.h"
#include "plugins/quant_common/quant_plugin.h"

TSR_QUANT_PLUGIN(tsr::quant_plugin::Fp8E4m3, "fp8_e4m3", "0.1.0")
