#include "core/plugin_host/backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

#include "base/error.h"
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
      reg_(static_cast<const tsr_backend_reg_iface*>(plugin_->iface())),
      iface_(reg_->backend),
      handle_(handle),
      name_(plugin_->name()) {}

int32_t Backend::device_count(const Plugin& plugin) {
  const auto* reg = static_cast<const tsr_backend_reg_iface*>(plugin.iface());
  tsr_device_count_args args{sizeof(args), reg, 0, 0};
  call_plugin("backend '" + plugin.name() + "'", [&](tsr_error** e) { return reg->device_count(&args, e); });
  return args.count;
}

std::unique_ptr<Backend> Backend::create(std::shared_ptr<Plugin> plugin, int32_t device,
                                         int32_t threads) {
  const auto* reg = static_cast<const tsr_backend_reg_iface*>(plugin->iface());
  const std::string what = "backend '" + plugin->name() + "'";
  const int32_t count = device_count(*plugin);
  if (device < 0 || device >= count) {
    throw Error(what + ": device " + std::to_string(device) + " does not exist (" +
                    std::to_string(count) + " device(s))",
                TSR_STATUS_DEVICE_ERROR);
  }
  tsr_device_props props{};
  props.struct_size = sizeof(props);
  tsr_device_props_args props_args{sizeof(props_args), reg, device, 0, &props};
  call_plugin(what, [&](tsr_error** e) { return reg->device_props(&props_args, e); });

  const tsr_backend_params params{sizeof(tsr_backend_params), device, threads, nullptr};
  tsr_backend_create_args create_args{sizeof(create_args), reg, &params, nullptr};
  call_plugin(what, [&](tsr_error** e) { return reg->backend_create(&create_args, e); });
  std::unique_ptr<Backend> backend(new Backend(std::move(plugin), create_args.backend));
  backend->props_ = props;
  backend->threads_ = threads;
  tsr_stream_args stream_args{sizeof(stream_args), create_args.backend, nullptr};
  call_plugin(what + " stream", [&](tsr_error** e) { return reg->backend->stream_create(&stream_args, e); });
  backend->stream_ = stream_args.stream;
  const void* host_memory = reg->get_proc != nullptr ? reg->get_proc(reg, TSR_HOST_MEMORY_PROC) : nullptr;
  const auto* hm = static_cast<const tsr_host_memory_iface*>(host_memory);
  backend->host_memory_ = hm != nullptr && hm->struct_size >= sizeof(tsr_host_memory_iface) ? hm : nullptr;
  spdlog::info("backend '{}' on device {}: {}", backend->name_, device, props.name);
  return backend;
}

Backend::~Backend() {
  if (stream_) iface_->stream_destroy(handle_, stream_);
  iface_->backend_destroy(handle_);
}

bool Backend::supports(tsr_op op, tsr_dtype dtype) const { return supports(op, {&dtype, 1}, nullptr); }

bool Backend::supports(tsr_op op, std::span<const tsr_dtype> dtypes, const void* params) const {
  const tsr_op_support_query query{sizeof(query), op, static_cast<int32_t>(dtypes.size()), dtypes.data(), params};
  return iface_->supports(handle_, &query) != 0;
}

void Backend::free_buffer(tsr_buffer* buffer) { iface_->buffer_free(handle_, buffer); }

std::unique_ptr<BackendBuffer> Backend::alloc(uint64_t size) {
  tsr_buffer_alloc_args args{sizeof(args), handle_, size, nullptr};
  call_plugin("allocating " + std::to_string(size) + " bytes on backend '" + name_ + "'",
              [&](tsr_error** e) { return iface_->buffer_alloc(&args, e); });
  return std::unique_ptr<BackendBuffer>(new BackendBuffer(this, args.buffer, size));
}

std::unique_ptr<BackendBuffer> Backend::upload(
    void* ptr, uint64_t size, const std::function<void(uint64_t, uint64_t)>& progress) {
  constexpr uint64_t kChunk = 64ull << 20;
  auto* bytes = static_cast<uint8_t*>(ptr);
  const bool wrap = iface_->buffer_from_host != nullptr;
  std::unique_ptr<BackendBuffer> buffer;
  if (wrap) {
    tsr_buffer_from_host_args args{sizeof(args), handle_, ptr, size, nullptr};
    call_plugin("wrapping host memory on backend '" + name_ + "'",
                [&](tsr_error** e) { return iface_->buffer_from_host(&args, e); });
    buffer.reset(new BackendBuffer(this, args.buffer, size));
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
  const tsr_buffer_write_args args{sizeof(args), handle_, stream_, dst.handle(), offset, src, size};
  call_plugin("buffer_write", [&](tsr_error** e) { return iface_->buffer_write(&args, e); });
}

void Backend::read(const BackendBuffer& src, uint64_t offset, void* dst, uint64_t size) {
  const tsr_buffer_read_args args{sizeof(args), handle_, stream_, src.handle(), offset, dst, size};
  call_plugin("buffer_read", [&](tsr_error** e) { return iface_->buffer_read(&args, e); });
}

void Backend::memset(BackendBuffer& dst, uint64_t offset, int value, uint64_t size) {
  const tsr_buffer_memset_args args{sizeof(args), handle_, stream_, dst.handle(), offset, size, value, 0};
  call_plugin("buffer_memset", [&](tsr_error** e) { return iface_->buffer_memset(&args, e); });
}

void Backend::synchronize() {
  const tsr_stream_args args{sizeof(args), handle_, stream_};
  call_plugin("stream_synchronize", [&](tsr_error** e) { return iface_->stream_synchronize(&args, e); });
}

void* Backend::host_alloc(uint64_t size) {
  if (host_memory_ == nullptr || size == 0) return nullptr;
  tsr_host_alloc_args args{sizeof(args), handle_, size, nullptr};
  try {
    call_plugin("host_alloc", [&](tsr_error** e) { return host_memory_->host_alloc(&args, e); });
  } catch (const Error& e) {
    spdlog::warn("backend '{}': no {} bytes of host memory for copies ({}); using ordinary memory", name_, size,
                 e.what());
    return nullptr;
  }
  return args.ptr;
}

void Backend::host_free(void* ptr) {
  if (ptr != nullptr && host_memory_ != nullptr) host_memory_->host_free(handle_, ptr);
}

namespace {

// The op's name for messages (the entry names of ABI 1.x for its ops, which logs and tests know).
const char* op_name(tsr_op op) {
  static const char* const names[] = {"get_rows", "rms_norm", "matmul", "rope", "kv_write", "attention",
                                      "silu_mul", "add", "copy_blocks", "mul", "scale", "gelu", "gelu_mul",
                                      "layer_norm", "bias_add", "softmax", "top_k", "matmul_id", "softcap",
                                      "cast", "moe_combine", "swiglu_oai"};
  static_assert(std::size(names) == TSR_OP_COUNT_);
  return op >= 0 && op < TSR_OP_COUNT_ ? names[op] : "unknown op";
}

}  // namespace

void Backend::enqueue(tsr_op op, const void* params) {
  const tsr_op_desc desc{sizeof(desc), op, 0, params, nullptr};
  call_plugin(std::string("backend op ") + op_name(op),
              [&](tsr_error** e) { return iface_->enqueue(handle_, stream_, &desc, e); });
}

bool Backend::has_rope_freq_factors() const {
  const tsr_tensor factors{};  // only its presence is asked about
  const tsr_rope_params probe{sizeof(probe), nullptr, nullptr, 0, TSR_ROPE_NORMAL, 0, 0, &factors};
  const tsr_dtype f32 = TSR_DTYPE_F32;
  return supports(TSR_OP_ROPE, {&f32, 1}, &probe);
}

bool Backend::has_tree_attention() const {
  const tsr_plugin_desc& d = plugin_->desc();
  if (d.abi_major != 2 || d.abi_minor < 8) return false;
  const tsr_tensor parents{};  // only its presence is asked about
  tsr_attention_params probe{};
  probe.struct_size = sizeof(probe);
  probe.parents = &parents;
  const tsr_dtype f32 = TSR_DTYPE_F32;
  return supports(TSR_OP_ATTENTION, {&f32, 1}, &probe);
}

bool Backend::has_graphs() const { return iface_->graph_begin != nullptr; }

void Backend::graph_begin() {
  if (!has_graphs()) throw Error("backend '" + name_ + "' cannot record graphs", TSR_STATUS_UNSUPPORTED);
  const tsr_stream_args args{sizeof(args), handle_, stream_};
  call_plugin("graph_begin", [&](tsr_error** e) { return iface_->graph_begin(&args, e); });
}

std::unique_ptr<BackendGraph> Backend::graph_end() {
  tsr_graph_args args{sizeof(args), handle_, stream_, nullptr};
  call_plugin("graph_end", [&](tsr_error** e) { return iface_->graph_end(&args, e); });
  return std::unique_ptr<BackendGraph>(new BackendGraph(this, args.graph));
}

void Backend::graph_launch(const BackendGraph& graph) {
  const tsr_graph_args args{sizeof(args), handle_, stream_, graph.handle_};
  call_plugin("graph_launch", [&](tsr_error** e) { return iface_->graph_launch(&args, e); });
}

void Backend::register_kernels(tsr_dtype dtype, const tsr_quant_kernels& kernels,
                               std::shared_ptr<const void> owner) {
  if (iface_->kernel_register == nullptr) {
    throw Error("backend '" + name_ + "' takes no kernels of quant plugins (its plugin was built for ABI " +
                    std::to_string(plugin_->desc().abi_major) + "." + std::to_string(plugin_->desc().abi_minor) +
                    " or leaves kernel_register NULL)",
                TSR_STATUS_UNSUPPORTED);
  }
  const tsr_kernel_register_args args{sizeof(args), handle_, dtype, 0, &kernels};
  call_plugin("kernel_register on backend '" + name_ + "'",
              [&](tsr_error** e) { return iface_->kernel_register(&args, e); });
  kernel_owners_.push_back(std::move(owner));
}

bool Backend::packs_experts() const {
  const tsr_plugin_desc& d = plugin_->desc();
  return iface_->weight_pack != nullptr && d.abi_major == 2 && d.abi_minor >= 5;
}

std::unique_ptr<BackendBuffer> Backend::pack_weight(const tsr_tensor& w, tsr_tensor* packed) {
  if (iface_->weight_pack == nullptr) return nullptr;
  tsr_tensor out{};
  out.struct_size = sizeof(tsr_tensor);
  tsr_weight_pack_args args{sizeof(args), handle_, &w, &out, nullptr};
  tsr_error* error = nullptr;
  const tsr_status status = iface_->weight_pack(&args, &error);
  if (status == TSR_STATUS_UNSUPPORTED && error == nullptr) return nullptr;
  check_status(status, error, "weight_pack on backend '" + name_ + "'");
  const bool same_shape = out.ndim == w.ndim && std::equal(w.shape, w.shape + w.ndim, out.shape);
  if (args.buffer == nullptr || out.dtype != TSR_DTYPE_PACKED || !same_shape) {
    if (args.buffer != nullptr) iface_->buffer_free(handle_, args.buffer);
    throw Error("backend '" + name_ + "': weight_pack returned no buffer or a tensor that is not a packed weight of the same shape",
                TSR_STATUS_INTERNAL);
  }
  *packed = out;
  return std::unique_ptr<BackendBuffer>(new BackendBuffer(this, args.buffer, uint64_t(w.shape[0]) * uint64_t(w.strides[0])));
}

}  // namespace tsr
