#include "core/quant/quant_scheme.h"

#include "core/error.h"
#include "core/plugin_host/host_services.h"

namespace tsr {

QuantScheme::QuantScheme(std::shared_ptr<Plugin> plugin)
    : plugin_(std::move(plugin)),
      iface_(static_cast<const tsr_quant_iface*>(plugin_->iface())),
      name_(iface_->scheme) {
  if (iface_->block_elems <= 0) {
    throw Error("quant plugin '" + plugin_->name() + "' declares a block of " +
                std::to_string(iface_->block_elems) + " elements", TSR_STATUS_ABI_MISMATCH);
  }
}

int64_t QuantScheme::row_bytes(int64_t cols) const {
  const int64_t bytes = iface_->row_bytes(cols);
  if (bytes <= 0) {
    throw Error("quant scheme '" + name_ + "': rows of " + std::to_string(cols) + " elements do not fit");
  }
  return bytes;
}

void QuantScheme::quantize(const float* x, int64_t rows, int64_t cols, void* out) const {
  call_plugin("quant scheme '" + name_ + "' quantize",
              [&](tsr_error** e) { return iface_->quantize(x, rows, cols, out, e); });
}

void QuantScheme::dequantize(const void* in, int64_t rows, int64_t cols, float* out) const {
  call_plugin("quant scheme '" + name_ + "' dequantize",
              [&](tsr_error** e) { return iface_->dequantize(in, rows, cols, out, e); });
}

const tsr_quant_kernels* QuantScheme::kernels(const std::string& backend) const {
  const tsr_quant_kernels* k = iface_->kernels(backend.c_str());
  return k != nullptr && k->matmul != nullptr ? k : nullptr;
}

}  // namespace tsr
