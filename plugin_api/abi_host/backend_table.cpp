#include "abi_host/backend_table.h"

namespace tsr::abi {
namespace {

const char* missing_reg_entry(const tsr_backend_reg_iface& r) {
  if (r.device_count == nullptr) return "device_count";
  if (r.device_props == nullptr) return "device_props";
  if (r.backend_create == nullptr) return "backend_create";
  if (r.backend == nullptr) return "backend";
  return nullptr;
}

const char* missing_backend_entry(const tsr_backend_iface& t) {
#define TSR_REQUIRE(entry) \
  if (t.entry == nullptr) return #entry;
  TSR_REQUIRE(backend_destroy) TSR_REQUIRE(supports) TSR_REQUIRE(buffer_alloc)
  TSR_REQUIRE(buffer_free) TSR_REQUIRE(buffer_base) TSR_REQUIRE(buffer_write)
  TSR_REQUIRE(buffer_read) TSR_REQUIRE(buffer_memset) TSR_REQUIRE(stream_create)
  TSR_REQUIRE(stream_destroy) TSR_REQUIRE(stream_synchronize) TSR_REQUIRE(event_create)
  TSR_REQUIRE(event_destroy) TSR_REQUIRE(event_record) TSR_REQUIRE(event_wait)
  TSR_REQUIRE(event_synchronize) TSR_REQUIRE(enqueue)
#undef TSR_REQUIRE
  return nullptr;
}

std::string size_problem(const char* what, size_t size, size_t expected) {
  return std::string("its ") + what + " is " + std::to_string(size) + " bytes, smaller than the " +
         std::to_string(expected) + " bytes of ABI 2.0";
}

}  // namespace

std::string backend_reg_problem(const tsr_backend_reg_iface* reg) {
  if (reg == nullptr) return "its backend registry is NULL";
  if (reg->struct_size < sizeof(tsr_backend_reg_iface)) {
    return size_problem("backend registry", reg->struct_size, sizeof(tsr_backend_reg_iface));
  }
  if (const char* entry = missing_reg_entry(*reg)) return std::string("required entry '") + entry + "' is NULL";
  const tsr_backend_iface& t = *reg->backend;
  if (t.struct_size < sizeof(tsr_backend_iface)) {
    return size_problem("backend table", t.struct_size, sizeof(tsr_backend_iface));
  }
  if (const char* entry = missing_backend_entry(t)) return std::string("required entry '") + entry + "' is NULL";
  const int graphs = (t.graph_begin != nullptr) + (t.graph_end != nullptr) + (t.graph_launch != nullptr) +
                     (t.graph_destroy != nullptr);
  if (graphs != 0 && graphs != 4) {
    return "its graph entries are incomplete: graph_begin, graph_end, graph_launch and graph_destroy are all set "
           "or all NULL";
  }
  return "";
}

}  // namespace tsr::abi
