// The CPU backend plugin: host memory, synchronous streams, OpenMP + oneDNN kernels, written
// on the SDK's BackendPlugin like any vendor's backend (the SDK generates the ABI table).
//
// Streams on the CPU execute each op before the call returns, so stream_synchronize and
// events only report success; the ABI's asynchronous contract is trivially met. A stream
// that records a graph keeps the ops instead (cpu_graph.h).
#include <omp.h>
#include <sys/mman.h>

#include <dnnl.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>

#include "cpu_graph.h"
#include "cpu_ops.h"
#include "cpu_packed_matmul.h"
#include "cpu_tensor.h"
#include "tessera/sdk/backend.hpp"
#include "tessera/sdk/cpu_isa.hpp"
#include "tessera/sdk/cpu_topology.hpp"

namespace tsr::cpu {
namespace {

using sdk::Failure;
using sdk::require;

constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t(2) << 20;

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

// oneDNN follows TESSERA_CPU_MAX_ISA too, so that a capped run uses no wider instructions
// anywhere. Its cap can be set once, before its first primitive; a later backend finds it
// set and leaves it.
void cap_onednn_isa() {
  static const bool once = [] {
    using sdk::CpuIsa;
    const CpuIsa level = sdk::cpu_isa();
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

class CpuBackend {
 public:
  // Host memory the backend allocated, or caller memory wrapped without owning it.
  class Buffer {
   public:
    Buffer(uint8_t* data, uint64_t size, bool owned) : data_(data), size_(size), owned_(owned) {}
    ~Buffer() {
      if (owned_) std::free(data_);
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    void* data() const { return data_; }
    uint64_t size() const { return size_; }
    uint8_t* at(uint64_t offset) const { return data_ + offset; }

   private:
    uint8_t* data_;
    uint64_t size_;
    bool owned_;
  };
  struct Stream {
    std::unique_ptr<Recording> recording;  // set between graph_begin and graph_end
    bool recording_failed = false;         // an op was refused while recording
  };
  struct Event {};
  struct Graph {
    Recording ops;
  };

  static int32_t device_count() { return 1; }

  static void device_props(int32_t, tsr_device_props& props) {
    std::snprintf(props.name, sizeof(props.name), "%s [%s]", cpu_model_name().c_str(),
                  sdk::cpu_isa_name(sdk::cpu_isa()));
    props.type = TSR_DEVICE_CPU;
    props.compute_units = sdk::cpu_physical_cores();
    props.memory_total = physical_memory();
    props.host_visible = 1;
  }

  explicit CpuBackend(const tsr_backend_params& params) {
    require(sdk::cpu_isa_cap_error().empty(), sdk::cpu_isa_cap_error());
    cap_onednn_isa();
    const int threads = params.n_threads > 0 ? params.n_threads : sdk::cpu_physical_cores();
    ops_.n_threads = threads > 0 ? threads : 1;
    omp_set_num_threads(ops_.n_threads);  // oneDNN runs on the same OpenMP pool
  }

  bool supports(tsr_op op, std::span<const tsr_dtype> dtypes) const {
    if (op == TSR_OP_CAST && dtypes.size() == 2) return cast_supports(dtypes[0], dtypes[1]);
    for (const tsr_dtype d : dtypes) {
      const bool plugin = (op == TSR_OP_MATMUL || op == TSR_OP_MATMUL_ID) && ops_.plugin_kernels.find(d) != nullptr;
      if (!plugin && !op_supports(op, d)) return false;
    }
    return true;
  }

  // A quant plugin's matmul for weights of a dtype the CPU kernels do not multiply.
  void kernel_register(tsr_dtype dtype, const tsr_quant_kernels& kernels) {
    require(!op_supports(TSR_OP_MATMUL, dtype),
            "kernel_register: the CPU backend multiplies dtype " + std::to_string(int(dtype)) + " itself");
    ops_.plugin_kernels.add(dtype, kernels);
  }

  // ---- memory ----

  // Large buffers (packed weights, the KV cache) on 2 MiB pages where the kernel allows it:
  // a decode step streams every weight, and with 4 KiB pages that is a TLB miss per page.
  std::unique_ptr<Buffer> buffer_alloc(uint64_t size) {
    const bool huge = size >= kHugePage;
    const uint64_t align = huge ? kHugePage : kAlignment;
    const uint64_t rounded = (size + align - 1) / align * align;
    void* data = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    if (data == nullptr) {
      throw Failure(TSR_STATUS_OUT_OF_MEMORY,
                    "cannot allocate " + std::to_string(size) + " bytes of host memory");
    }
    if (huge) madvise(data, rounded, MADV_HUGEPAGE);  // a hint: without THP it changes nothing
    return std::make_unique<Buffer>(static_cast<uint8_t*>(data), size, true);
  }
  std::unique_ptr<Buffer> buffer_from_host(void* ptr, uint64_t size) {
    return std::make_unique<Buffer>(static_cast<uint8_t*>(ptr), size, false);
  }
  void buffer_write(Stream* s, Buffer& dst, uint64_t offset, const void* src, uint64_t size) {
    not_recording(s, "buffer_write");
    if (size) std::memcpy(dst.at(offset), src, size);
  }
  void buffer_read(Stream* s, const Buffer& src, uint64_t offset, void* dst, uint64_t size) {
    not_recording(s, "buffer_read");
    if (size) std::memcpy(dst, src.at(offset), size);
  }
  void buffer_memset(Stream* s, Buffer& dst, uint64_t offset, int value, uint64_t size) {
    not_recording(s, "buffer_memset");
    if (size) std::memset(dst.at(offset), value, size);
  }

  // ---- host memory (the feature "tsr_host_memory"): the device is the host, so any
  // page-aligned memory is copied without staging ----

  void* host_alloc(uint64_t size) {
    constexpr uint64_t kPage = 4096;
    require(size <= UINT64_MAX - kPage, "host_alloc: " + std::to_string(size) + " bytes is too large");
    void* p = std::aligned_alloc(kPage, (size + kPage - 1) / kPage * kPage);
    if (p == nullptr) throw Failure(TSR_STATUS_OUT_OF_MEMORY, "host_alloc: no " + std::to_string(size) + " bytes of host memory");
    return p;
  }
  void host_free(void* ptr) { std::free(ptr); }

  // ---- streams and events: every op has run when its call returns ----

  std::unique_ptr<Stream> stream_create() { return std::make_unique<Stream>(); }
  void stream_synchronize(Stream& s) { not_recording(&s, "stream_synchronize"); }
  std::unique_ptr<Event> event_create() { return std::make_unique<Event>(); }
  void event_record(Event&, Stream*) {}
  void event_wait(Stream*, Event&) {}
  void event_synchronize(Event&) {}

  // ---- ops: run now, or kept when the stream records ----

  void get_rows(Stream* s, const tsr_get_rows_params& p) { run(s, p, op_get_rows); }
  void rms_norm(Stream* s, const tsr_rms_norm_params& p) { run(s, p, op_rms_norm); }
  void matmul(Stream* s, const tsr_matmul_params& p) { run(s, p, op_matmul); }
  void rope(Stream* s, const tsr_rope_params& p) { run(s, p, op_rope); }
  void kv_write(Stream* s, const tsr_kv_write_params& p) { run(s, p, op_kv_write); }
  void attention(Stream* s, const tsr_attention_params& p) { run(s, p, op_attention); }
  void silu_mul(Stream* s, const tsr_silu_mul_params& p) { run(s, p, op_silu_mul); }
  void add(Stream* s, const tsr_add_params& p) { run(s, p, op_add); }
  void copy_blocks(Stream* s, const tsr_copy_blocks_params& p) { run(s, p, op_copy_blocks); }
  void mul(Stream* s, const tsr_mul_params& p) { run(s, p, op_mul); }
  void scale(Stream* s, const tsr_scale_params& p) { run(s, p, op_scale); }
  void gelu(Stream* s, const tsr_gelu_params& p) { run_gelu(s, p, false); }
  void gelu_mul(Stream* s, const tsr_gelu_params& p) { run_gelu(s, p, true); }
  void layer_norm(Stream* s, const tsr_layer_norm_params& p) { run(s, p, op_layer_norm); }
  void bias_add(Stream* s, const tsr_bias_add_params& p) { run(s, p, op_bias_add); }
  void softmax(Stream* s, const tsr_softmax_params& p) { run(s, p, op_softmax); }
  void top_k(Stream* s, const tsr_top_k_params& p) { run(s, p, op_top_k); }
  void matmul_id(Stream* s, const tsr_matmul_id_params& p) { run(s, p, op_matmul_id); }
  void softcap(Stream* s, const tsr_softcap_params& p) { run(s, p, op_softcap); }
  void moe_combine(Stream* s, const tsr_moe_combine_params& p) { run(s, p, op_moe_combine); }
  void swiglu_oai(Stream* s, const tsr_swiglu_oai_params& p) { run(s, p, op_swiglu_oai); }
  void cast(Stream* s, const tsr_cast_params& p) { run(s, p, op_cast); }

  // The SDK calls this when an op's entry fails, also before the op reached us (a NULL or
  // short params struct): a recording missing that op must not end as a graph.
  void op_refused(Stream* s) {
    if (s != nullptr && s->recording) s->recording_failed = true;
  }

  // ---- graphs ----

  void graph_begin(Stream& s) {
    require(!s.recording, "graph_begin: the stream is already recording");
    s.recording = std::make_unique<Recording>();
    s.recording_failed = false;
  }
  std::unique_ptr<Graph> graph_end(Stream& s) {
    require(s.recording != nullptr, "graph_end: the stream is not recording");
    auto graph = std::make_unique<Graph>(Graph{std::move(*s.recording)});
    s.recording.reset();
    require(!s.recording_failed, "graph_end: an op was refused while recording");
    return graph;
  }
  void graph_launch(Stream& s, const Graph& g) {
    not_recording(&s, "graph_launch");
    g.ops.run(ops_);
  }

  // ---- weight packing: Q8_0, Q4_0, F16, MXFP4, Q4_K, Q6_K in groups of rows for the kernels ----

  // A matmul weight [rows, cols], or (ABI 2.5) matmul_id's [n_expert, rows, cols] with its
  // experts one after the other, packed as one [n_expert * rows, cols] matrix: with rows a
  // multiple of 16 no group straddles two experts, so expert e is groups e·rows/16 on.
  std::unique_ptr<Buffer> weight_pack(const tsr_tensor& w, tsr_tensor& packed) {
    if (!packs(w.dtype)) return nullptr;  // before as_matrix, which refuses dtypes it cannot address
    require(w.ndim == 2 || w.ndim == 3, "weight_pack: w must be [rows, cols] or [n_expert, rows, cols]");
    tsr_tensor flat = w;
    if (w.ndim == 3) {
      require(w.shape[0] > 0 && w.strides[0] == w.shape[1] * w.strides[1],
              "weight_pack: the experts of w must lie one after the other");
      flat.ndim = 2;
      flat.shape[0] = w.shape[0] * w.shape[1], flat.shape[1] = w.shape[2];
      flat.strides[0] = w.strides[1], flat.strides[1] = w.strides[2];
    }
    const Matrix m = as_matrix(&flat, "weight_pack w");
    if (w.ndim == 3 && w.shape[1] % 16 != 0) return nullptr;
    const uint64_t size = packed_size(m);
    if (size == 0) return nullptr;
    auto buffer = buffer_alloc(size);
    pack_weight(ops_, m, buffer->at(0));
    packed = w;
    packed.struct_size = sizeof(tsr_tensor);
    packed.dtype = TSR_DTYPE_PACKED;
    packed.data = buffer->data();
    for (int d = 0; d < w.ndim; ++d) packed.strides[d] = 0;  // a packed weight's rows are not addressed
    packed.strides[w.ndim - 1] = 1;
    return buffer;
  }

 private:
  // Only ops may be enqueued on a recording stream (backend.h).
  static void not_recording(const Stream* s, const char* entry) {
    require(s == nullptr || !s->recording, std::string(entry) + ": the stream is recording a graph");
  }

  template <class Params>
  void run(Stream* s, const Params& p, void (*kernel)(OpContext&, const Params&)) {
    if (s != nullptr && s->recording) {
      s->recording->add(p);
    } else {
      kernel(ops_, p);
    }
  }

  void run_gelu(Stream* s, const tsr_gelu_params& p, bool mul) {
    if (s != nullptr && s->recording) {
      s->recording->add(p, mul);
    } else {
      (mul ? op_gelu_mul : op_gelu)(ops_, p);
    }
  }

  OpContext ops_;
};

}  // namespace
}  // namespace tsr::cpu

TSR_SDK_BACKEND_PLUGIN(tsr::cpu::CpuBackend, "cpu", "0.1.0")
