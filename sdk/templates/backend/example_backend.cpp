// The example backend: every op of tessera/backend.h as plain scalar C++ on host memory.
// It is the shortest correct backend, not a fast one: copy this directory, rename
// "example", and replace the op bodies with your device's kernels. Ops run before they
// return, so streams and events are trivially ordered; a device backend queues work on a
// real stream instead and reports asynchronous failures at the next synchronizing call.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "tessera/sdk/backend.hpp"
#include "tessera/sdk/tensor.hpp"

namespace {

using tsr::sdk::Failure;
using tsr::sdk::require;
using tsr::sdk::Rows;
using tsr::sdk::rows;

bool is_weight_dtype(tsr_dtype d) {
  return d == TSR_DTYPE_F32 || d == TSR_DTYPE_F16 || d == TSR_DTYPE_BF16 ||
         d == TSR_DTYPE_Q8_0 || d == TSR_DTYPE_Q4_0;
}

void require_weight_dtype(const Rows& r, const char* what) {
  require(is_weight_dtype(r.dtype()),
          std::string(what) + ": unsupported dtype " + std::to_string(r.dtype()));
}

// Fails unless 0 <= value < bound; `what` names the value.
void require_index(int64_t value, int64_t bound, const std::string& what) {
  require(value >= 0 && value < bound,
          what + " " + std::to_string(value) + " out of range [0, " + std::to_string(bound) + ")");
}

void require_same_shape(const Rows& a, const Rows& b, const char* what) {
  require(a.count == b.count && a.width == b.width, std::string(what) + ": shapes differ");
}

class ExampleBackend {
 public:
  // Host memory (64-byte aligned), or caller memory wrapped without owning it.
  class Buffer {
   public:
    explicit Buffer(uint64_t size) : size_(size), owned_(true) {
      data_ = std::aligned_alloc(64, (size + 63) / 64 * 64 + 64);
      if (data_ == nullptr) {
        throw Failure(TSR_STATUS_OUT_OF_MEMORY, "cannot allocate " + std::to_string(size) + " bytes");
      }
    }
    Buffer(void* ptr, uint64_t size) : data_(ptr), size_(size), owned_(false) {}
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() {
      if (owned_) std::free(data_);
    }
    void* data() const { return data_; }
    uint64_t size() const { return size_; }
    uint8_t* at(uint64_t offset) const { return static_cast<uint8_t*>(data_) + offset; }

   private:
    void* data_;
    uint64_t size_;
    bool owned_;
  };
  struct Stream {};
  struct Event {};

  static int32_t device_count() { return 1; }

  static void device_props(int32_t, tsr_device_props& props) {
    std::snprintf(props.name, sizeof(props.name), "example scalar backend");
    props.type = TSR_DEVICE_CPU;
    props.compute_units = 1;
    props.host_visible = 1;
  }

  explicit ExampleBackend(const tsr_backend_params&) {}

  bool supports(tsr_op op, std::span<const tsr_dtype> dtypes) const {
    return std::all_of(dtypes.begin(), dtypes.end(), [op](tsr_dtype d) {
      switch (op) {
        case TSR_OP_MATMUL: case TSR_OP_GET_ROWS: return is_weight_dtype(d);
        case TSR_OP_COPY_BLOCKS: return tsr::sdk::dtype_unit_bytes(d) != 0;
        default: return op <= TSR_OP_COPY_BLOCKS && d == TSR_DTYPE_F32;  // the ops of ABI 1.0
      }
    });
  }

#if TSR_SDK_ABI_AT_LEAST(2, 0)
  // Asked with the params too (ABI 2.0): this example implements none of the optional
  // params 2.0 and later added (YaRN RoPE; attention's window, softcap, sinks and
  // parents), and refuses them.
  bool supports(const tsr_op_support_query& q) const {
    if (q.dtypes == nullptr || q.n_dtypes < 1) return false;
    return supports(q.op, std::span(q.dtypes, static_cast<size_t>(q.n_dtypes))) &&
           (q.params == nullptr || optional_params_unset(q.op, q.params));
  }

  static bool optional_params_unset(tsr_op op, const void* params) {
    if (op == TSR_OP_ROPE) {
      const auto& p = *static_cast<const tsr_rope_params*>(params);
      return p.ext_factor == 0 && (p.attn_factor == 0 || p.attn_factor == 1);
    }
    if (op == TSR_OP_ATTENTION) {
      const auto& p = *static_cast<const tsr_attention_params*>(params);
#if TSR_SDK_ABI_AT_LEAST(2, 8)
      if (TSR_STRUCT_HAS(&p, tsr_attention_params, parents) && p.parents != nullptr) return false;
#endif
      return p.window == 0 && p.softcap == 0 && p.sinks == nullptr;
    }
    return true;
  }
#endif

  // ---- memory, streams, events ----

  std::unique_ptr<Buffer> buffer_alloc(uint64_t size) { return std::make_unique<Buffer>(size); }
  std::unique_ptr<Buffer> buffer_from_host(void* ptr, uint64_t size) {
    return std::make_unique<Buffer>(ptr, size);
  }
  void buffer_write(Stream*, Buffer& dst, uint64_t offset, const void* src, uint64_t size) {
    if (size != 0) std::memcpy(dst.at(offset), src, size);
  }
  void buffer_read(Stream*, const Buffer& src, uint64_t offset, void* dst, uint64_t size) {
    if (size != 0) std::memcpy(dst, src.at(offset), size);
  }
  void buffer_memset(Stream*, Buffer& dst, uint64_t offset, int value, uint64_t size) {
    if (size != 0) std::memset(dst.at(offset), value, size);
  }
  std::unique_ptr<Stream> stream_create() { return std::make_unique<Stream>(); }
  void stream_synchronize(Stream&) {}
  std::unique_ptr<Event> event_create() { return std::make_unique<Event>(); }
  void event_record(Event&, Stream*) {}
  void event_wait(Stream*, Event&) {}
  void event_synchronize(Event&) {}

  // ---- ops: every operand is checked before anything is written ----

  void get_rows(Stream*, const tsr_get_rows_params& p) {
    const Rows table = rows(p.table, 2, "get_rows table");
    require_weight_dtype(table, "get_rows table");
    const Rows ids = rows(p.ids, 1, TSR_DTYPE_I32, "get_rows ids");
    const Rows out = rows(p.out, 2, TSR_DTYPE_F32, "get_rows out");
    require(out.count == ids.width && out.width == table.width, "get_rows: out must be [n, d]");
    const std::span<const int32_t> id(ids.i32(0), static_cast<size_t>(ids.width));
    for (const int32_t i : id) require_index(i, table.count, "get_rows: id");
    for (int64_t r = 0; r < out.count; ++r) {
      tsr::sdk::decode_row(table.dtype(), table.row(id[r]), out.f32(r), table.width);
    }
  }

  void rms_norm(Stream*, const tsr_rms_norm_params& p) {
    const Rows x = rows(p.x, 2, TSR_DTYPE_F32, "rms_norm x");
    const Rows out = rows(p.out, 2, TSR_DTYPE_F32, "rms_norm out");
    const Rows w = rows(p.weight, 1, TSR_DTYPE_F32, "rms_norm weight");
    require_same_shape(x, out, "rms_norm");
    require(w.width == x.width, "rms_norm: weight length differs from the rows");
    for (int64_t r = 0; r < x.count; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < x.width; ++c) ss += double(x.f32(r)[c]) * x.f32(r)[c];
      const double scale = 1 / std::sqrt(ss / double(x.width) + p.eps);
      for (int64_t c = 0; c < x.width; ++c) {
        out.f32(r)[c] = static_cast<float>(x.f32(r)[c] * scale * w.f32(0)[c]);
      }
    }
  }

  void matmul(Stream*, const tsr_matmul_params& p) {
    const Rows x = rows(p.x, 2, TSR_DTYPE_F32, "matmul x");
    const Rows w = rows(p.w, 2, "matmul w");
    require_weight_dtype(w, "matmul w");
    const Rows out = rows(p.out, 2, TSR_DTYPE_F32, "matmul out");
    require(w.width == x.width, "matmul: x and w differ in columns");
    require(out.count == x.count && out.width == w.count, "matmul: out must be [n, m]");
    std::vector<float> w_row(static_cast<size_t>(w.width));
    for (int64_t j = 0; j < w.count; ++j) {
      tsr::sdk::decode_row(w.dtype(), w.row(j), w_row.data(), w.width);
      for (int64_t i = 0; i < x.count; ++i) {
        double sum = 0;
        for (int64_t c = 0; c < x.width; ++c) sum += double(x.f32(i)[c]) * w_row[c];
        out.f32(i)[j] = static_cast<float>(sum);
      }
    }
  }

  void rope(Stream*, const tsr_rope_params& p) {
#if TSR_SDK_ABI_AT_LEAST(2, 0)
    if (!optional_params_unset(TSR_OP_ROPE, &p)) throw Failure(TSR_STATUS_UNSUPPORTED, "rope: YaRN is not implemented");
#endif
    const Rows x = rows(p.x, 3, TSR_DTYPE_F32, "rope x");
    const Rows pos = rows(p.positions, 1, TSR_DTYPE_I32, "rope positions");
    const int64_t heads = x.dim(1), head_dim = x.dim(2);
    require(pos.width == x.count, "rope: positions has " + std::to_string(pos.width) +
                                      " entries, expected " + std::to_string(x.count));
    require(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= head_dim,
            "rope: n_rot must be even and in (0, head_dim]");
    require(p.mode == TSR_ROPE_NORMAL || p.mode == TSR_ROPE_NEOX, "rope: unknown mode");
    const int half = p.n_rot / 2;
    const float* factors = nullptr;  // a divisor per pair (ABI 1.4), or none
#if TSR_SDK_ABI_AT_LEAST(1, 4)
    if (TSR_STRUCT_HAS(&p, tsr_rope_params, freq_factors) && p.freq_factors != nullptr) {
      const Rows f = rows(p.freq_factors, 1, TSR_DTYPE_F32, "rope freq_factors");
      require(f.width == half, "rope: freq_factors must be [n_rot / 2]");
      factors = f.f32(0);
    }
#endif
    for (int64_t r = 0; r < x.count; ++r) {
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x.f32(r) + h * head_dim;
        for (int i = 0; i < half; ++i) {
          const double theta = pos.i32(0)[r] * double(p.freq_scale) *
                               std::pow(double(p.freq_base), -2.0 * i / p.n_rot) /
                               (factors != nullptr ? double(factors[i]) : 1.0);
          const int a = p.mode == TSR_ROPE_NORMAL ? 2 * i : i;
          const int b = p.mode == TSR_ROPE_NORMAL ? 2 * i + 1 : i + half;
          const double x0 = v[a], x1 = v[b];
          v[a] = static_cast<float>(x0 * std::cos(theta) - x1 * std::sin(theta));
          v[b] = static_cast<float>(x0 * std::sin(theta) + x1 * std::cos(theta));
        }
      }
    }
  }

  void kv_write(Stream*, const tsr_kv_write_params& p) {
    const Rows kc = rows(p.k_cache, 3, TSR_DTYPE_F32, "kv_write k_cache");
    const Rows vc = rows(p.v_cache, 3, TSR_DTYPE_F32, "kv_write v_cache");
    const Rows k = rows(p.k, 3, TSR_DTYPE_F32, "kv_write k");
    const Rows v = rows(p.v, 3, TSR_DTYPE_F32, "kv_write v");
    const Rows map = rows(p.slot_mapping, 1, TSR_DTYPE_I32, "kv_write slot_mapping");
    require_same_shape(kc, vc, "kv_write caches");
    require_same_shape(k, v, "kv_write k and v");
    require(k.width == kc.width && map.width == k.count, "kv_write: shapes do not match");
    for (int64_t i = 0; i < map.width; ++i) {
      if (map.i32(0)[i] != -1) require_index(map.i32(0)[i], kc.count, "kv_write: slot");
    }
    for (int64_t i = 0; i < map.width; ++i) {
      const int32_t slot = map.i32(0)[i];
      if (slot < 0) continue;
      std::memcpy(kc.row(slot), k.row(i), static_cast<size_t>(k.width) * 4);
      std::memcpy(vc.row(slot), v.row(i), static_cast<size_t>(v.width) * 4);
    }
  }

  void attention(Stream*, const tsr_attention_params& p) {
#if TSR_SDK_ABI_AT_LEAST(2, 0)
    if (!optional_params_unset(TSR_OP_ATTENTION, &p)) {
      throw Failure(TSR_STATUS_UNSUPPORTED, "attention: window, softcap, sinks and parents are not implemented");
    }
#endif
    const Attention a(p);
    for (int64_t s = 0; s < a.num_seqs; ++s) {
      for (int32_t r = a.qsl[s]; r < a.qsl[s + 1]; ++r) a.row(s, r);
    }
  }

  void silu_mul(Stream*, const tsr_silu_mul_params& p) {
    binary(p.out, p.gate, p.up, "silu_mul",
           [](double g, double u) { return g / (1 + std::exp(-g)) * u; });
  }

  void add(Stream*, const tsr_add_params& p) {
    binary(p.out, p.a, p.b, "add", [](double a, double b) { return a + b; });
  }

  void copy_blocks(Stream*, const tsr_copy_blocks_params& p) {
    require(p.n_caches >= 0 && (p.caches != nullptr || p.n_caches == 0),
            "copy_blocks: caches is NULL");
    require(p.block_size > 0, "copy_blocks: block_size must be positive");
    const Rows pairs = rows(p.pairs, 2, TSR_DTYPE_I32, "copy_blocks pairs");
    require(pairs.width == 2, "copy_blocks: pairs must be [n, 2]");
    std::vector<Rows> caches;
    for (int32_t i = 0; i < p.n_caches; ++i) caches.push_back(rows(p.caches[i], 3, "copy_blocks cache"));
    for (const Rows& c : caches) {
      for (int64_t r = 0; r < pairs.count; ++r) {
        for (int j = 0; j < 2; ++j) {
          require_index(pairs.i32(r)[j], c.count / p.block_size, "copy_blocks: block id");
        }
      }
    }
    for (const Rows& c : caches) {
      const auto bytes = static_cast<size_t>(tsr::sdk::row_bytes(c.dtype(), c.width, "cache"));
      for (int64_t r = 0; r < pairs.count; ++r) {
        const int64_t src = int64_t(pairs.i32(r)[0]) * p.block_size;
        const int64_t dst = int64_t(pairs.i32(r)[1]) * p.block_size;
        for (int64_t t = 0; t < p.block_size; ++t) std::memmove(c.row(dst + t), c.row(src + t), bytes);
      }
    }
  }

 private:
  // out = f(a, b) elementwise; out may alias a or b, since each element is read first.
  template <class F>
  static void binary(const tsr_tensor* o, const tsr_tensor* a_t, const tsr_tensor* b_t,
                     const std::string& name, F f) {
    const Rows out = rows(o, 2, TSR_DTYPE_F32, name + " out");
    const Rows a = rows(a_t, 2, TSR_DTYPE_F32, name + " first operand");
    const Rows b = rows(b_t, 2, TSR_DTYPE_F32, name + " second operand");
    require_same_shape(a, b, name.c_str());
    require_same_shape(a, out, name.c_str());
    for (int64_t r = 0; r < out.count; ++r) {
      for (int64_t c = 0; c < out.width; ++c) {
        out.f32(r)[c] = static_cast<float>(f(double(a.f32(r)[c]), double(b.f32(r)[c])));
      }
    }
  }

  // One checked attention call: the constructor validates every index the rows will use.
  struct Attention {
    const tsr_attention_params& p;
    Rows out, q, kc, vc, tables, lens, qsl_t, pos;
    int64_t num_seqs, heads, kv_heads, head_dim;
    const int32_t* qsl;

    explicit Attention(const tsr_attention_params& params)
        : p(params),
          out(rows(p.out, 3, TSR_DTYPE_F32, "attention out")),
          q(rows(p.q, 3, TSR_DTYPE_F32, "attention q")),
          kc(rows(p.k_cache, 3, TSR_DTYPE_F32, "attention k_cache")),
          vc(rows(p.v_cache, 3, TSR_DTYPE_F32, "attention v_cache")),
          tables(rows(p.block_tables, 2, TSR_DTYPE_I32, "attention block_tables")),
          lens(rows(p.seq_lens, 1, TSR_DTYPE_I32, "attention seq_lens")),
          qsl_t(rows(p.query_start_loc, 1, TSR_DTYPE_I32, "attention query_start_loc")),
          pos(rows(p.positions, 1, TSR_DTYPE_I32, "attention positions")),
          num_seqs(lens.width), heads(q.dim(1)), kv_heads(kc.dim(1)), head_dim(q.dim(2)),
          qsl(qsl_t.i32(0)) {
      require_same_shape(out, q, "attention q and out");
      require_same_shape(kc, vc, "attention caches");
      require(p.block_size > 0, "attention: block_size must be positive");
      require(kv_heads > 0 && heads % kv_heads == 0, "attention: heads not a multiple of kv_heads");
      require(kc.dim(2) == head_dim, "attention: head_dim of q and the caches differ");
      require(tables.count == num_seqs && qsl_t.width == num_seqs + 1 && pos.width == q.count,
              "attention: block_tables, query_start_loc or positions do not match the batch");
      require(qsl[0] == 0 && qsl[num_seqs] == q.count, "attention: query_start_loc must run 0..n");
      for (int64_t s = 0; s < num_seqs; ++s) check_sequence(s);
    }

    void check_sequence(int64_t s) const {
      require(qsl[s] <= qsl[s + 1], "attention: query_start_loc decreases");
      const int64_t len = lens.i32(0)[s];
      require(len >= 0 && (len + p.block_size - 1) / p.block_size <= tables.width,
              "attention: seq_len exceeds the block table");
      for (int64_t t = 0; t < len; t += p.block_size) {
        require_index(tables.i32(s)[t / p.block_size], kc.count / p.block_size,
                      "attention: block outside the cache, id");
      }
      for (int32_t r = qsl[s]; r < qsl[s + 1]; ++r) require_index(pos.i32(0)[r], len, "attention: position");
    }

    const float* cached(const Rows& cache, int64_t s, int64_t t, int64_t kv_head) const {
      const int64_t slot = int64_t(tables.i32(s)[t / p.block_size]) * p.block_size + t % p.block_size;
      return cache.f32(slot) + kv_head * head_dim;
    }

    // Softmax attention of query row r (of sequence s) over keys 0..position, in double.
    void row(int64_t s, int64_t r) const {
      const int64_t last = pos.i32(0)[r];
      std::vector<double> w(static_cast<size_t>(last + 1));
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kvh = h / (heads / kv_heads);
        const float* qv = q.f32(r) + h * head_dim;
        for (int64_t t = 0; t <= last; ++t) {
          const float* k = cached(kc, s, t, kvh);
          double dot = 0;
          for (int64_t d = 0; d < head_dim; ++d) dot += double(qv[d]) * k[d];
          w[t] = dot * p.scale;
        }
        const double mx = *std::max_element(w.begin(), w.end());
        double denom = 0;
        for (double& x : w) denom += (x = std::exp(x - mx));
        float* o = out.f32(r) + h * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) {
          double acc = 0;
          for (int64_t t = 0; t <= last; ++t) acc += w[t] * cached(vc, s, t, kvh)[d];
          o[d] = static_cast<float>(acc / denom);
        }
      }
    }
  };
};

}  // namespace

TSR_SDK_BACKEND_PLUGIN(ExampleBackend, "example", "0.1.0")
