// The host's view of a quant plugin: a weight scheme that can convert f32 rows and, per
// backend, either runs on the backend's own kernels (the backend supports its dtype) or
// brings kernels of its own. Immutable and thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/plugin_host/plugin_loader.h"
#include "tessera/quant.h"

namespace tsr {

class QuantScheme {
 public:
  // Throws tsr::Error when the plugin's description is inconsistent.
  explicit QuantScheme(std::shared_ptr<Plugin> plugin);

  const std::string& name() const { return name_; }
  tsr_dtype dtype() const { return iface_->dtype; }
  int32_t block_elems() const { return iface_->block_elems; }
  bool fits(int64_t cols) const { return cols > 0 && cols % block_elems() == 0; }
  int64_t row_bytes(int64_t cols) const;

  // `rows` rows of `cols` values; out holds rows * row_bytes(cols) bytes.
  void quantize(const float* x, int64_t rows, int64_t cols, void* out) const;
  void dequantize(const void* in, int64_t rows, int64_t cols, float* out) const;
  // The plugin's kernels for `backend`, or NULL.
  const tsr_quant_kernels* kernels(const std::string& backend) const;

 private:
  void check_dtype() const;
  std::shared_ptr<Plugin> plugin_;  // keeps the library loaded
  const tsr_quant_iface* iface_;
  std::string name_;
};

}  // namespace tsr
