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

Backend::Backend(std::shared_ptr<Plugin> plugin, tsr_backend* handle)
    : plugin_(std::move(plugin)),
      iface_(static_cast<const tsr_backend_iface*>(plugin_->iface())),
      handle_(handle),
      name_(plugin_->name()) {}

std::unique_ptr<Backend> Backend::create(std::shared_ptr<Plugin> plugin, int32_t device,
                                         int32_t threads) {
  const auto* iface = static_cast<const tsr_backend_iface*>(plugin->iface());
  const std::string what = "backend '" + plugin->name() + "'";
  int32_t count = 0;
  tsr_error* err = nullptr;
  check_status(iface->device_count(&count, &err), err, what);
  if (device < 0 || device >= count) {
    throw Error(what + ": device " + std::to_string(device) + " does not exist (" +
                    std::to_string(count) + " device(s))",
                TSR_STATUS_DEVICE_ERROR);
  }
  tsr_device_props props{};
  props.struct_size = sizeof(props);
  check_status(iface->device_props(device, &props, &err), err, what);

  tsr_backend_params params{sizeof(tsr_backend_params), device, threads, nullptr};
  tsr_backend* handle = nullptr;
  check_status(iface->backend_create(&params, &handle, &err), err, what);
  std::unique_ptr<Backend> backend(new Backend(std::move(plugin), handle));
  backend->props_ = props;
  check_status(iface->stream_create(handle, &backend->stream_, &err), err, what + " stream");
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
  tsr_error* err = nullptr;
  check_status(iface_->buffer_alloc(handle_, size, &buffer, &err), err,
               "allocating " + std::to_string(size) + " bytes on backend '" + name_ + "'");
  return std::unique_ptr<BackendBuffer>(new BackendBuffer(this, buffer, size));
}

std::unique_ptr<BackendBuffer> Backend::upload(
    void* ptr, uint64_t size, const std::function<void(uint64_t, uint64_t)>& progress) {
  constexpr uint64_t kChunk = 64ull << 20;
  auto* bytes = static_cast<uint8_t*>(ptr);
  std::unique_ptr<BackendBuffer> buffer;
  if (iface_->buffer_from_host != nullptr) {
    tsr_buffer* handle = nullptr;
    tsr_error* err = nullptr;
    check_status(iface_->buffer_from_host(handle_, ptr, size, &handle, &err), err,
                 "wrapping host memory on backend '" + name_ + "'");
    buffer.reset(new BackendBuffer(this, handle, size));
  } else {
    buffer = alloc(size);
  }
  for (uint64_t done = 0; done < size;) {
    const uint64_t n = std::min(kChunk, size - done);
    if (iface_->buffer_from_host != nullptr) {
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
  tsr_error* err = nullptr;
  check_status(iface_->buffer_write(handle_, stream_, dst.handle(), offset, src, size, &err),
               err, "buffer_write");
}

void Backend::read(const BackendBuffer& src, uint64_t offset, void* dst, uint64_t size) {
  tsr_error* err = nullptr;
  check_status(iface_->buffer_read(handle_, stream_, src.handle(), offset, dst, size, &err),
               err, "buffer_read");
}

void Backend::memset(BackendBuffer& dst, uint64_t offset, int value, uint64_t size) {
  tsr_error* err = nullptr;
  check_status(
      iface_->buffer_memset(handle_, stream_, dst.handle(), offset, value, size, &err), err,
      "buffer_memset");
}

void Backend::synchronize() {
  tsr_error* err = nullptr;
  check_status(iface_->stream_synchronize(handle_, stream_, &err), err, "stream_synchronize");
}

#define TSR_BACKEND_OP(op, params_type)                                            \
  void Backend::op(const params_type& p) {                                         \
    tsr_error* err = nullptr;                                                      \
    check_status(iface_->op(handle_, stream_, &p, &err), err, "backend op " #op); \
  }
TSR_BACKEND_OP(get_rows, tsr_get_rows_params)
TSR_BACKEND_OP(rms_norm, tsr_rms_norm_params)
TSR_BACKEND_OP(matmul, tsr_matmul_params)
TSR_BACKEND_OP(rope, tsr_rope_params)
TSR_BACKEND_OP(kv_write, tsr_kv_write_params)
TSR_BACKEND_OP(attention, tsr_attention_params)
TSR_BACKEND_OP(silu_mul, tsr_silu_mul_params)
TSR_BACKEND_OP(add, tsr_add_params)
TSR_BACKEND_OP(copy_blocks, tsr_copy_blocks_params)
#undef TSR_BACKEND_OP

}  // namespace tsr
