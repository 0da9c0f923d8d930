#include "abi_host/backend_1x.h"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace tsr::abi {
namespace {

// ---- the backend table of ABI 1.4 (1.0 ends before graph_begin, 1.2 before weight_pack) ----
// Every struct its entries take (device props, backend params, tensors, op params) kept its
// layout in 2.0, so the 2.0 types stand for them.
template <class P>
using OpEntry = tsr_status (*)(tsr_backend*, tsr_stream*, const P*, tsr_error**);

struct Table1x {
  size_t struct_size;
  tsr_status (*device_count)(int32_t* count, tsr_error** error);
  tsr_status (*device_props)(int32_t device, tsr_device_props* props, tsr_error** error);
  tsr_status (*backend_create)(const tsr_backend_params* params, tsr_backend** out, tsr_error** error);
  void (*backend_destroy)(tsr_backend* backend);
  int32_t (*supports)(const tsr_backend* backend, tsr_op op, const tsr_dtype* dtypes, int32_t n);
  tsr_status (*buffer_alloc)(tsr_backend*, uint64_t size, tsr_buffer** out, tsr_error**);
  tsr_status (*buffer_from_host)(tsr_backend*, void* ptr, uint64_t size, tsr_buffer** out, tsr_error**);
  void (*buffer_free)(tsr_backend*, tsr_buffer*);
  void* (*buffer_base)(const tsr_buffer*);
  tsr_status (*buffer_write)(tsr_backend*, tsr_stream*, tsr_buffer*, uint64_t offset, const void* src,
                             uint64_t size, tsr_error**);
  tsr_status (*buffer_read)(tsr_backend*, tsr_stream*, const tsr_buffer*, uint64_t offset, void* dst,
                            uint64_t size, tsr_error**);
  tsr_status (*buffer_memset)(tsr_backend*, tsr_stream*, tsr_buffer*, uint64_t offset, int value,
                              uint64_t size, tsr_error**);
  tsr_status (*stream_create)(tsr_backend*, tsr_stream** out, tsr_error**);
  void (*stream_destroy)(tsr_backend*, tsr_stream*);
  tsr_status (*stream_synchronize)(tsr_backend*, tsr_stream*, tsr_error**);
  tsr_status (*event_create)(tsr_backend*, tsr_event** out, tsr_error**);
  void (*event_destroy)(tsr_backend*, tsr_event*);
  tsr_status (*event_record)(tsr_backend*, tsr_event*, tsr_stream*, tsr_error**);
  tsr_status (*event_wait)(tsr_backend*, tsr_stream*, tsr_event*, tsr_error**);
  tsr_status (*event_synchronize)(tsr_backend*, tsr_event*, tsr_error**);
  OpEntry<tsr_get_rows_params> get_rows;
  OpEntry<tsr_rms_norm_params> rms_norm;
  OpEntry<tsr_matmul_params> matmul;
  OpEntry<tsr_rope_params> rope;
  OpEntry<tsr_kv_write_params> kv_write;
  OpEntry<tsr_attention_params> attention;
  OpEntry<tsr_silu_mul_params> silu_mul;
  OpEntry<tsr_add_params> add;
  OpEntry<tsr_copy_blocks_params> copy_blocks;
  tsr_status (*graph_begin)(tsr_backend*, tsr_stream*, tsr_error**);
  tsr_status (*graph_end)(tsr_backend*, tsr_stream*, tsr_graph** out, tsr_error**);
  tsr_status (*graph_launch)(tsr_backend*, tsr_stream*, const tsr_graph*, tsr_error**);
  void (*graph_destroy)(tsr_backend*, tsr_graph*);
  tsr_status (*weight_pack)(tsr_backend*, const tsr_tensor* w, tsr_tensor* packed, tsr_buffer** buffer,
                            tsr_error**);
};
static_assert(sizeof(Table1x) == 280, "the 1.4 backend table is 280 bytes");
constexpr size_t kSize1_0 = offsetof(Table1x, graph_begin);  // 1.2 appended graphs, 1.3 weight_pack

bool has(const Table1x& t, size_t end_of_field) { return t.struct_size >= end_of_field; }
#define TSR_1X_HAS(t, field) has(t, TSR_SIZE_THROUGH(Table1x, field))

// Names the first required entry that is NULL, or returns nullptr.
const char* missing_entry(const Table1x& t) {
#define TSR_REQUIRE(entry) \
  if (t.entry == nullptr) return #entry;
  TSR_REQUIRE(device_count) TSR_REQUIRE(device_props) TSR_REQUIRE(backend_create)
  TSR_REQUIRE(backend_destroy) TSR_REQUIRE(supports) TSR_REQUIRE(buffer_alloc)
  TSR_REQUIRE(buffer_free) TSR_REQUIRE(buffer_base) TSR_REQUIRE(buffer_write)
  TSR_REQUIRE(buffer_read) TSR_REQUIRE(buffer_memset) TSR_REQUIRE(stream_create)
  TSR_REQUIRE(stream_destroy) TSR_REQUIRE(stream_synchronize) TSR_REQUIRE(event_create)
  TSR_REQUIRE(event_destroy) TSR_REQUIRE(event_record) TSR_REQUIRE(event_wait)
  TSR_REQUIRE(event_synchronize) TSR_REQUIRE(get_rows) TSR_REQUIRE(rms_norm)
  TSR_REQUIRE(matmul) TSR_REQUIRE(rope) TSR_REQUIRE(kv_write) TSR_REQUIRE(attention)
  TSR_REQUIRE(silu_mul) TSR_REQUIRE(add) TSR_REQUIRE(copy_blocks)
#undef TSR_REQUIRE
  return nullptr;
}

void validate(const Table1x& t, uint32_t minor) {
  if (minor > 4) {
    throw std::invalid_argument("ABI 1." + std::to_string(minor) + " never existed: 1.4 was the last 1.x");
  }
  if (t.struct_size < kSize1_0) {
    throw std::invalid_argument("its backend table is " + std::to_string(t.struct_size) +
                                " bytes, smaller than the " + std::to_string(kSize1_0) + " bytes of ABI 1.0");
  }
  if (const char* entry = missing_entry(t)) {
    throw std::invalid_argument(std::string("required entry '") + entry + "' is NULL");
  }
  if (TSR_1X_HAS(t, graph_destroy)) {
    const int set = (t.graph_begin != nullptr) + (t.graph_end != nullptr) + (t.graph_launch != nullptr) +
                    (t.graph_destroy != nullptr);
    if (set != 0 && set != 4) {
      throw std::invalid_argument(
          "its graph entries are incomplete: graph_begin, graph_end, graph_launch and graph_destroy are all set or "
          "all NULL");
    }
  }
}

}  // namespace

// The adapter's registry and backend table come first, so that the `reg` pointer an entry
// receives leads back to the adapter (a pointer to a standard-layout struct is a pointer
// to its first member).
struct Backend1x::Impl {
  tsr_backend_reg_iface reg;
  tsr_backend_iface backend;
  const Table1x* t;
  uint32_t minor;

  static const Impl& of(const tsr_backend_reg_iface* r) { return *reinterpret_cast<const Impl*>(r); }
};
static_assert(std::is_standard_layout_v<Backend1x::Impl>);

namespace {

using Impl = Backend1x::Impl;

// A backend the adapter created: the plugin's handle and the table it belongs to.
struct Adapted {
  const Impl* adapter;
  tsr_backend* inner;
};

Adapted& adapted(tsr_backend* b) { return *reinterpret_cast<Adapted*>(b); }
const Adapted& adapted(const tsr_backend* b) { return *reinterpret_cast<const Adapted*>(b); }

// The host services of the process's host (set by every adapter it makes; a process has
// one host), for errors of calls whose args are too broken to lead to an adapter.
std::atomic<const tsr_host_api*> g_host{nullptr};

// The adapter's own failures, as a plugin would report them.
tsr_status fail(tsr_error** error, tsr_status status, const std::string& message) {
  const tsr_host_api* host = g_host.load();
  if (error != nullptr && host != nullptr) *error = host->error_new(status, message.data(), message.size());
  return status;
}

// A NULL or short args struct, or one without a backend, is refused, never dereferenced.
template <class Args>
bool usable(const Args* a) {
  return a != nullptr && a->struct_size >= sizeof(Args) && a->backend != nullptr;
}
#define TSR_1X_ARGS(a, entry)                                                                     \
  if (!usable(a)) {                                                                               \
    return fail(error, TSR_STATUS_INVALID_ARGUMENT, entry ": args NULL, too small or without a backend"); \
  }                                                                                               \
  const Adapted& self = adapted(a->backend);                                                      \
  const Table1x& t = *self.adapter->t

// ---- registry ----

// Registry args without a registry cannot reach the plugin.
#define TSR_1X_REG_ARGS(a, entry) \
  if (a == nullptr || a->struct_size < sizeof(*a) || a->reg == nullptr) \
    return fail(error, TSR_STATUS_INVALID_ARGUMENT, entry ": args NULL, too small or without a registry")

tsr_status device_count(tsr_device_count_args* a, tsr_error** error) {
  TSR_1X_REG_ARGS(a, "device_count");
  return Impl::of(a->reg).t->device_count(&a->count, error);
}

tsr_status device_props(tsr_device_props_args* a, tsr_error** error) {
  TSR_1X_REG_ARGS(a, "device_props");
  return Impl::of(a->reg).t->device_props(a->device, a->props, error);
}

tsr_status backend_create(tsr_backend_create_args* a, tsr_error** error) {
  TSR_1X_REG_ARGS(a, "backend_create");
  const Impl& adapter = Impl::of(a->reg);
  auto* wrapper = new (std::nothrow) Adapted{&adapter, nullptr};
  if (wrapper == nullptr) return fail(error, TSR_STATUS_OUT_OF_MEMORY, "backend_create: out of memory");
  const tsr_status status = adapter.t->backend_create(a->params, &wrapper->inner, error);
  if (status != TSR_STATUS_OK) {
    delete wrapper;
    return status;
  }
  a->backend = reinterpret_cast<tsr_backend*>(wrapper);
  return TSR_STATUS_OK;
}

void* get_proc(const tsr_backend_reg_iface*, const char*) { return nullptr; }  // 1.x had no named features

// ---- backend ----

void backend_destroy(tsr_backend* b) {
  if (b == nullptr) return;
  Adapted* self = &adapted(b);
  self->adapter->t->backend_destroy(self->inner);
  delete self;
}

// What 1.x had: the ops up to copy_blocks, rope without 2.0's YaRN fields (and without
// freq_factors before 1.4), attention without 2.0's window, softcap and sinks.
bool in_abi(const Impl& adapter, const tsr_op& op_value, const void* params) {
  int32_t raw = 0;  // a C caller may pass any int: loading it as a tsr_op could be undefined
  std::memcpy(&raw, &op_value, sizeof(raw));
  if (raw < 0 || raw > TSR_OP_COPY_BLOCKS) return false;
  const auto op = static_cast<tsr_op>(raw);
  if (params == nullptr) return true;  // the plugin refuses NULL params itself
  if (op == TSR_OP_ROPE) {
    const auto& p = *static_cast<const tsr_rope_params*>(params);
    if (p.struct_size < sizeof(p)) return true;  // too short to carry them; the plugin checks
    const bool yarn = p.ext_factor != 0 || (p.attn_factor != 0 && p.attn_factor != 1);
    return !yarn && (adapter.minor >= 4 || p.freq_factors == nullptr);
  }
  if (op == TSR_OP_ATTENTION) {
    const auto& p = *static_cast<const tsr_attention_params*>(params);
    return p.struct_size < sizeof(p) || (p.window == 0 && p.softcap == 0 && p.sinks == nullptr);
  }
  return true;
}

int32_t supports(const tsr_backend* b, const tsr_op_support_query* q) {
  if (b == nullptr || q == nullptr || q->struct_size < sizeof(tsr_op_support_query)) return 0;
  const Adapted& self = adapted(b);
  if (!in_abi(*self.adapter, q->op, q->params)) return 0;
  return self.adapter->t->supports(self.inner, q->op, q->dtypes, q->n_dtypes);
}

tsr_status buffer_alloc(tsr_buffer_alloc_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "buffer_alloc");
  return t.buffer_alloc(self.inner, a->size, &a->buffer, error);
}

tsr_status buffer_from_host(tsr_buffer_from_host_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "buffer_from_host");
  return t.buffer_from_host(self.inner, a->ptr, a->size, &a->buffer, error);
}

void buffer_free(tsr_backend* b, tsr_buffer* buffer) {
  if (b != nullptr) adapted(b).adapter->t->buffer_free(adapted(b).inner, buffer);
}

tsr_status buffer_write(const tsr_buffer_write_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "buffer_write");
  return t.buffer_write(self.inner, a->stream, a->buffer, a->offset, a->src, a->size, error);
}

tsr_status buffer_read(const tsr_buffer_read_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "buffer_read");
  return t.buffer_read(self.inner, a->stream, a->buffer, a->offset, a->dst, a->size, error);
}

tsr_status buffer_memset(const tsr_buffer_memset_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "buffer_memset");
  return t.buffer_memset(self.inner, a->stream, a->buffer, a->offset, a->value, a->size, error);
}

tsr_status stream_create(tsr_stream_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "stream_create");
  return t.stream_create(self.inner, &a->stream, error);
}

void stream_destroy(tsr_backend* b, tsr_stream* s) {
  if (b != nullptr) adapted(b).adapter->t->stream_destroy(adapted(b).inner, s);
}

tsr_status stream_synchronize(const tsr_stream_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "stream_synchronize");
  return t.stream_synchronize(self.inner, a->stream, error);
}

tsr_status event_create(tsr_event_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "event_create");
  return t.event_create(self.inner, &a->event, error);
}

void event_destroy(tsr_backend* b, tsr_event* e) {
  if (b != nullptr) adapted(b).adapter->t->event_destroy(adapted(b).inner, e);
}

tsr_status event_record(const tsr_event_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "event_record");
  return t.event_record(self.inner, a->event, a->stream, error);
}

tsr_status event_wait(const tsr_event_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "event_wait");
  return t.event_wait(self.inner, a->stream, a->event, error);
}

tsr_status event_synchronize(const tsr_event_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "event_synchronize");
  return t.event_synchronize(self.inner, a->event, error);
}

// Why in_abi said no, for the error.
std::string refusal(const tsr_op& op_value, const void* params, const std::string& abi) {
  const std::string built = "the backend was built for " + abi;
  int32_t raw = 0;
  std::memcpy(&raw, &op_value, sizeof(raw));
  if (raw < 0 || raw > TSR_OP_COPY_BLOCKS) return "op " + std::to_string(raw) + " is not in " + abi + ", which the backend was built for";
  const auto op = static_cast<tsr_op>(raw);
  if (op == TSR_OP_ROPE) {
    const auto& p = *static_cast<const tsr_rope_params*>(params);
    if (p.ext_factor != 0 || (p.attn_factor != 0 && p.attn_factor != 1)) return built + ", which has no YaRN RoPE (2.0)";
    return built + ", which has no RoPE frequency factors (they came with 1.4)";
  }
  return built + ", whose attention has no sliding window, softcap or sinks (2.0)";
}

template <class P>
tsr_status call(OpEntry<P> entry, const Adapted& self, tsr_stream* s, const void* params, tsr_error** error) {
  return entry(self.inner, s, static_cast<const P*>(params), error);
}

tsr_status enqueue(tsr_backend* b, tsr_stream* s, const tsr_op_desc* d, tsr_error** error) {
  if (b == nullptr || d == nullptr || d->struct_size < sizeof(tsr_op_desc)) {
    return fail(error, TSR_STATUS_INVALID_ARGUMENT, "enqueue: backend NULL, or op desc NULL or too small");
  }
  const Adapted& self = adapted(b);
  const Impl& adapter = *self.adapter;
  const Table1x& t = *adapter.t;
  if (!in_abi(adapter, d->op, d->params)) {
    const std::string abi = "ABI 1." + std::to_string(adapter.minor);
    return fail(error, TSR_STATUS_UNSUPPORTED, refusal(d->op, d->params, abi));
  }
  switch (d->op) {
    case TSR_OP_GET_ROWS: return call(t.get_rows, self, s, d->params, error);
    case TSR_OP_RMS_NORM: return call(t.rms_norm, self, s, d->params, error);
    case TSR_OP_MATMUL: return call(t.matmul, self, s, d->params, error);
    case TSR_OP_ROPE: return call(t.rope, self, s, d->params, error);
    case TSR_OP_KV_WRITE: return call(t.kv_write, self, s, d->params, error);
    case TSR_OP_ATTENTION: return call(t.attention, self, s, d->params, error);
    case TSR_OP_SILU_MUL: return call(t.silu_mul, self, s, d->params, error);
    case TSR_OP_ADD: return call(t.add, self, s, d->params, error);
    case TSR_OP_COPY_BLOCKS: return call(t.copy_blocks, self, s, d->params, error);
    default: return TSR_STATUS_UNSUPPORTED;  // in_abi admitted only the ops above
  }
}

tsr_status graph_begin(const tsr_stream_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "graph_begin");
  return t.graph_begin(self.inner, a->stream, error);
}

tsr_status graph_end(tsr_graph_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "graph_end");
  return t.graph_end(self.inner, a->stream, &a->graph, error);
}

tsr_status graph_launch(const tsr_graph_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "graph_launch");
  return t.graph_launch(self.inner, a->stream, a->graph, error);
}

void graph_destroy(tsr_backend* b, tsr_graph* g) {
  if (b != nullptr) adapted(b).adapter->t->graph_destroy(adapted(b).inner, g);
}

tsr_status weight_pack(tsr_weight_pack_args* a, tsr_error** error) {
  TSR_1X_ARGS(a, "weight_pack");
  return t.weight_pack(self.inner, a->w, a->packed, &a->buffer, error);
}

#undef TSR_1X_ARGS
#undef TSR_1X_REG_ARGS

}  // namespace

Backend1x::Backend1x(const void* table, uint32_t minor, const tsr_host_api* host)
    : impl_(std::make_unique<Impl>()) {
  if (table == nullptr) throw std::invalid_argument("its backend table is NULL");
  const auto& t = *static_cast<const Table1x*>(table);
  validate(t, minor);
  const bool graphs = TSR_1X_HAS(t, graph_destroy) && t.graph_begin != nullptr;
  const bool packs = minor >= 3 && TSR_1X_HAS(t, weight_pack) && t.weight_pack != nullptr;
  impl_->backend = {
      sizeof(tsr_backend_iface),
      backend_destroy, supports,
      buffer_alloc, t.buffer_from_host != nullptr ? buffer_from_host : nullptr, buffer_free, t.buffer_base,
      buffer_write, buffer_read, buffer_memset,
      stream_create, stream_destroy, stream_synchronize,
      event_create, event_destroy, event_record, event_wait, event_synchronize,
      enqueue,
      graphs ? graph_begin : nullptr, graphs ? graph_end : nullptr, graphs ? graph_launch : nullptr,
      graphs ? graph_destroy : nullptr,
      packs ? weight_pack : nullptr,
      nullptr,  // kernel_register came with 2.0
  };
  impl_->reg = {sizeof(tsr_backend_reg_iface), device_count, device_props, backend_create, get_proc,
                &impl_->backend};
  impl_->t = &t;
  impl_->minor = minor;
  g_host.store(host);
}

Backend1x::~Backend1x() = default;

const tsr_backend_reg_iface* Backend1x::reg() const { return &impl_->reg; }

}  // namespace tsr::abi
