#include "core/quant/quant_scheme.h"

#include <stdexcept>

#include "base/error.h"
#include "core/plugin_host/host_services.h"
#include "core/plugin_host/tensor.h"

namespace tsr {

QuantScheme::QuantScheme(std::shared_ptr<Plugin> plugin)
    : plugin_(std::move(plugin)),
      iface_(static_cast<const tsr_quant_iface*>(plugin_->iface())),
      name_(iface_->scheme) {
  if (iface_->block_elems <= 0) {
    throw Error("quant plugin '" + plugin_->name() + "' declares a block of " +
                std::to_string(iface_->block_elems) + " elements", TSR_STATUS_ABI_MISMATCH);
  }
  check_dtype();
}

// The dtype tag decides how backends address the weights: a tag whose layout the host knows
// must come with exactly that layout, or a kernel would read past the plugin's rows.
void QuantScheme::check_dtype() const {
  const tsr_dtype d = iface_->dtype;
  const auto refuse = [&](const std::string& why) {
    throw Error("quant plugin '" + plugin_->name() + "' declares dtype " + std::to_string(int(d)) + " (" +
                    dtype_name(d) + "): " + why,
                TSR_STATUS_ABI_MISMATCH);
  };
  switch (d) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F16: case TSR_DTYPE_BF16: case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q4_0:
      break;
    case TSR_DTYPE_INT4_G128: case TSR_DTYPE_FP8_E4M3: case TSR_DTYPE_PLUGIN:
      return;  // layouts only the plugin's kernels (and backends that know them) read
    default:
      refuse("not a weight format");
  }
  const int64_t block = iface_->block_elems;
  if (block % dtype_block_elems(d) != 0) refuse("its block of " + std::to_string(block) + " elements does not fit the type");
  for (const int64_t n : {block, 4 * block, 128 * block}) {
    if (iface_->row_bytes(n) != dtype_row_bytes(d, n)) {
      refuse("rows of " + std::to_string(n) + " elements take " + std::to_string(iface_->row_bytes(n)) +
             " bytes, the type's layout " + std::to_string(dtype_row_bytes(d, n)));
    }
  }
}

int64_t QuantScheme::row_bytes(int64_t cols) const {
  const int64_t bytes = iface_->row_bytes(cols);
  if (bytes <= 0) {
    throw Error("quant scheme '" + name_ + "': rows of " + std::to_string(cols) + " elements do not fit");
  }
  return bytes;
}

void QuantScheme::quantize(const float* x, int64_t rows, int64_t cols, void* out, const float* importance) const {
  if (importance != nullptr && weighs()) {
    call_plugin("quant scheme '" + name_ + "' quantize_weighted",
                [&](tsr_error** e) { return iface_->quantize_weighted(x, rows, cols, importance, out, e); });
    return;
  }
  call_plugin("quant scheme '" + name_ + "' quantize",
              [&](tsr_error** e) { return iface_->quantize(x, rows, cols, out, e); });
}

bool QuantScheme::weighs() const {
  return TSR_STRUCT_HAS(iface_, tsr_quant_iface, quantize_weighted) && iface_->quantize_weighted != nullptr;
}

void QuantScheme::set_importance(std::map<std::string, std::vector<float>> importance) {
  if (!weighs()) {
    throw Error("[quant] imatrix: quant scheme '" + name_ + "' uses no importance matrix", TSR_STATUS_INVALID_ARGUMENT);
  }
  importance_ = std::move(importance);
}

const std::vector<float>* QuantScheme::importance(const std::string& weight) const {
  const auto it = importance_.find(weight);
  return it == importance_.end() ? nullptr : &it->second;
}

void QuantScheme::dequantize(const void* in, int64_t rows, int64_t cols, float* out) const {
  call_plugin("quant scheme '" + name_ + "' dequantize",
              [&](tsr_error** e) { return iface_->dequantize(in, rows, cols, out, e); });
}

void QuantScheme::set_option(const std::string& key, double value) const {
  if (!TSR_STRUCT_HAS(iface_, tsr_quant_iface, option_set) || iface_->option_set == nullptr) {
    throw Error("[quant] " + key + ": quant scheme '" + name_ + "' takes no options", TSR_STATUS_INVALID_ARGUMENT);
  }
  call_plugin("[quant] " + key + " of quant scheme '" + name_ + "'",
              [&](tsr_error** e) { return iface_->option_set(key.c_str(), value, e); });
}

const tsr_quant_kernels* QuantScheme::kernels(const std::string& backend, bool host_memory) const {
  const tsr_quant_kernels* k = iface_->kernels(backend.c_str());
  if (k == nullptr || k->struct_size < sizeof(tsr_quant_kernels) || k->matmul == nullptr) return nullptr;
  if (plugin_->desc().abi_major == TSR_ABI_MAJOR) return k;
  if (!host_memory) return nullptr;  // 1.x kernels read host addresses
  std::lock_guard lock(adapters_mutex_);
  std::unique_ptr<abi::QuantKernels1x>& adapter = adapters_[backend];
  if (adapter == nullptr) {
    try {
      adapter = std::make_unique<abi::QuantKernels1x>(k, host_api());
    } catch (const std::invalid_argument& e) {
      adapters_.erase(backend);
      throw Error("quant plugin '" + plugin_->name() + "': " + e.what(), TSR_STATUS_ABI_MISMATCH);
    }
  }
  return adapter->kernels();
}

}  // namespace tsr
