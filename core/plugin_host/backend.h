// The host's view of one backend plugin instance: a tsr_backend handle with its default
// stream, buffers as RAII objects, and ops that throw tsr::Error on failure.
// Externally synchronized, like the handle it wraps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/plugin_host/plugin_loader.h"
#include "tessera/backend.h"
#include "tessera/host_memory.h"

namespace tsr {

class Backend;

class BackendBuffer {
 public:
  ~BackendBuffer();
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  uint8_t* base() const { return base_; }  // backend address, for tensor data
  uint64_t size() const { return size_; }
  tsr_buffer* handle() const { return handle_; }

 private:
  friend class Backend;
  BackendBuffer(Backend* owner, tsr_buffer* handle, uint64_t size);
  Backend* owner_;
  tsr_buffer* handle_;
  uint8_t* base_;
  uint64_t size_;
};

// A recorded sequence of ops (tsr_graph), freed with its backend's graph_destroy.
class BackendGraph {
 public:
  ~BackendGraph();
  BackendGraph(const BackendGraph&) = delete;
  BackendGraph& operator=(const BackendGraph&) = delete;

 private:
  friend class Backend;
  BackendGraph(Backend* owner, tsr_graph* handle) : owner_(owner), handle_(handle) {}
  Backend* owner_;
  tsr_graph* handle_;
};

class Backend {
 public:
  // Creates a backend on `device` with `threads` host threads (0 = plugin default).
  static std::unique_ptr<Backend> create(std::shared_ptr<Plugin> plugin, int32_t device,
                                         int32_t threads);
  // Devices the backend plugin sees, without creating a backend (0 on a machine without
  // its hardware, where the plugin reports no device). Throws tsr::Error from the plugin.
  static int32_t device_count(const Plugin& plugin);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const tsr_device_props& props() const { return props_; }
  const std::string& name() const { return name_; }
  int32_t threads() const { return threads_; }  // as requested at creation (0: default)
  bool supports(tsr_op op, tsr_dtype dtype) const;
  // Whether the op runs with these operands (supports() asked with the params).
  bool supports(tsr_op op, std::span<const tsr_dtype> dtypes, const void* params) const;
  // Whether rope runs with tsr_rope_params.freq_factors (a plugin built for ABI 1.3 or
  // older, behind the host's adapter, does not).
  bool has_rope_freq_factors() const;
  // Whether attention runs with tsr_attention_params.parents (tree attention, ABI 2.8): a
  // plugin built for 2.7 or older cannot say, since its reading of the params ends before.
  bool has_tree_attention() const;

  std::unique_ptr<BackendBuffer> alloc(uint64_t size);
  // Wraps host memory without copying where the backend can (touching every page once, so
  // that a memory-mapped file is read now rather than during the first step), else
  // allocates and copies. Reports (bytes done, total) to `progress` (can be empty).
  // The caller keeps `ptr` alive as long as the buffer.
  std::unique_ptr<BackendBuffer> upload(
      void* ptr, uint64_t size, const std::function<void(uint64_t, uint64_t)>& progress = {});
  void write(BackendBuffer& dst, uint64_t offset, const void* src, uint64_t size);
  void read(const BackendBuffer& src, uint64_t offset, void* dst, uint64_t size);
  void memset(BackendBuffer& dst, uint64_t offset, int value, uint64_t size);
  void synchronize();

  // Host memory the backend copies to and from without staging (the feature
  // "tsr_host_memory": page-locked on a GPU); a write from it is in flight until the next
  // synchronize. NULL where the plugin has none or the memory cannot be had (logged).
  void* host_alloc(uint64_t size);
  void host_free(void* ptr);  // NULL is ignored

  // Enqueues `op` with its params struct on this backend's stream.
  void enqueue(tsr_op op, const void* params);
  void get_rows(const tsr_get_rows_params& p) { enqueue(TSR_OP_GET_ROWS, &p); }
  void rms_norm(const tsr_rms_norm_params& p) { enqueue(TSR_OP_RMS_NORM, &p); }
  void matmul(const tsr_matmul_params& p) { enqueue(TSR_OP_MATMUL, &p); }
  // Throws when p.freq_factors is set and the plugin predates them (has_rope_freq_factors).
  void rope(const tsr_rope_params& p) { enqueue(TSR_OP_ROPE, &p); }
  void kv_write(const tsr_kv_write_params& p) { enqueue(TSR_OP_KV_WRITE, &p); }
  void attention(const tsr_attention_params& p) { enqueue(TSR_OP_ATTENTION, &p); }
  void silu_mul(const tsr_silu_mul_params& p) { enqueue(TSR_OP_SILU_MUL, &p); }
  void add(const tsr_add_params& p) { enqueue(TSR_OP_ADD, &p); }
  void bias_add(const tsr_bias_add_params& p) { enqueue(TSR_OP_BIAS_ADD, &p); }
  void scale(const tsr_scale_params& p) { enqueue(TSR_OP_SCALE, &p); }
  void gelu_mul(const tsr_gelu_params& p) { enqueue(TSR_OP_GELU_MUL, &p); }
  void softmax(const tsr_softmax_params& p) { enqueue(TSR_OP_SOFTMAX, &p); }
  void top_k(const tsr_top_k_params& p) { enqueue(TSR_OP_TOP_K, &p); }
  void matmul_id(const tsr_matmul_id_params& p) { enqueue(TSR_OP_MATMUL_ID, &p); }
  void moe_combine(const tsr_moe_combine_params& p) { enqueue(TSR_OP_MOE_COMBINE, &p); }
  void swiglu_oai(const tsr_swiglu_oai_params& p) { enqueue(TSR_OP_SWIGLU_OAI, &p); }
  void copy_blocks(const tsr_copy_blocks_params& p) { enqueue(TSR_OP_COPY_BLOCKS, &p); }

  // Graphs (see backend.h): whether the plugin records, and the recording of the
  // ops enqueued between graph_begin and graph_end on this backend's stream. graph_end
  // always ends the recording, and throws when it failed.
  bool has_graphs() const;
  void graph_begin();
  std::unique_ptr<BackendGraph> graph_end();
  void graph_launch(const BackendGraph& graph);

  // Gives the backend a quant plugin's matmul for weights of `dtype` (kernel_register);
  // `owner` (what keeps the kernels valid: the scheme and its plugin) lives as long as the
  // backend. Throws when the backend takes no kernels or refuses these.
  void register_kernels(tsr_dtype dtype, const tsr_quant_kernels& kernels, std::shared_ptr<const void> owner);

  // Weight packing (see backend.h): the matmul weight `w` in the backend's own
  // layout, written to *packed, with the buffer that holds it; NULL (and *packed
  // untouched) when the backend keeps no layout of its own for it.
  std::unique_ptr<BackendBuffer> pack_weight(const tsr_tensor& w, tsr_tensor* packed);
  // Whether pack_weight may be offered matmul_id's [n_expert, rows, cols] weights: the
  // backend was built for ABI 2.5 or later.
  bool packs_experts() const;

 private:
  friend class BackendBuffer;
  friend class BackendGraph;
  Backend(std::shared_ptr<Plugin> plugin, tsr_backend* handle);
  void free_buffer(tsr_buffer* buffer);

  std::shared_ptr<Plugin> plugin_;  // keeps the library loaded while the handle lives
  const tsr_backend_reg_iface* reg_;
  const tsr_backend_iface* iface_;
  tsr_backend* handle_;
  tsr_stream* stream_ = nullptr;
  const tsr_host_memory_iface* host_memory_ = nullptr;  // NULL: the plugin has none
  tsr_device_props props_{};
  std::string name_;
  std::vector<std::shared_ptr<const void>> kernel_owners_;  // of the registered quant kernels
  int32_t threads_ = 0;
};

}  // namespace tsr
