// The 2.x host's adapter for the kernels of quant plugins built for ABI 1.1 … 1.4: their
// host-memory matmul (raw pointers and strides) shown as a 2.0 tsr_quant_kernels, which
// takes tensors. Such kernels read host addresses, so a host registers them only into
// backends whose memory is host-visible (the CPU backend).
#pragma once

#include <memory>

#include "tessera/quant.h"

namespace tsr::abi {

class QuantKernels1x {
 public:
  // `kernels` is what a 1.x plugin's kernels() returned (its tsr_quant_kernels of that
  // minor), valid while the library is loaded; `host` makes the adapter's own errors.
  // Throws std::invalid_argument when the table is too small or its matmul is NULL.
  QuantKernels1x(const void* kernels, const tsr_host_api* host);
  ~QuantKernels1x();
  QuantKernels1x(const QuantKernels1x&) = delete;
  QuantKernels1x& operator=(const QuantKernels1x&) = delete;

  // The 2.0 table; valid while this object lives.
  const tsr_quant_kernels* kernels() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tsr::abi
