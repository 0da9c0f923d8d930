// BackendPlugin<Impl>: fills the backend tables from a C++ class, so a backend is written
// as ordinary C++ (RAII handles, exceptions) and the C boundary is generated once, here.
// Compiled against the ABI 2.x headers it makes the registry (tsr_backend_reg_iface) and
// the backend table whose `enqueue` dispatches each op to Impl's member; against a kept
// 1.x minor's headers (plugin_api/compat) it makes that minor's table of per-op entries.
// The Impl is the same for both.
//
// Impl provides (see sdk/templates/backend for a complete example):
//   struct Buffer;  // RAII device memory: void* data() const; uint64_t size() const
//   struct Stream;  struct Event;                       // any types, owned by the plugin
//   static int32_t device_count();
//   static void device_props(int32_t device, tsr_device_props& props);
//   explicit Impl(const tsr_backend_params&);          // throw to refuse
//   bool supports(tsr_op, std::span<const tsr_dtype>) const;
//   std::unique_ptr<Buffer> buffer_alloc(uint64_t size);
//   std::unique_ptr<Buffer> buffer_from_host(void* ptr, uint64_t size);   // optional
//   void buffer_write(Stream*, Buffer&, uint64_t offset, const void* src, uint64_t size);
//   void buffer_read(Stream*, const Buffer&, uint64_t offset, void* dst, uint64_t size);
//   void buffer_memset(Stream*, Buffer&, uint64_t offset, int value, uint64_t size);
//   std::unique_ptr<Stream> stream_create();   void stream_synchronize(Stream&);
//   std::unique_ptr<Event> event_create();     void event_record(Event&, Stream*);
//   void event_wait(Stream*, Event&);           void event_synchronize(Event&);
//   void get_rows(Stream*, const tsr_get_rows_params&);  ... one per op of ABI 1.0, same
//   pattern; the ops 2.0 added (mul, scale, gelu, gelu_mul, layer_norm, bias_add, softmax,
//   top_k, matmul_id, softcap, cast), 2.1 added (moe_combine) and 2.4 added (swiglu_oai)
//   are optional members:
//   without one, that op is unsupported (answer supports() accordingly).
//   struct Graph;                                        // optional (ABI 1.2), with:
//   void graph_begin(Stream&);  std::unique_ptr<Graph> graph_end(Stream&);
//   void graph_launch(Stream&, const Graph&);
//   std::unique_ptr<Buffer> weight_pack(const tsr_tensor& w, tsr_tensor& packed);
//                                  // optional (ABI 1.3): nullptr keeps w as stored
//   void op_refused(Stream*);      // optional: an op's entry failed (e.g. to void a recording)
//   void kernel_register(tsr_dtype, const tsr_quant_kernels&);  // optional (ABI 2.0): take a
//                                  // quant plugin's matmul for weights of that dtype
//   bool supports(const tsr_op_support_query&) const;   // optional (ABI 2.0): answers for
//                                  // the operands too; else supports(op, dtypes) answers
//   static void* get_proc(const char* name);            // optional (ABI 2.0): named features
//   void* host_alloc(uint64_t size);  void host_free(void*);   // optional (ABI 2.3): the
//                                  // feature "tsr_host_memory" (tessera/host_memory.h),
//                                  // answered by get_proc before Impl::get_proc is asked
// A NULL stream is passed through as nullptr: the backend's default stream.
//
// The generated entries check handles, params struct_size and buffer ranges before Impl
// sees them, and turn every exception into a status with an error object.
#pragma once

#include <concepts>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tessera/backend.h"
#include "tessera/sdk/plugin.hpp"
#if TSR_SDK_ABI_AT_LEAST(2, 0)
#include "tessera/quant.h"
#endif
#if TSR_SDK_ABI_AT_LEAST(2, 3)
#include "tessera/host_memory.h"
#endif

namespace tsr::sdk {

// Entry names for error messages, chosen by the params type.
constexpr const char* op_name(const tsr_get_rows_params*) { return "get_rows"; }
constexpr const char* op_name(const tsr_rms_norm_params*) { return "rms_norm"; }
constexpr const char* op_name(const tsr_matmul_params*) { return "matmul"; }
constexpr const char* op_name(const tsr_rope_params*) { return "rope"; }
constexpr const char* op_name(const tsr_kv_write_params*) { return "kv_write"; }
constexpr const char* op_name(const tsr_attention_params*) { return "attention"; }
constexpr const char* op_name(const tsr_silu_mul_params*) { return "silu_mul"; }
constexpr const char* op_name(const tsr_add_params*) { return "add"; }
constexpr const char* op_name(const tsr_copy_blocks_params*) { return "copy_blocks"; }
#if TSR_SDK_ABI_AT_LEAST(2, 0)
constexpr const char* op_name(const tsr_mul_params*) { return "mul"; }
constexpr const char* op_name(const tsr_scale_params*) { return "scale"; }
constexpr const char* op_name(const tsr_gelu_params*) { return "gelu"; }
constexpr const char* op_name(const tsr_layer_norm_params*) { return "layer_norm"; }
constexpr const char* op_name(const tsr_bias_add_params*) { return "bias_add"; }
constexpr const char* op_name(const tsr_softmax_params*) { return "softmax"; }
constexpr const char* op_name(const tsr_top_k_params*) { return "top_k"; }
constexpr const char* op_name(const tsr_matmul_id_params*) { return "matmul_id"; }
constexpr const char* op_name(const tsr_softcap_params*) { return "softcap"; }
constexpr const char* op_name(const tsr_cast_params*) { return "cast"; }
#endif
#if TSR_SDK_ABI_AT_LEAST(2, 1)
constexpr const char* op_name(const tsr_moe_combine_params*) { return "moe_combine"; }
#endif
#if TSR_SDK_ABI_AT_LEAST(2, 4)
constexpr const char* op_name(const tsr_swiglu_oai_params*) { return "swiglu_oai"; }
#endif

#if TSR_SDK_ABI_AT_LEAST(2, 0)
// The quant plugins' kernels a backend was given (kernel_register), by weight dtype.
class QuantKernelRegistry {
 public:
  // Refuses a dtype that has other kernels already; the same kernels again are a no-op.
  void add(tsr_dtype dtype, const tsr_quant_kernels& kernels) {
    if (const tsr_quant_kernels* had = find(dtype)) {
      require(had == &kernels, "kernel_register: dtype " + std::to_string(int(dtype)) +
                                   " has the kernels of another quant plugin already");
      return;
    }
    entries_.emplace_back(dtype, &kernels);
  }
  // NULL when the dtype has no registered kernels.
  const tsr_quant_kernels* find(tsr_dtype dtype) const {
    for (const auto& [d, k] : entries_) {
      if (d == dtype) return k;
    }
    return nullptr;
  }

 private:
  std::vector<std::pair<tsr_dtype, const tsr_quant_kernels*>> entries_;
};
#endif

// The op a caller named, as an int: a C caller may pass any value in an enum, and loading
// a tsr_op outside the enum's range is undefined in C++. -1 for values this header does not
// define, which no backend runs.
inline int32_t known_op(const tsr_op& op) {
  int32_t id = 0;
  std::memcpy(&id, &op, sizeof(id));
  return id >= 0 && id < TSR_OP_COUNT_ ? id : -1;
}

template <class Impl>
class BackendPlugin {
  using Buffer = typename Impl::Buffer;
  using Stream = typename Impl::Stream;
  using Event = typename Impl::Event;

 public:
#if TSR_SDK_ABI_AT_LEAST(2, 0)
  static const tsr_plugin_desc& desc(const char* name, const char* version) {
    static const tsr_plugin_desc d = describe(TSR_PLUGIN_BACKEND, name, version, &reg());
    return d;
  }

  static const tsr_backend_reg_iface& reg() {
    static const tsr_backend_reg_iface r = {
        sizeof(tsr_backend_reg_iface), device_count_v2, device_props_v2, backend_create_v2,
        get_proc, &iface(),
    };
    return r;
  }

  static const tsr_backend_iface& iface() {
    static const tsr_backend_iface t = {
        sizeof(tsr_backend_iface),
        backend_destroy, supports_v2,
        buffer_alloc_v2, from_host_entry(), buffer_free, buffer_base,
        buffer_write_v2, buffer_read_v2, buffer_memset_v2,
        stream_create_v2, stream_destroy, stream_synchronize_v2,
        event_create_v2, event_destroy, event_record_v2, event_wait_v2, event_synchronize_v2,
        enqueue,
        graph_entry(&graph_begin_v2), graph_entry(&graph_end_v2), graph_entry(&graph_launch_v2),
        graph_entry(&graph_destroy),
        weight_pack_entry(),
        kernel_register_entry(),
    };
    return t;
  }
#else
  static const tsr_plugin_desc& desc(const char* name, const char* version) {
    static const tsr_plugin_desc d = describe(TSR_PLUGIN_BACKEND, name, version, &iface());
    return d;
  }

  static const tsr_backend_iface& iface() {
    static const tsr_backend_iface t = {
        sizeof(tsr_backend_iface),
        device_count, device_props, backend_create, backend_destroy, supports,
        buffer_alloc, from_host_entry(), buffer_free, buffer_base,
        buffer_write, buffer_read, buffer_memset,
        stream_create, stream_destroy, stream_synchronize,
        event_create, event_destroy, event_record, event_wait, event_synchronize,
        op<tsr_get_rows_params, &Impl::get_rows>, op<tsr_rms_norm_params, &Impl::rms_norm>,
        op<tsr_matmul_params, &Impl::matmul>, op<tsr_rope_params, &Impl::rope>,
        op<tsr_kv_write_params, &Impl::kv_write>, op<tsr_attention_params, &Impl::attention>,
        op<tsr_silu_mul_params, &Impl::silu_mul>, op<tsr_add_params, &Impl::add>,
        op<tsr_copy_blocks_params, &Impl::copy_blocks>,
#if TSR_SDK_ABI_AT_LEAST(1, 2)
        graph_entry(&graph_begin), graph_entry(&graph_end), graph_entry(&graph_launch),
        graph_entry(&graph_destroy),
#endif
#if TSR_SDK_ABI_AT_LEAST(1, 3)
        weight_pack_entry(),
#endif
    };
    return t;
  }
#endif


 private:
  static Impl& self(tsr_backend* b) { return object<Impl>(b, "backend"); }
  static Stream* stream(tsr_stream* s) { return from_handle<Stream>(s); }

  static void require_range(const Buffer* buffer, uint64_t offset, uint64_t size,
                            const char* entry) {
    require(buffer != nullptr, std::string(entry) + ": buffer is NULL");
    require(offset <= buffer->size() && size <= buffer->size() - offset,
            std::string(entry) + ": range [" + std::to_string(offset) + ", +" +
                std::to_string(size) + ") outside the buffer of " +
                std::to_string(buffer->size()) + " bytes");
  }

  static void require_device(int32_t device) {
    const int32_t n = Impl::device_count();
    require(device >= 0 && device < n, "device " + std::to_string(device) +
                                           " out of range (" + std::to_string(n) + " devices)");
  }

  // ---- the work of each entry, shared by both table shapes ----

  // The plugin writes the props as it was compiled and says so in struct_size.
  static void fill_device_props(int32_t device, tsr_device_props* props) {
    checked(props, "device_props");
    require_device(device);
    std::memset(props, 0, sizeof(tsr_device_props));
    props->struct_size = sizeof(tsr_device_props);
    Impl::device_props(device, *props);
  }

  static tsr_backend* create(const tsr_backend_params* params) {
    const tsr_backend_params& p = checked(params, "backend_create");
    require_device(p.device);
    require(p.n_threads >= 0, "backend_create: negative thread count");
    return to_handle<tsr_backend>(new Impl(p));
  }

  static void backend_destroy(tsr_backend* b) { delete from_handle<Impl>(b); }

  static bool supported(const tsr_backend* b, tsr_op op, const tsr_dtype* dtypes, int32_t n) {
    if (b == nullptr || dtypes == nullptr || n < 1 || known_op(op) < 0) return false;
    return from_handle<const Impl>(b)->supports(op, std::span(dtypes, static_cast<size_t>(n)));
  }

  static tsr_buffer* alloc(tsr_backend* b, uint64_t size) {
    return to_handle<tsr_buffer>(self(b).buffer_alloc(size).release());
  }

  static tsr_buffer* wrap(tsr_backend* b, void* ptr, uint64_t size) {
    Impl& impl = self(b);
    require(ptr != nullptr || size == 0, "buffer_from_host: ptr is NULL");
    return to_handle<tsr_buffer>(impl.buffer_from_host(ptr, size).release());
  }

  static void write(tsr_backend* b, tsr_stream* s, tsr_buffer* dst, uint64_t offset,
                    const void* src, uint64_t size) {
    Impl& impl = self(b);
    Buffer* buffer = from_handle<Buffer>(dst);
    require_range(buffer, offset, size, "buffer_write");
    require(src != nullptr || size == 0, "buffer_write: src is NULL");
    impl.buffer_write(stream(s), *buffer, offset, src, size);
  }

  static void read(tsr_backend* b, tsr_stream* s, const tsr_buffer* src, uint64_t offset,
                   void* dst, uint64_t size) {
    Impl& impl = self(b);
    const Buffer* buffer = from_handle<const Buffer>(src);
    require_range(buffer, offset, size, "buffer_read");
    require(dst != nullptr || size == 0, "buffer_read: dst is NULL");
    impl.buffer_read(stream(s), *buffer, offset, dst, size);
  }

  static void fill(tsr_backend* b, tsr_stream* s, tsr_buffer* dst, uint64_t offset, int value,
                   uint64_t size) {
    Impl& impl = self(b);
    Buffer* buffer = from_handle<Buffer>(dst);
    require_range(buffer, offset, size, "buffer_memset");
    impl.buffer_memset(stream(s), *buffer, offset, value, size);
  }

  static tsr_stream* new_stream(tsr_backend* b) {
    return to_handle<tsr_stream>(self(b).stream_create().release());
  }
  static void sync(tsr_backend* b, tsr_stream* s) {
    Impl& impl = self(b);
    impl.stream_synchronize(object<Stream>(s, "stream_synchronize: stream"));
  }
  static tsr_event* new_event(tsr_backend* b) {
    return to_handle<tsr_event>(self(b).event_create().release());
  }
  static void record(tsr_backend* b, tsr_event* e, tsr_stream* s) {
    Impl& impl = self(b);
    impl.event_record(object<Event>(e, "event_record: event"), stream(s));
  }
  static void wait(tsr_backend* b, tsr_stream* s, tsr_event* e) {
    Impl& impl = self(b);
    impl.event_wait(stream(s), object<Event>(e, "event_wait: event"));
  }
  static void event_sync(tsr_backend* b, tsr_event* e) {
    Impl& impl = self(b);
    impl.event_synchronize(object<Event>(e, "event_synchronize: event"));
  }

  static void buffer_free(tsr_backend*, tsr_buffer* buffer) { delete from_handle<Buffer>(buffer); }

  static void* buffer_base(const tsr_buffer* buffer) {
    return buffer != nullptr ? from_handle<const Buffer>(buffer)->data() : nullptr;
  }

  static void stream_destroy(tsr_backend*, tsr_stream* s) { delete stream(s); }
  static void event_destroy(tsr_backend*, tsr_event* e) { delete from_handle<Event>(e); }

#if TSR_SDK_ABI_AT_LEAST(1, 2)
  // Graphs when Impl records them (it has a Graph type and the three members), else the
  // four entries are NULL.
  static constexpr bool kGraphs = requires(Impl& i, Stream& s, const typename Impl::Graph& g) {
    i.graph_begin(s);
    { i.graph_end(s) } -> std::same_as<std::unique_ptr<typename Impl::Graph>>;
    i.graph_launch(s, g);
  };

  template <class Entry>
  static constexpr Entry graph_entry(Entry entry) {
    return kGraphs ? entry : nullptr;
  }

  static void begin([[maybe_unused]] tsr_backend* b, [[maybe_unused]] tsr_stream* s) {
    if constexpr (kGraphs) self(b).graph_begin(object<Stream>(s, "graph_begin: stream"));
  }

  // Ends the recording before refusing a NULL out, as the ABI promises.
  static void end([[maybe_unused]] tsr_backend* b, [[maybe_unused]] tsr_stream* s,
                  [[maybe_unused]] tsr_graph** out) {
    if constexpr (kGraphs) {
      Impl& impl = self(b);
      auto graph = impl.graph_end(object<Stream>(s, "graph_end: stream"));
      require(out != nullptr, "graph_end: out is NULL");
      *out = to_handle<tsr_graph>(graph.release());
    }
  }

  static void launch([[maybe_unused]] tsr_backend* b, [[maybe_unused]] tsr_stream* s,
                     [[maybe_unused]] const tsr_graph* g) {
    if constexpr (kGraphs) {
      using Graph = typename Impl::Graph;
      self(b).graph_launch(object<Stream>(s, "graph_launch: stream"),
                           object<const Graph>(g, "graph_launch: graph"));
    }
  }

  static void graph_destroy(tsr_backend*, [[maybe_unused]] tsr_graph* g) {
    if constexpr (kGraphs) delete from_handle<typename Impl::Graph>(g);
  }

#endif

  // Weight packing when Impl packs (weight_pack returns the buffer, nullptr to keep the
  // weight as stored). Returns false for "keep it as stored".
  static constexpr bool kPacks = requires(Impl& i, const tsr_tensor& w, tsr_tensor& out) {
    { i.weight_pack(w, out) } -> std::same_as<std::unique_ptr<Buffer>>;
  };

  static bool pack([[maybe_unused]] tsr_backend* b, [[maybe_unused]] const tsr_tensor* w,
                   [[maybe_unused]] tsr_tensor* packed, [[maybe_unused]] tsr_buffer** buffer) {
    if constexpr (kPacks) {
      Impl& impl = self(b);
      require(w != nullptr && packed != nullptr && buffer != nullptr, "weight_pack: NULL argument");
      tsr_tensor out{};
      std::unique_ptr<Buffer> held = impl.weight_pack(checked(w, "weight_pack w"), out);
      if (held == nullptr) return false;
      *packed = out;
      *buffer = to_handle<tsr_buffer>(held.release());
    }
    return kPacks;
  }

  // One op: params checks, then Impl's member.
  template <class Params, void (Impl::*Op)(Stream*, const Params&)>
  static void run(Impl& impl, tsr_stream* s, const Params* params) {
    (impl.*Op)(stream(s), checked(params, op_name(params)));
  }

  // A failed op is reported to Impl's op_refused, where it has one.
  static tsr_status after_op(tsr_status status, tsr_backend* b, tsr_stream* s) {
    if constexpr (requires(Impl& i, Stream* st) { i.op_refused(st); }) {
      if (status != TSR_STATUS_OK && b != nullptr) from_handle<Impl>(b)->op_refused(stream(s));
    }
    return status;
  }

#if TSR_SDK_ABI_AT_LEAST(2, 0)
  // ---- ABI 2.x entries: one args struct each ----

  static tsr_status device_count_v2(tsr_device_count_args* a, tsr_error** error) {
    return boundary(error, [&] { checked(a, "device_count");
      a->count = Impl::device_count(); });
  }
  static tsr_status device_props_v2(tsr_device_props_args* a, tsr_error** error) {
    return boundary(error, [&] { fill_device_props(checked(a, "device_props").device, a->props); });
  }
  static tsr_status backend_create_v2(tsr_backend_create_args* a, tsr_error** error) {
    return boundary(error, [&] { checked(a, "backend_create");
      a->backend = create(a->params); });
  }

  static void* get_proc([[maybe_unused]] const tsr_backend_reg_iface* reg, const char* name) {
    if (name == nullptr) return nullptr;
#if TSR_SDK_ABI_AT_LEAST(2, 3)
    if constexpr (kHasHostMemory) {
      if (std::strcmp(name, TSR_HOST_MEMORY_PROC) == 0) return const_cast<tsr_host_memory_iface*>(&host_memory());
    }
#endif
    if constexpr (requires(const char* n) { { Impl::get_proc(n) } -> std::same_as<void*>; }) {
      return Impl::get_proc(name);
    }
    return nullptr;
  }

#if TSR_SDK_ABI_AT_LEAST(2, 3)
  // ---- the feature "tsr_host_memory" ----
  static constexpr bool kHasHostMemory = requires(Impl& i, void* p) {
    { i.host_alloc(uint64_t{}) } -> std::same_as<void*>;
    i.host_free(p);
  };
  static const tsr_host_memory_iface& host_memory() {
    static const tsr_host_memory_iface t = {sizeof(tsr_host_memory_iface), host_alloc_entry, host_free_entry};
    return t;
  }
  static tsr_status host_alloc_entry(tsr_host_alloc_args* a, tsr_error** error) {
    return boundary(error, [&] {
      checked(a, "host_alloc");
      a->ptr = a->size == 0 ? nullptr : self(a->backend).host_alloc(a->size);
    });
  }
  static void host_free_entry(tsr_backend* b, void* ptr) {
    if (b != nullptr && ptr != nullptr) from_handle<Impl>(b)->host_free(ptr);
  }
#endif

  // supports() has no error channel: a failure means "no". Impl answers for the operands
  // where it can, else for the dtypes.
  static int32_t supports_v2(const tsr_backend* b, const tsr_op_support_query* q) {
    if (b == nullptr || q == nullptr || q->struct_size < sizeof(tsr_op_support_query) || known_op(q->op) < 0) return 0;
    try {
      if constexpr (requires(const Impl& i) { { i.supports(*q) } -> std::same_as<bool>; }) {
        return from_handle<const Impl>(b)->supports(*q);
      }
      return supported(b, q->op, q->dtypes, q->n_dtypes);
    } catch (...) {
      return 0;
    }
  }

  static tsr_status buffer_alloc_v2(tsr_buffer_alloc_args* a, tsr_error** error) {
    return boundary(error, [&] {
      checked(a, "buffer_alloc");
      a->buffer = alloc(a->backend, a->size);
    });
  }
  static tsr_status buffer_from_host_v2(tsr_buffer_from_host_args* a, tsr_error** error) {
    return boundary(error, [&] {
      checked(a, "buffer_from_host");
      a->buffer = wrap(a->backend, a->ptr, a->size);
    });
  }
  // NULL in the table when Impl cannot wrap host memory: the host then copies.
  static constexpr auto from_host_entry() {
    using Entry = decltype(&buffer_from_host_v2);
    if constexpr (requires(Impl& i, void* p) { i.buffer_from_host(p, uint64_t{}); }) {
      return Entry{&buffer_from_host_v2};
    } else {
      return Entry{nullptr};
    }
  }
  static tsr_status buffer_write_v2(const tsr_buffer_write_args* a, tsr_error** error) {
    return boundary(error, [&] {
      const auto& x = checked(a, "buffer_write");
      write(x.backend, x.stream, x.buffer, x.offset, x.src, x.size);
    });
  }
  static tsr_status buffer_read_v2(const tsr_buffer_read_args* a, tsr_error** error) {
    return boundary(error, [&] {
      const auto& x = checked(a, "buffer_read");
      read(x.backend, x.stream, x.buffer, x.offset, x.dst, x.size);
    });
  }
  static tsr_status buffer_memset_v2(const tsr_buffer_memset_args* a, tsr_error** error) {
    return boundary(error, [&] {
      const auto& x = checked(a, "buffer_memset");
      fill(x.backend, x.stream, x.buffer, x.offset, x.value, x.size);
    });
  }
  static tsr_status stream_create_v2(tsr_stream_args* a, tsr_error** error) {
    return boundary(error, [&] { checked(a, "stream_create");
      a->stream = new_stream(a->backend); });
  }
  static tsr_status stream_synchronize_v2(const tsr_stream_args* a, tsr_error** error) {
    return boundary(error, [&] { sync(checked(a, "stream_synchronize").backend, a->stream); });
  }
  static tsr_status event_create_v2(tsr_event_args* a, tsr_error** error) {
    return boundary(error, [&] { checked(a, "event_create");
      a->event = new_event(a->backend); });
  }
  static tsr_status event_record_v2(const tsr_event_args* a, tsr_error** error) {
    return boundary(error, [&] { record(checked(a, "event_record").backend, a->event, a->stream); });
  }
  static tsr_status event_wait_v2(const tsr_event_args* a, tsr_error** error) {
    return boundary(error, [&] { wait(checked(a, "event_wait").backend, a->stream, a->event); });
  }
  static tsr_status event_synchronize_v2(const tsr_event_args* a, tsr_error** error) {
    return boundary(error, [&] { event_sync(checked(a, "event_synchronize").backend, a->event); });
  }

  // Ops are data: the op's identifier selects Impl's member and the params type.
  static tsr_status enqueue(tsr_backend* b, tsr_stream* s, const tsr_op_desc* d, tsr_error** error) {
    return after_op(boundary(error, [&] {
      Impl& impl = self(b);
      const tsr_op_desc& desc = checked(d, "enqueue");
      const void* p = desc.params;
      const int32_t id = known_op(desc.op);
      switch (id) {
        case TSR_OP_GET_ROWS: return run<tsr_get_rows_params, &Impl::get_rows>(impl, s, static_cast<const tsr_get_rows_params*>(p));
        case TSR_OP_RMS_NORM: return run<tsr_rms_norm_params, &Impl::rms_norm>(impl, s, static_cast<const tsr_rms_norm_params*>(p));
        case TSR_OP_MATMUL: return run<tsr_matmul_params, &Impl::matmul>(impl, s, static_cast<const tsr_matmul_params*>(p));
        case TSR_OP_ROPE: return run<tsr_rope_params, &Impl::rope>(impl, s, static_cast<const tsr_rope_params*>(p));
        case TSR_OP_KV_WRITE: return run<tsr_kv_write_params, &Impl::kv_write>(impl, s, static_cast<const tsr_kv_write_params*>(p));
        case TSR_OP_ATTENTION: return run<tsr_attention_params, &Impl::attention>(impl, s, static_cast<const tsr_attention_params*>(p));
        case TSR_OP_SILU_MUL: return run<tsr_silu_mul_params, &Impl::silu_mul>(impl, s, static_cast<const tsr_silu_mul_params*>(p));
        case TSR_OP_ADD: return run<tsr_add_params, &Impl::add>(impl, s, static_cast<const tsr_add_params*>(p));
        case TSR_OP_COPY_BLOCKS: return run<tsr_copy_blocks_params, &Impl::copy_blocks>(impl, s, static_cast<const tsr_copy_blocks_params*>(p));
        // The ops 2.0 added reach Impl where it has the member; else they are unknown to it.
#define TSR_SDK_OPTIONAL_OP(id, P, member)                                                    \
  case id:                                                                                    \
    if constexpr (requires(Impl& i, Stream* st, const P& q) { i.member(st, q); }) {           \
      return run<P, &Impl::member>(impl, s, static_cast<const P*>(p));                        \
    }                                                                                         \
    break;
        TSR_SDK_OPTIONAL_OP(TSR_OP_MUL, tsr_mul_params, mul)
        TSR_SDK_OPTIONAL_OP(TSR_OP_SCALE, tsr_scale_params, scale)
        TSR_SDK_OPTIONAL_OP(TSR_OP_GELU, tsr_gelu_params, gelu)
        TSR_SDK_OPTIONAL_OP(TSR_OP_GELU_MUL, tsr_gelu_params, gelu_mul)
        TSR_SDK_OPTIONAL_OP(TSR_OP_LAYER_NORM, tsr_layer_norm_params, layer_norm)
        TSR_SDK_OPTIONAL_OP(TSR_OP_BIAS_ADD, tsr_bias_add_params, bias_add)
        TSR_SDK_OPTIONAL_OP(TSR_OP_SOFTMAX, tsr_softmax_params, softmax)
        TSR_SDK_OPTIONAL_OP(TSR_OP_TOP_K, tsr_top_k_params, top_k)
        TSR_SDK_OPTIONAL_OP(TSR_OP_MATMUL_ID, tsr_matmul_id_params, matmul_id)
        TSR_SDK_OPTIONAL_OP(TSR_OP_SOFTCAP, tsr_softcap_params, softcap)
        TSR_SDK_OPTIONAL_OP(TSR_OP_CAST, tsr_cast_params, cast)
#if TSR_SDK_ABI_AT_LEAST(2, 1)
        TSR_SDK_OPTIONAL_OP(TSR_OP_MOE_COMBINE, tsr_moe_combine_params, moe_combine)
#endif
#if TSR_SDK_ABI_AT_LEAST(2, 4)
        TSR_SDK_OPTIONAL_OP(TSR_OP_SWIGLU_OAI, tsr_swiglu_oai_params, swiglu_oai)
#endif
#undef TSR_SDK_OPTIONAL_OP
        default: break;
      }
      int32_t raw = 0;
      std::memcpy(&raw, &desc.op, sizeof(raw));
      throw Failure(TSR_STATUS_UNSUPPORTED, "enqueue: op " + std::to_string(raw) + " is unknown to this backend");
    }), b, s);
  }

  static tsr_status graph_begin_v2(const tsr_stream_args* a, tsr_error** error) {
    return boundary(error, [&] { begin(checked(a, "graph_begin").backend, a->stream); });
  }
  static tsr_status graph_end_v2(tsr_graph_args* a, tsr_error** error) {
    return boundary(error, [&] {
      require(a != nullptr, "graph_end: args is NULL");
      tsr_graph* graph = nullptr;
      end(a->backend, a->stream, &graph);  // ends the recording before checking the args' size
      checked(a, "graph_end");
      a->graph = graph;
    });
  }
  static tsr_status graph_launch_v2(const tsr_graph_args* a, tsr_error** error) {
    return boundary(error, [&] { launch(checked(a, "graph_launch").backend, a->stream, a->graph); });
  }

  static tsr_status weight_pack_v2(tsr_weight_pack_args* a, tsr_error** error) {
    bool packed = true;
    const tsr_status status = boundary(error, [&] {
      const auto& x = checked(a, "weight_pack");
      packed = pack(x.backend, x.w, a->packed, &a->buffer);
    });
    return packed ? status : TSR_STATUS_UNSUPPORTED;  // UNSUPPORTED carries no error
  }
  static constexpr auto weight_pack_entry() {
    using Entry = decltype(&weight_pack_v2);
    return kPacks ? Entry{&weight_pack_v2} : Entry{nullptr};
  }

  // Quant plugins' kernels when Impl takes them, else the entry is NULL.
  static constexpr bool kTakesKernels = requires(Impl& i, const tsr_quant_kernels& k) {
    i.kernel_register(TSR_DTYPE_PLUGIN, k);
  };

  static tsr_status kernel_register_v2(const tsr_kernel_register_args* a, tsr_error** error) {
    return boundary(error, [&] {
      if constexpr (kTakesKernels) {
        Impl& impl = self(checked(a, "kernel_register").backend);
        require(a->kernels != nullptr && a->kernels->struct_size >= sizeof(tsr_quant_kernels) &&
                    a->kernels->matmul != nullptr,
                "kernel_register: kernels NULL, too small or without a matmul");
        impl.kernel_register(a->dtype, *a->kernels);
      }
    });
  }
  static constexpr auto kernel_register_entry() {
    using Entry = decltype(&kernel_register_v2);
    return kTakesKernels ? Entry{&kernel_register_v2} : Entry{nullptr};
  }
#else
  // ---- ABI 1.x entries: the table of the kept minor's headers ----

  static tsr_status device_count(int32_t* count, tsr_error** error) {
    return boundary(error, [&] {
      require(count != nullptr, "device_count: count is NULL");
      *count = Impl::device_count();
    });
  }
  static tsr_status device_props(int32_t device, tsr_device_props* props, tsr_error** error) {
    return boundary(error, [&] { fill_device_props(device, props); });
  }
  static tsr_status backend_create(const tsr_backend_params* params, tsr_backend** out,
                                   tsr_error** error) {
    return boundary(error, [&] {
      require(out != nullptr, "backend_create: out is NULL");
      *out = create(params);
    });
  }
  static int32_t supports(const tsr_backend* b, tsr_op op, const tsr_dtype* dtypes, int32_t n) {
    try {
      return supported(b, op, dtypes, n);
    } catch (...) {
      return 0;  // supports() has no error channel: a failure means "no"
    }
  }
  static tsr_status buffer_alloc(tsr_backend* b, uint64_t size, tsr_buffer** out, tsr_error** error) {
    return boundary(error, [&] {
      require(out != nullptr, "buffer_alloc: out is NULL");
      *out = alloc(b, size);
    });
  }
  static tsr_status buffer_from_host(tsr_backend* b, void* ptr, uint64_t size, tsr_buffer** out,
                                     tsr_error** error) {
    return boundary(error, [&] {
      require(out != nullptr, "buffer_from_host: out is NULL");
      *out = wrap(b, ptr, size);
    });
  }
  static constexpr auto from_host_entry() {
    using Entry = decltype(&buffer_from_host);
    if constexpr (requires(Impl& i, void* p) { i.buffer_from_host(p, uint64_t{}); }) {
      return Entry{&buffer_from_host};
    } else {
      return Entry{nullptr};
    }
  }
  static tsr_status buffer_write(tsr_backend* b, tsr_stream* s, tsr_buffer* dst, uint64_t offset,
                                 const void* src, uint64_t size, tsr_error** error) {
    return boundary(error, [&] { write(b, s, dst, offset, src, size); });
  }
  static tsr_status buffer_read(tsr_backend* b, tsr_stream* s, const tsr_buffer* src,
                                uint64_t offset, void* dst, uint64_t size, tsr_error** error) {
    return boundary(error, [&] { read(b, s, src, offset, dst, size); });
  }
  static tsr_status buffer_memset(tsr_backend* b, tsr_stream* s, tsr_buffer* dst, uint64_t offset,
                                  int value, uint64_t size, tsr_error** error) {
    return boundary(error, [&] { fill(b, s, dst, offset, value, size); });
  }
  static tsr_status stream_create(tsr_backend* b, tsr_stream** out, tsr_error** error) {
    return boundary(error, [&] {
      require(out != nullptr, "stream_create: out is NULL");
      *out = new_stream(b);
    });
  }
  static tsr_status stream_synchronize(tsr_backend* b, tsr_stream* s, tsr_error** error) {
    return boundary(error, [&] { sync(b, s); });
  }
  static tsr_status event_create(tsr_backend* b, tsr_event** out, tsr_error** error) {
    return boundary(error, [&] {
      require(out != nullptr, "event_create: out is NULL");
      *out = new_event(b);
    });
  }
  static tsr_status event_record(tsr_backend* b, tsr_event* e, tsr_stream* s, tsr_error** error) {
    return boundary(error, [&] { record(b, e, s); });
  }
  static tsr_status event_wait(tsr_backend* b, tsr_stream* s, tsr_event* e, tsr_error** error) {
    return boundary(error, [&] { wait(b, s, e); });
  }
  static tsr_status event_synchronize(tsr_backend* b, tsr_event* e, tsr_error** error) {
    return boundary(error, [&] { event_sync(b, e); });
  }
#if TSR_SDK_ABI_AT_LEAST(1, 2)
  static tsr_status graph_begin(tsr_backend* b, tsr_stream* s, tsr_error** error) {
    return boundary(error, [&] { begin(b, s); });
  }
  static tsr_status graph_end(tsr_backend* b, tsr_stream* s, tsr_graph** out, tsr_error** error) {
    return boundary(error, [&] { end(b, s, out); });
  }
  static tsr_status graph_launch(tsr_backend* b, tsr_stream* s, const tsr_graph* g, tsr_error** error) {
    return boundary(error, [&] { launch(b, s, g); });
  }
#endif
  static tsr_status weight_pack(tsr_backend* b, const tsr_tensor* w, tsr_tensor* packed,
                                tsr_buffer** buffer, tsr_error** error) {
    bool done = true;
    const tsr_status status = boundary(error, [&] { done = pack(b, w, packed, buffer); });
    return done ? status : TSR_STATUS_UNSUPPORTED;  // UNSUPPORTED carries no error
  }
  static constexpr auto weight_pack_entry() {
    using Entry = decltype(&weight_pack);
    return kPacks ? Entry{&weight_pack} : Entry{nullptr};
  }

  // One entry per op.
  template <class Params, void (Impl::*Op)(Stream*, const Params&)>
  static tsr_status op(tsr_backend* b, tsr_stream* s, const Params* params, tsr_error** error) {
    return after_op(boundary(error, [&] { run<Params, Op>(self(b), s, params); }), b, s);
  }
#endif
};

}  // namespace tsr::sdk

// Defines tsr_plugin_query for backend class `Impl` named `name` (the file is
// libtessera_backend_<name>.so).
#define TSR_SDK_BACKEND_PLUGIN(Impl, name, version) \
  TSR_SDK_DEFINE_QUERY(::tsr::sdk::BackendPlugin<Impl>, name, version)
