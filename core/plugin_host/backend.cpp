#include "core/plugin_host/backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/error.h"
#include "core/plugin_host/host_services.h"

namespace tsr {

BackendBuffer::BackendBuffer(Backend* owner, tsr_buffer* handle, uint64_t size)
    : owner_(owner),
      handle_(handle),
      base_(static_cast<uint8_t*>(owner->iface_->buffer_base(handle))),
      size_(size) {}

BackendBuffer::~BackendBuffer() { owner_->free_buffer(handle_); }

BackendGraph::~BackendGraph() { owner_->iface_->graph_destroy(owner_->handle_, handle_); }

Backend::Backend(std::shared_ptr<Plugin> plugin, tsr_backend* handle)
    : plugin_(std::move(plugin)),
      iface_(static_cast<const tsr_backend_iface*>(plugin_->iface())),
      handle_(handle),
      name_(plugin_->name()) {}

int32_t Backend::device_count(const Plugin& plugin) {
  const auto* iface = static_cast<const tsr_backend_iface*>(plugin.iface());
  int32_t count = 0;
  call_plugin("backend '" + plugin.name() + "'", [&](tsr_error** e) { return iface->device_count(&count, e); });
  return count;
}

std::unique_ptr<Backend> Backend::create(std::shared_ptr<Plugin> plugin, int32_t device,
                                         int32_t threads) {
  const auto* iface = static_cast<const tsr_backend_iface*>(plugin->iface());
  const std::string what = "backend '" + plugin->name() + "'";
  const int32_t count = device_count(*plugin);
  if (device < 0 || device >= count) {
    throw Error(what + ": device " + std::to_string(device) + " does not exist (" +
                    std::to_string(count) + " device(s))",
                TSR_STATUS_DEVICE_ERROR);
  }
  tsr_device_props props{};
  props.struct_size = sizeof(props);
  call_plugin(what, [&](tsr_error** e) { return iface->device_props(device, &props, e); });

  const tsr_backend_params params{sizeof(tsr_backend_params), device, threads, nullptr};
  tsr_backend* handle = nullptr;
  call_plugin(what, [&](tsr_error** e) { return iface->backend_create(&params, &handle, e); });
  std::unique_ptr<Backend> backend(new Backend(std::move(plugin), handle));
  backend->props_ = props;
  backend->threads_ = threads;
  call_plugin(what + " stream",
              [&](tsr_error** e) { return iface->stream_create(handle, &backend->stream_, e); });
  spdlog::info("backend '{}' on device {}: {}", backend->name_, device, props.name);
  return backend;
}

Backend::~Backend() {
  if (stream_) iface_->stream_destroy(handle_, stream_);
  iface_->backend_destroy(handle_);
}

bool Backend::supports(tsr_op op, tsr_dtype dtype) const {
  return iface_->supports(handle_, op, &dtype, 1) != 0;
}

void Backend::free_buffer(tsr_buffer* buffer) { iface_->buffer_free(handle_, buffer); }

std::unique_ptr<BackendBuffer> Backend::alloc(uint64_t size) {
  tsr_buffer* buffer = nullptr;
  call_plugin("allocating " + std::to_string(size) + " bytes on backend '" + name_ + "'",
              [&](tsr_error** e) { return iface_->buffer_alloc(handle_, size, &buffer, e); });
  return std::unique_ptr<BackendBuffer>(new BackendBuffer(this, buffer, size));
}

std::unique_ptr<BackendBuffer> Backend::upload(
    void* ptr, uint64_t size, const std::function<void(uint64_t, uint64_t)>& progress) {
  constexpr uint64_t kChunk = 64ull << 20;
  auto* bytes = static_cast<uint8_t*>(ptr);
  const bool wrap = iface_->buffer_from_host != nullptr;
  std::unique_ptr<BackendBuffer> buffer;
  if (wrap) {
    tsr_buffer* handle = nullptr;
    call_plugin("wrapping host memory on backend '" + name_ + "'", [&](tsr_error** e) {
      return iface_->buffer_from_host(handle_, ptr, size, &handle, e);
    });
    buffer.reset(new BackendBuffer(this, handle, size));
  } else {
    buffer = alloc(size);
  }
  for (uint64_t done = 0; done < size;) {
    const uint64_t n = std::min(kChunk, size - done);
    if (wrap) {  // fault the pages in now rather than during the first step
      volatile uint8_t sink = 0;
      for (uint64_t off = 0; off < n; off += 4096) sink = sink + bytes[done + off];
    } else {
      write(*buffer, done, bytes + done, n);
    }
    done += n;
    if (progress) progress(done, size);
  }
  return buffer;
}

void Backend::write(BackendBuffer& dst, uint64_t offset, const void* src, uint64_t size) {
  call_plugin("buffer_write", [&](tsr_error** e) {
    return iface_->buffer_write(handle_, stream_, dst.handle(), offset, src, size, e);
  });
}

void Backend::read(const BackendBuffer& src, uint64_t offset, void* dst, uint64_t size) {
  call_plugin("buffer_read", [&](tsr_error** e) {
    return iface_->buffer_read(handle_, stream_, src.handle(), offset, dst, size, e);
  });
}

void Backend::memset(BackendBuffer& dst, uint64_t offset, int value, uint64_t size) {
  call_plugin("buffer_memset", [&](tsr_error** e) {
    return iface_->buffer_memset(handle_, stream_, dst.handle(), offset, value, size, e);
  });
}

void Backend::synchronize() {
  call_plugin("stream_synchronize",
              [&](tsr_error** e) { return iface_->stream_synchronize(handle_, stream_, e); });
}

#define TSR_BACKEND_OP(op, params_type)                                          \
  void Backend::op(const params_type& p) {                                       \
    call_plugin("backend op " #op,                                               \
                [&](tsr_error** e) { return iface_->op(handle_, stream_, &p, e); }); \
  }
TSR_BACKEND_OP(get_rows, tsr_get_rows_params)
TSR_BACKEND_OP(rms_norm, tsr_rms_norm_params)
TSR_BACKEND_OP(matmul, tsr_matmul_params)
TSR_BACKEND_OP(kv_write, tsr_kv_write_params)
TSR_BACKEND_OP(attention, tsr_attention_params)
TSR_BACKEND_OP(silu_mul, tsr_silu_mul_params)
TSR_BACKEND_OP(add, tsr_add_params)
TSR_BACKEND_OP(copy_blocks, tsr_copy_blocks_params)
#undef TSR_BACKEND_OP

bool Backend::has_rope_freq_factors() const {
  return plugin_->desc().abi_major == TSR_ABI_MAJOR && plugin_->desc().abi_minor >= 4;
}

void Backend::rope(const tsr_rope_params& p) {
  if (p.freq_factors != nullptr && !has_rope_freq_factors()) {
    throw Error("backend '" + name_ + "' was built for ABI " + std::to_string(plugin_->desc().abi_major) + "." +
                    std::to_string(plugin_->desc().abi_minor) +
                    ", which has no RoPE frequency factors (they came with 1.4)",
                TSR_STATUS_UNSUPPORTED);
  }
  call_plugin("backend op rope", [&](tsr_error** e) { return iface_->rope(handle_, stream_, &p, e); });
}

// A plugin built for ABI 1.0 or 1.1 has a shorter table: no graph entries at all.
bool Backend::has_graphs() const {
  return TSR_STRUCT_HAS(iface_, tsr_backend_iface, graph_destroy) && iface_->graph_begin != nullptr;
}

void Backend::graph_begin() {
  if (!has_graphs()) throw Error("backend '" + name_ + "' cannot record graphs", TSR_STATUS_UNSUPPORTED);
  call_plugin("graph_begin", [&](tsr_error** e) { return iface_->graph_begin(handle_, stream_, e); });
}

std::unique_ptr<BackendGraph> Backend::graph_end() {
  tsr_graph* graph = nullptr;
  call_plugin("graph_end", [&](tsr_error** e) { return iface_->graph_end(handle_, stream_, &graph, e); });
  return std::unique_ptr<BackendGraph>(new BackendGraph(this, graph));
}

void Backend::graph_launch(const BackendGraph& graph) {
  call_plugin("graph_launch", [&](tsr_error** e) {
    return iface_->graph_launch(handle_, stream_, graph.handle_, e);
  });
}

std::unique_ptr<BackendBuffer> Backend::pack_weight(const tsr_tensor& w, tsr_tensor* packed) {
  if (!TSR_STRUCT_HAS(iface_, tsr_backend_iface, weight_pack) || iface_->weight_pack == nullptr) return nullptr;
  tsr_tensor out{};
  out.struct_size = sizeof(tsr_tensor);
  tsr_buffer* buffer = nullptr;
  tsr_error* error = nullptr;
  const tsr_status status = iface_->weight_pack(handle_, &w, &out, &buffer, &error);
  if (status == TSR_STATUS_UNSUPPORTED && error == nullptr) return nullptr;
  check_status(status, error, "weight_pack on backend '" + name_ + "'");
  if (buffer == nullptr || out.dtype != TSR_DTYPE_PACKED || out.ndim != w.ndim) {
    if (buffer != nullptr) iface_->buffer_free(handle_, buffer);
    throw Error("backend '" + name_ + "': weight_pack returned no buffer or a tensor that is not a packed weight of the same shape",
                TSR_STATUS_INTERNAL);
  }
  *packed = out;
  return std::unique_ptr<BackendBuffer>(new BackendBuffer(this, buffer, uint64_t(w.shape[0]) * uint64_t(w.strides[0])));
}

}  // namespace tsr
