// The 2.x host's adapter for backend plugins built for ABI 1.0 … 1.4: their table of per-op
// entries shown as a 2.0 registry and backend table, so that a host (the core, the
// conformance kit) speaks 2.0 only. Ops become the 1.x entry of the same op; an op or a
// param the plugin's minor lacks (rope's freq_factors before 1.4, every op after
// copy_blocks) is unsupported. The 1.x table's layout is declared in backend_1x.cpp, the
// one place that knows it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tessera/backend.h"

namespace tsr::abi {

class Backend1x {
 public:
  // `table` is a plugin's tsr_backend_iface of ABI 1.`minor` (minor <= 4), valid while the
  // library is loaded; `host` makes the adapter's own errors. Throws std::invalid_argument
  // naming the problem when the table is smaller than 1.0's, lacks a required entry or has
  // an incomplete set of graph entries.
  Backend1x(const void* table, uint32_t minor, const tsr_host_api* host);
  ~Backend1x();
  Backend1x(const Backend1x&) = delete;
  Backend1x& operator=(const Backend1x&) = delete;

  // The 2.0 registry over the plugin; valid while this object lives.
  const tsr_backend_reg_iface* reg() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tsr::abi
