// [quant] applied: the quant plugin a scheme names, with the table's options and importance
// matrix set on it, ready for LlamaModel::load.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/quant/quant_scheme.h"

namespace tsr {

// The scheme `scheme` names ("auto": NULL, the file's own types), found in `dirs`, with
// `c`'s outlier_threshold and imatrix. Throws tsr::Error naming the key when a key needs a
// scheme and there is none, when the plugin refuses it, or when the imatrix file is
// unreadable (quant::imatrix_read's message).
std::shared_ptr<const QuantScheme> quant_scheme_load(const std::string& scheme, const QuantConfig& c,
                                                     const std::vector<std::filesystem::path>& dirs);

}  // namespace tsr
