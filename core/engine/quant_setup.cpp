#include "core/engine/quant_setup.h"

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "core/quant/imatrix.h"

namespace tsr {

std::shared_ptr<const QuantScheme> quant_scheme_load(const std::string& scheme, const QuantConfig& c,
                                                     const std::vector<std::filesystem::path>& dirs) {
  if (scheme == "auto") {
    if (c.outlier_threshold) throw Error("[quant] outlier_threshold needs a [quant] scheme (llm_int8)");
    if (!c.imatrix.empty()) throw Error("[quant] imatrix needs a [quant] scheme that uses one (llm_int8)");
    return nullptr;
  }
  auto s = std::make_shared<QuantScheme>(Plugin::find(TSR_PLUGIN_QUANT, scheme, dirs));
  if (c.outlier_threshold) s->set_option("outlier_threshold", *c.outlier_threshold);
  if (!c.imatrix.empty()) {
    auto importance = quant::imatrix_importances(quant::imatrix_read(c.imatrix));
    spdlog::info("quant {}: importance matrix {} ({} weights)", scheme, c.imatrix, importance.size());
    s->set_importance(std::move(importance));
  }
  return s;
}

}  // namespace tsr
