// BackendPlugin<Impl>: fills a tsr_backend_iface from a C++ class, so a backend is written
// as ordinary C++ (RAII handles, exceptions) and the C boundary is generated once, here.
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
//   void get_rows(Stream*, const tsr_get_rows_params&);  ... one per op, same pattern.
//   struct Graph;                                        // optional (ABI 1.2), with:
//   void graph_begin(Stream&);  std::unique_ptr<Graph> graph_end(Stream&);
//   void graph_launch(Stream&, const Graph&);
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

#include "tessera/backend.h"
#include "tessera/sdk/plugin.hpp"

namespace tsr::sdk {

#if TSR_ABI_MINOR >= 4
// ABI 1.4 appended freq_factors to tsr_rope_params.
template <>
inline constexpr size_t kAbi10Size<tsr_rope_params> = offsetof(tsr_rope_params, freq_factors);
#endif

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

template <class Impl>
class BackendPlugin {
  using Buffer = typename Impl::Buffer;
  using Stream = typename Impl::Stream;
  using Event = typename Impl::Event;

 public:
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
#if TSR_ABI_MINOR >= 2
        graph_entry(&graph_begin), graph_entry(&graph_end), graph_entry(&graph_launch),
        graph_entry(&graph_destroy),
#endif
    };
    return t;
  }

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

  static tsr_status device_count(int32_t* count, tsr_error** error) {
    return boundary(error, [&] {
      require(count != nullptr, "device_count: count is NULL");
      *count = Impl::device_count();
    });
  }

  static void require_device(int32_t device) {
    const int32_t n = Impl::device_count();
    require(device >= 0 && device < n, "device " + std::to_string(device) +
                                           " out of range (" + std::to_string(n) + " devices)");
  }

  // The plugin writes the props as it was compiled and says so in struct_size.
  static tsr_status device_props(int32_t device, tsr_device_props* props, tsr_error** error) {
    return boundary(error, [&] {
      checked(props, "device_props");
      require_device(device);
      std::memset(props, 0, sizeof(tsr_device_props));
      props->struct_size = sizeof(tsr_device_props);
      Impl::device_props(device, *props);
    });
  }

  static tsr_status backend_create(const tsr_backend_params* params, tsr_backend** out,
                                   tsr_error** error) {
    return boundary(error, [&] {
      const tsr_backend_params& p = checked(params, "backend_create");
      require(out != nullptr, "backend_create: out is NULL");
      require_device(p.device);
      require(p.n_threads >= 0, "backend_create: negative thread count");
      *out = to_handle<tsr_backend>(new Impl(p));
    });
  }

  static void backend_destroy(tsr_backend* b) { delete from_handle<Impl>(b); }

  static int32_t supports(const tsr_backend* b, tsr_op op, const tsr_dtype* dtypes,
                          int32_t n) {
    if (b == nullptr || dtypes == nullptr || n < 1) return 0;
    try {
      return from_handle<const Impl>(b)->supports(op, std::span(dtypes, static_cast<size_t>(n)));
    } catch (...) {
      return 0;  // supports() has no error channel: a failure means "no"
    }
  }

  static tsr_status buffer_alloc(tsr_backend* b, uint64_t size, tsr_buffer** out,
                                 tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      require(out != nullptr, "buffer_alloc: out is NULL");
      *out = to_handle<tsr_buffer>(impl.buffer_alloc(size).release());
    });
  }

  static tsr_status buffer_from_host(tsr_backend* b, void* ptr, uint64_t size, tsr_buffer** out,
                                     tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      require(out != nullptr && (ptr != nullptr || size == 0), "buffer_from_host: NULL argument");
      *out = to_handle<tsr_buffer>(impl.buffer_from_host(ptr, size).release());
    });
  }

  // NULL in the table when Impl cannot wrap host memory: the host then copies.
  static constexpr auto from_host_entry() {
    using Entry = decltype(&buffer_from_host);
    if constexpr (requires(Impl& i, void* p) { i.buffer_from_host(p, uint64_t{}); }) {
      return Entry{&buffer_from_host};
    } else {
      return Entry{nullptr};
    }
  }

  static void buffer_free(tsr_backend*, tsr_buffer* buffer) { delete from_handle<Buffer>(buffer); }

  static void* buffer_base(const tsr_buffer* buffer) {
    return buffer != nullptr ? from_handle<const Buffer>(buffer)->data() : nullptr;
  }

  static tsr_status buffer_write(tsr_backend* b, tsr_stream* s, tsr_buffer* dst, uint64_t offset,
                                 const void* src, uint64_t size, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      Buffer* buffer = from_handle<Buffer>(dst);
      require_range(buffer, offset, size, "buffer_write");
      require(src != nullptr || size == 0, "buffer_write: src is NULL");
      impl.buffer_write(stream(s), *buffer, offset, src, size);
    });
  }

  static tsr_status buffer_read(tsr_backend* b, tsr_stream* s, const tsr_buffer* src,
                                uint64_t offset, void* dst, uint64_t size, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      const Buffer* buffer = from_handle<const Buffer>(src);
      require_range(buffer, offset, size, "buffer_read");
      require(dst != nullptr || size == 0, "buffer_read: dst is NULL");
      impl.buffer_read(stream(s), *buffer, offset, dst, size);
    });
  }

  static tsr_status buffer_memset(tsr_backend* b, tsr_stream* s, tsr_buffer* dst, uint64_t offset,
                                  int value, uint64_t size, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      Buffer* buffer = from_handle<Buffer>(dst);
      require_range(buffer, offset, size, "buffer_memset");
      impl.buffer_memset(stream(s), *buffer, offset, value, size);
    });
  }

  static tsr_status stream_create(tsr_backend* b, tsr_stream** out, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      require(out != nullptr, "stream_create: out is NULL");
      *out = to_handle<tsr_stream>(impl.stream_create().release());
    });
  }

  static void stream_destroy(tsr_backend*, tsr_stream* s) { delete stream(s); }

  static tsr_status stream_synchronize(tsr_backend* b, tsr_stream* s, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      impl.stream_synchronize(object<Stream>(s, "stream_synchronize: stream"));
    });
  }

  static tsr_status event_create(tsr_backend* b, tsr_event** out, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      require(out != nullptr, "event_create: out is NULL");
      *out = to_handle<tsr_event>(impl.event_create().release());
    });
  }

  static void event_destroy(tsr_backend*, tsr_event* e) { delete from_handle<Event>(e); }

  static tsr_status event_record(tsr_backend* b, tsr_event* e, tsr_stream* s, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      impl.event_record(object<Event>(e, "event_record: event"), stream(s));
    });
  }

  static tsr_status event_wait(tsr_backend* b, tsr_stream* s, tsr_event* e, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      impl.event_wait(stream(s), object<Event>(e, "event_wait: event"));
    });
  }

  static tsr_status event_synchronize(tsr_backend* b, tsr_event* e, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      impl.event_synchronize(object<Event>(e, "event_synchronize: event"));
    });
  }

#if TSR_ABI_MINOR >= 2
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

  static tsr_status graph_begin([[maybe_unused]] tsr_backend* b, [[maybe_unused]] tsr_stream* s,
                                tsr_error** error) {
    return boundary(error, [&] {
      if constexpr (kGraphs) self(b).graph_begin(object<Stream>(s, "graph_begin: stream"));
    });
  }

  static tsr_status graph_end([[maybe_unused]] tsr_backend* b, [[maybe_unused]] tsr_stream* s,
                              [[maybe_unused]] tsr_graph** out, tsr_error** error) {
    return boundary(error, [&] {
      if constexpr (kGraphs) {
        Impl& impl = self(b);
        Stream& stream = object<Stream>(s, "graph_end: stream");
        // Ends the recording before refusing a NULL out, as the ABI promises.
        auto graph = impl.graph_end(stream);
        require(out != nullptr, "graph_end: out is NULL");
        *out = to_handle<tsr_graph>(graph.release());
      }
    });
  }

  static tsr_status graph_launch([[maybe_unused]] tsr_backend* b, [[maybe_unused]] tsr_stream* s,
                                 [[maybe_unused]] const tsr_graph* g, tsr_error** error) {
    return boundary(error, [&] {
      if constexpr (kGraphs) {
        using Graph = typename Impl::Graph;
        self(b).graph_launch(object<Stream>(s, "graph_launch: stream"),
                             object<const Graph>(g, "graph_launch: graph"));
      }
    });
  }

  static void graph_destroy(tsr_backend*, [[maybe_unused]] tsr_graph* g) {
    if constexpr (kGraphs) delete from_handle<typename Impl::Graph>(g);
  }
#endif

  // One entry per op: handle and params checks, then Impl's member.
  template <class Params, void (Impl::*Op)(Stream*, const Params&)>
  static tsr_status op(tsr_backend* b, tsr_stream* s, const Params* params, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = self(b);
      (impl.*Op)(stream(s), checked(params, op_name(params)));
    });
  }
};

}  // namespace tsr::sdk

// Defines tsr_plugin_query for backend class `Impl` named `name` (the file is
// libtessera_backend_<name>.so).
#define TSR_SDK_BACKEND_PLUGIN(Impl, name, version) \
  TSR_SDK_DEFINE_QUERY(::tsr::sdk::BackendPlugin<Impl>, name, version)
