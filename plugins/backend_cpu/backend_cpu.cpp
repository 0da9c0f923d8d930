// The CPU backend plugin: host memory, synchronous streams, OpenMP + oneDNN kernels.
//
// Streams on the CPU execute each op before the call returns, so stream_synchronize and
// events only report success; the ABI's asynchronous contract is trivially met. A stream
// that records a graph keeps the ops instead (cpu_graph.h).
#include <omp.h>
#include <sys/mman.h>

#include <dnnl.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <string>

#include "cpu_graph.h"
#include "cpu_ops.h"
#include "cpu_packed_matmul.h"
#include "cpu_tensor.h"
#include "tessera/backend.h"
#include "tessera/sdk/cpu_isa.hpp"
#include "tessera/sdk/backend.hpp"  // kAbi10Size of the op params
#include "tessera/sdk/status.hpp"
#include "tessera/sdk/cpu_topology.hpp"

using tsr::sdk::Failure;
using tsr::sdk::require;

namespace {

// Set by tsr::sdk::query when the host loads the plugin.
using tsr::sdk::g_host;

constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t(2) << 20;

}  // namespace

struct tsr_backend {
  tsr::cpu::OpContext ops;
};

struct tsr_buffer {
  uint8_t* data;
  uint64_t size;
  bool owned;  // false when wrapping caller memory (buffer_from_host)
};

struct tsr_stream {
  std::unique_ptr<tsr::cpu::Recording> recording;  // set between graph_begin and graph_end
  bool recording_failed = false;                   // an op was refused while recording
};
struct tsr_event {};
struct tsr_graph {
  tsr::cpu::Recording ops;
};

namespace {

template <class Body>
tsr_status guarded(tsr_error** error, Body&& body) {
  return tsr::sdk::guard(g_host, error, std::forward<Body>(body));
}

std::string cpu_model_name() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "CPU";
}

uint64_t physical_memory() {
  std::ifstream info("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  info >> key >> kib;  // first line: MemTotal
  return kib * 1024;
}

tsr_status device_count(int32_t* count, tsr_error** error) {
  return guarded(error, [&] {
    require(count != nullptr, "device_count: count is NULL");
    *count = 1;
  });
}

tsr_status device_props(int32_t device, tsr_device_props* props, tsr_error** error) {
  return guarded(error, [&] {
    require(props != nullptr && props->struct_size >= sizeof(tsr_device_props),
            "device_props: props is NULL or too small");
    require(device == 0, "the CPU backend has one device (0)");
    const size_t size = props->struct_size;
    std::memset(props, 0, sizeof(tsr_device_props));
    props->struct_size = size;
    std::snprintf(props->name, sizeof(props->name), "%s [%s]", cpu_model_name().c_str(),
                  tsr::sdk::cpu_isa_name(tsr::sdk::cpu_isa()));
    props->type = TSR_DEVICE_CPU;
    props->compute_units = tsr::sdk::cpu_physical_cores();
    props->memory_total = physical_memory();
    props->host_visible = 1;
  });
}

// oneDNN follows TESSERA_CPU_MAX_ISA too, so that a capped run uses no wider instructions
// anywhere. Its cap can be set once, before its first primitive; a later backend_create
// finds it set and leaves it.
void cap_onednn_isa() {
  static const bool once = [] {
    using tsr::sdk::CpuIsa;
    const CpuIsa level = tsr::sdk::cpu_isa();
    if (level == CpuIsa::avx512_vnni) return true;  // no cap: whatever the CPU has
    const dnnl::cpu_isa isa = level == CpuIsa::avx512 ? dnnl::cpu_isa::avx512_core
                              : level == CpuIsa::avx2 ? dnnl::cpu_isa::avx2
                                                      : dnnl::cpu_isa::sse41;
    try {
      dnnl::set_max_cpu_isa(isa);
    } catch (const dnnl::error&) {  // oneDNN ran already (another backend in this process)
    }
    return true;
  }();
  (void)once;
}

tsr_status backend_create(const tsr_backend_params* params, tsr_backend** out,
                          tsr_error** error) {
  return guarded(error, [&] {
    require(params != nullptr && params->struct_size >= sizeof(tsr_backend_params),
            "backend_create: params NULL or too small");
    require(out != nullptr, "backend_create: out is NULL");
    require(params->device == 0, "the CPU backend has one device (0)");
    require(params->n_threads >= 0, "backend_create: negative thread count");
    require(tsr::sdk::cpu_isa_cap_error().empty(), tsr::sdk::cpu_isa_cap_error());
    cap_onednn_isa();
    auto* backend = new tsr_backend();
    const int threads = params->n_threads > 0
                            ? params->n_threads
                            : tsr::sdk::cpu_physical_cores();
    backend->ops.n_threads = threads > 0 ? threads : 1;
    // oneDNN runs on the same OpenMP pool; bound it to our thread count.
    omp_set_num_threads(backend->ops.n_threads);
    *out = backend;
  });
}

void backend_destroy(tsr_backend* backend) { delete backend; }

int32_t supports(const tsr_backend*, tsr_op op, const tsr_dtype* dtypes, int32_t n_dtypes) {
  if (dtypes == nullptr || n_dtypes < 1) return 0;
  for (int32_t i = 0; i < n_dtypes; ++i) {
    if (!tsr::cpu::op_supports(op, dtypes[i])) return 0;
  }
  return 1;
}

tsr_status buffer_alloc(tsr_backend*, uint64_t size, tsr_buffer** out, tsr_error** error) {
  return guarded(error, [&] {
    require(out != nullptr, "buffer_alloc: out is NULL");
    // Large buffers (packed weights, the KV cache) on 2 MiB pages where the kernel allows
    // it: a decode step streams every weight, and with 4 KiB pages that is a TLB miss per
    // page.
    const bool huge = size >= kHugePage;
    const uint64_t align = huge ? kHugePage : kAlignment;
    const uint64_t rounded = (size + align - 1) / align * align;
    void* data = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    if (data == nullptr) {
      throw Failure(TSR_STATUS_OUT_OF_MEMORY,
                    "cannot allocate " + std::to_string(size) + " bytes of host memory");
    }
    if (huge) madvise(data, rounded, MADV_HUGEPAGE);  // a hint: without THP it changes nothing
    *out = new tsr_buffer{static_cast<uint8_t*>(data), size, true};
  });
}

tsr_status buffer_from_host(tsr_backend*, void* ptr, uint64_t size, tsr_buffer** out,
                            tsr_error** error) {
  return guarded(error, [&] {
    require(out != nullptr && (ptr != nullptr || size == 0), "buffer_from_host: NULL argument");
    *out = new tsr_buffer{static_cast<uint8_t*>(ptr), size, false};
  });
}

void buffer_free(tsr_backend*, tsr_buffer* buffer) {
  if (buffer == nullptr) return;
  if (buffer->owned) std::free(buffer->data);
  delete buffer;
}

void* buffer_base(const tsr_buffer* buffer) { return buffer ? buffer->data : nullptr; }

// Only ops may be enqueued on a recording stream (backend.h).
void not_recording(const tsr_stream* stream, const char* entry) {
  require(stream == nullptr || !stream->recording,
          std::string(entry) + ": the stream is recording a graph");
}

void require_range(const tsr_buffer* buffer, uint64_t offset, uint64_t size, const char* what) {
  require(buffer != nullptr, std::string(what) + ": buffer is NULL");
  require(offset <= buffer->size && size <= buffer->size - offset,
          std::string(what) + ": range [" + std::to_string(offset) + ", +" +
              std::to_string(size) + ") outside the buffer of " + std::to_string(buffer->size) +
              " bytes");
}

tsr_status buffer_write(tsr_backend*, tsr_stream* stream, tsr_buffer* dst, uint64_t offset,
                        const void* src, uint64_t size, tsr_error** error) {
  return guarded(error, [&] {
    not_recording(stream, "buffer_write");
    require_range(dst, offset, size, "buffer_write");
    require(src != nullptr || size == 0, "buffer_write: src is NULL");
    if (size) std::memcpy(dst->data + offset, src, size);
  });
}

tsr_status buffer_read(tsr_backend*, tsr_stream* stream, const tsr_buffer* src, uint64_t offset,
                       void* dst, uint64_t size, tsr_error** error) {
  return guarded(error, [&] {
    not_recording(stream, "buffer_read");
    require_range(src, offset, size, "buffer_read");
    require(dst != nullptr || size == 0, "buffer_read: dst is NULL");
    if (size) std::memcpy(dst, src->data + offset, size);
  });
}

tsr_status buffer_memset(tsr_backend*, tsr_stream* stream, tsr_buffer* dst, uint64_t offset, int value,
                         uint64_t size, tsr_error** error) {
  return guarded(error, [&] {
    not_recording(stream, "buffer_memset");
    require_range(dst, offset, size, "buffer_memset");
    if (size) std::memset(dst->data + offset, value, size);
  });
}

tsr_status stream_create(tsr_backend*, tsr_stream** out, tsr_error** error) {
  return guarded(error, [&] {
    require(out != nullptr, "stream_create: out is NULL");
    *out = new tsr_stream();
  });
}

void stream_destroy(tsr_backend*, tsr_stream* stream) { delete stream; }

tsr_status stream_synchronize(tsr_backend*, tsr_stream* stream, tsr_error** error) {
  return guarded(error, [&] { not_recording(stream, "stream_synchronize"); });
}

tsr_status event_create(tsr_backend*, tsr_event** out, tsr_error** error) {
  return guarded(error, [&] {
    require(out != nullptr, "event_create: out is NULL");
    *out = new tsr_event();
  });
}

void event_destroy(tsr_backend*, tsr_event* event) { delete event; }

tsr_status event_record(tsr_backend*, tsr_event*, tsr_stream*, tsr_error**) {
  return TSR_STATUS_OK;
}

tsr_status event_wait(tsr_backend*, tsr_stream*, tsr_event*, tsr_error**) {
  return TSR_STATUS_OK;
}

tsr_status event_synchronize(tsr_backend*, tsr_event*, tsr_error**) { return TSR_STATUS_OK; }

// Wraps a kernel as an ABI entry: validates the params header, then runs the op, or
// records it when the stream is recording.
#define TSR_CPU_OP(name, params_type)                                                        \
  tsr_status name(tsr_backend* b, tsr_stream* s, const params_type* p, tsr_error** error) {  \
    const tsr_status status = guarded(error, [&] {                                           \
      require(b != nullptr, #name ": backend is NULL");                                      \
      require(p != nullptr && p->struct_size >= tsr::sdk::kAbi10Size<params_type>,          \
              #name ": params NULL or smaller than ABI 1.0's " #params_type);                \
      if (s != nullptr && s->recording) {                                                    \
        s->recording->add(*p);                                                               \
      } else {                                                                               \
        tsr::cpu::op_##name(b->ops, *p);                                                     \
      }                                                                                      \
    });                                                                                      \
    if (status != TSR_STATUS_OK && s != nullptr && s->recording) s->recording_failed = true; \
    return status;                                                                           \
  }
TSR_CPU_OP(get_rows, tsr_get_rows_params)
TSR_CPU_OP(rms_norm, tsr_rms_norm_params)
TSR_CPU_OP(matmul, tsr_matmul_params)
TSR_CPU_OP(rope, tsr_rope_params)
TSR_CPU_OP(kv_write, tsr_kv_write_params)
TSR_CPU_OP(attention, tsr_attention_params)
TSR_CPU_OP(silu_mul, tsr_silu_mul_params)
TSR_CPU_OP(add, tsr_add_params)
TSR_CPU_OP(copy_blocks, tsr_copy_blocks_params)
#undef TSR_CPU_OP

tsr_status graph_begin(tsr_backend* b, tsr_stream* s, tsr_error** error) {
  return guarded(error, [&] {
    require(b != nullptr && s != nullptr, "graph_begin: backend or stream is NULL");
    require(!s->recording, "graph_begin: the stream is already recording");
    s->recording = std::make_unique<tsr::cpu::Recording>();
    s->recording_failed = false;
  });
}

tsr_status graph_end(tsr_backend* b, tsr_stream* s, tsr_graph** out, tsr_error** error) {
  return guarded(error, [&] {
    require(b != nullptr && s != nullptr, "graph_end: backend or stream is NULL");
    require(s->recording != nullptr, "graph_end: the stream is not recording");
    auto graph = std::make_unique<tsr_graph>(tsr_graph{std::move(*s->recording)});
    s->recording.reset();
    require(!s->recording_failed, "graph_end: an op was refused while recording");
    require(out != nullptr, "graph_end: out is NULL");
    *out = graph.release();
  });
}

tsr_status graph_launch(tsr_backend* b, tsr_stream* s, const tsr_graph* g, tsr_error** error) {
  return guarded(error, [&] {
    require(b != nullptr && g != nullptr, "graph_launch: backend or graph is NULL");
    not_recording(s, "graph_launch");
    g->ops.run(b->ops);
  });
}

void graph_destroy(tsr_backend*, tsr_graph* g) { delete g; }

tsr_status weight_pack(tsr_backend* b, const tsr_tensor* w, tsr_tensor* packed, tsr_buffer** buffer,
                       tsr_error** error) {
  bool unsupported = false;
  const tsr_status status = guarded(error, [&] {
    require(b != nullptr && w != nullptr && packed != nullptr && buffer != nullptr, "weight_pack: NULL argument");
    if (!tsr::cpu::packs(w->dtype)) {  // before as_matrix, which refuses dtypes it cannot address by row
      unsupported = true;
      return;
    }
    const tsr::cpu::Matrix m = tsr::cpu::as_matrix(w, "weight_pack w");
    require(w->ndim == 2, "weight_pack: w must be [rows, cols]");
    const uint64_t size = tsr::cpu::packed_size(m);
    if (size == 0) {
      unsupported = true;
      return;
    }
    tsr_buffer* out = nullptr;
    tsr_error* alloc_error = nullptr;
    if (buffer_alloc(b, size, &out, &alloc_error) != TSR_STATUS_OK) {
      g_host->error_free(alloc_error);
      throw Failure(TSR_STATUS_OUT_OF_MEMORY, "weight_pack: cannot allocate " + std::to_string(size) + " bytes");
    }
    tsr::cpu::pack_weight(b->ops, m, out->data);
    tsr_tensor t = *w;
    t.struct_size = sizeof(tsr_tensor);
    t.dtype = TSR_DTYPE_PACKED;
    t.data = out->data;
    t.strides[1] = 1;
    t.strides[0] = 0;  // a packed weight's rows are not addressed
    *packed = t;
    *buffer = out;
  });
  return unsupported ? TSR_STATUS_UNSUPPORTED : status;
}

const tsr_backend_iface kIface = {
    sizeof(tsr_backend_iface),
    device_count, device_props,
    backend_create, backend_destroy, supports,
    buffer_alloc, buffer_from_host, buffer_free, buffer_base,
    buffer_write, buffer_read, buffer_memset,
    stream_create, stream_destroy, stream_synchronize,
    event_create, event_destroy, event_record, event_wait, event_synchronize,
    get_rows, rms_norm, matmul, rope, kv_write, attention, silu_mul, add, copy_blocks,
    graph_begin, graph_end, graph_launch, graph_destroy,
    weight_pack,
};

const tsr_plugin_desc kDesc = {
    sizeof(tsr_plugin_desc), TSR_ABI_MAJOR, TSR_ABI_MINOR, TSR_PLUGIN_BACKEND,
    "cpu", "0.1.0", &kIface,
};

}  // namespace

extern "C" TSR_EXPORT const tsr_plugin_desc* tsr_plugin_query(const tsr_host_api* host,
                                                               uint32_t host_abi_major,
                                                               uint32_t host_abi_minor) {
  (void)host_abi_minor;  // a host older than our minor refuses us itself
  return tsr::sdk::query(host, host_abi_major, kDesc);
}
