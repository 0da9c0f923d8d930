// The host's view of a quant plugin: a weight scheme that can convert f32 rows and, per
// backend, either runs on the backend's own kernels (the backend supports its dtype) or
// brings kernels of its own, which the host registers into the backend. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>
#include <string>

#include "abi_host/quant_1x.h"
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

  // `rows` rows of `cols` values; out holds rows * row_bytes(cols) bytes. With `importance`
  // (can be NULL; else `cols` values, see set_importance) through the plugin's
  // quantize_weighted.
  void quantize(const float* x, int64_t rows, int64_t cols, void* out, const float* importance = nullptr) const;
  void dequantize(const void* in, int64_t rows, int64_t cols, float* out) const;
  // The plugin's kernels for `backend`, or NULL. A plugin built for ABI 1.x has host-memory
  // kernels, shown through the host's adapter (abi_host/quant_1x.h): `host_memory` says
  // whether the backend's memory is host-visible; when not, such kernels are NULL.
  const tsr_quant_kernels* kernels(const std::string& backend, bool host_memory) const;
  // One of the scheme's options ([quant] outlier_threshold, ...). Throws tsr::Error naming
  // the key when the plugin has no options (built before ABI 2.4, or none) or refuses it.
  void set_option(const std::string& key, double value) const;
  // [quant] imatrix: the importance of each input column of the weights it names (llama.cpp's
  // importance matrix, as quant::imatrix_importances gives it: [n_expert * cols] per weight).
  // Throws tsr::Error naming the key when the plugin has no quantize_weighted (built before
  // ABI 2.10, or its scheme uses none). Set once, before the model loads.
  void set_importance(std::map<std::string, std::vector<float>> importance);
  // The importance of `weight`'s columns, or NULL where the matrix has no entry for it.
  const std::vector<float>* importance(const std::string& weight) const;
  bool has_importance() const { return !importance_.empty(); }

 private:
  void check_dtype() const;
  bool weighs() const;  // the plugin has quantize_weighted
  std::shared_ptr<Plugin> plugin_;  // keeps the library loaded
  const tsr_quant_iface* iface_;
  std::string name_;
  std::map<std::string, std::vector<float>> importance_;  // by weight name
  // Adapters over a 1.x plugin's kernels, made on first use; they live as long as the
  // scheme (backends they are registered into keep the scheme alive, see Backend).
  mutable std::mutex adapters_mutex_;
  mutable std::map<std::string, std::unique_ptr<abi::QuantKernels1x>> adapters_;  // by backend name
};

}  // namespace tsr
