// The GPU backend plugins, `cuda` and (built from this same source with TSR_GPU_HIP) `hip`:
// device memory, non-blocking streams and events, the kernels of gpu_*.cu, and cuBLAS for
// dense GEMMs on CUDA. Checks and semantics follow plugins/backend_cpu.
//
// Index operands (ids, slots, block tables, positions) are checked on the host before a
// kernel reads them, so that a bad index is refused as on the CPU instead of faulting the
// device. They live in device memory, so every small buffer keeps a host mirror of what the
// host wrote into it (buffer_write, buffer_memset); an op that writes into a buffer
// invalidates its mirror, and an index tensor without a valid mirror is read back, which
// waits for the stream. The engine writes its step metadata with buffer_write, so a step
// never waits.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#if !defined(TSR_GPU_HIP)
#include <cublas_v2.h>
#endif

#include "gpu_kernels.h"
#include "tessera/quant.h"
#include "tessera/sdk/backend.hpp"
#include "tessera/sdk/op_checks.hpp"

namespace tsr::gpu {

using sdk::Failure;
using sdk::require;

namespace {

constexpr uint64_t kMirrorMax = 1 << 20;         // buffers up to this size keep a host mirror
constexpr int64_t kGemmMinRows = 16;             // fewer rows of x: GEMV (as the CPU backend)
constexpr int64_t kDequantChunk = int64_t(32) << 20;  // weights decoded per cuBLAS call
constexpr int32_t kMinSplitKeys = 256;           // keys per attention split, at least
constexpr int32_t kMaxSplits = 64;

[[noreturn]] void device_failure(cudaError_t e, const std::string& what) {
  const tsr_status status =
      e == cudaErrorMemoryAllocation ? TSR_STATUS_OUT_OF_MEMORY : TSR_STATUS_DEVICE_ERROR;
  throw Failure(status, std::string(TSR_GPU_API_NAME ": ") + what + ": " + cudaGetErrorName(e) +
                            " (" + cudaGetErrorString(e) + ")");
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clears a non-sticky error so that later calls can succeed
    device_failure(e, what);
  }
}

#define GPU_CHECK(call) check((call), #call)

#if !defined(TSR_GPU_HIP)
void check_blas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw Failure(TSR_STATUS_DEVICE_ERROR, std::string("cuBLAS: ") + what + ": " + cublasGetStatusString(st));
  }
}
#endif

int64_t row_bytes(tsr_dtype dtype, int64_t n) { return tsr_dtype_row_bytes(dtype, n); }

// Block formats: decoded by gpu_decode.cuh, and to bf16 for cuBLAS's prefill GEMMs.
bool is_quantized(tsr_dtype d) {
  return d == TSR_DTYPE_Q8_0 || d == TSR_DTYPE_Q4_0 || d == TSR_DTYPE_Q4_K || d == TSR_DTYPE_Q6_K ||
         d == TSR_DTYPE_MXFP4;
}

bool is_weight_dtype(tsr_dtype d) {
  return d == TSR_DTYPE_F32 || d == TSR_DTYPE_F16 || d == TSR_DTYPE_BF16 || is_quantized(d);
}

// The dtypes of kv_write and attention's caches (gpu_decode.cuh's decode_kv).
bool is_kv_dtype(tsr_dtype d) {
  return d == TSR_DTYPE_F32 || d == TSR_DTYPE_F16 || d == TSR_DTYPE_BF16 || d == TSR_DTYPE_Q8_0 ||
         d == TSR_DTYPE_Q4_0 || d == TSR_DTYPE_FP8_E4M3;
}

std::string shape_string(const tsr_tensor& t) {
  std::string s = "[";
  for (int d = 0; d < t.ndim && d < TSR_MAX_DIMS; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + "]";
}

// A tensor as rows x cols (dims 1.. packed into a row), as the CPU backend's as_matrix,
// plus the alignment a kernel needs: data and row stride aligned to the element (quantized
// blocks: to their f16 scale).
Mat view(const tsr_tensor* t, const std::string& what) {
  require(t != nullptr, what + " is NULL");
  require(t->struct_size >= sizeof(tsr_tensor), what + ": tensor struct_size too small");
  require(t->data != nullptr, what + " has no data");
  require(t->ndim >= 1 && t->ndim <= TSR_MAX_DIMS, what + ": bad ndim");
  for (int d = 0; d < t->ndim; ++d) require(t->shape[d] > 0, what + ": empty dimension");
  int32_t dtype_value = 0;  // read as an int: a C caller may store any value
  std::memcpy(&dtype_value, &t->dtype, sizeof(dtype_value));
  require(dtype_value >= 0 && dtype_value < TSR_DTYPE_COUNT_,
          what + ": unsupported dtype " + std::to_string(dtype_value));
  const auto dtype = static_cast<tsr_dtype>(dtype_value);
  const int64_t last = t->shape[t->ndim - 1];
  int64_t block_elems = 1, block_bytes = 0;
  tsr_dtype_block(dtype, &block_elems, &block_bytes);
  require(last % block_elems == 0, what + ": row length not a multiple of the block size");
  const int64_t last_bytes = row_bytes(dtype, last);
  require(last_bytes > 0, what + ": unsupported dtype " + std::to_string(dtype_value));
  int64_t packed = last_bytes;
  for (int d = t->ndim - 2; d >= 1; --d) {
    require(t->strides[d] == packed, what + " " + shape_string(*t) + " is not contiguous");
    packed *= t->shape[d];
  }
  Mat m;
  m.data = t->data;
  m.dtype = dtype;
  m.rows = t->ndim == 1 ? 1 : t->shape[0];
  m.cols = packed / last_bytes * last;
  m.stride = t->ndim == 1 ? packed : t->strides[0];
  m.row_bytes = packed;
  require(m.rows == 1 || m.stride >= packed, what + ": rows overlap");
  // FP8_E4M3 rows start with their f32 scale, so every innermost row must be 4-aligned.
  const bool fp8 = dtype == TSR_DTYPE_FP8_E4M3;
  require(!fp8 || last_bytes % 4 == 0, what + ": fp8_e4m3 rows of " + std::to_string(last) +
                                           " elements leave their scales unaligned (need a multiple of 4)");
  const int64_t align = dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_I32 || fp8 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(m.data) % align != 0 || m.stride % align != 0) {
    throw Failure(TSR_STATUS_UNSUPPORTED, what + ": data or row stride not aligned to " +
                                              std::to_string(align) + " bytes");
  }
  return m;
}

Mat view(const tsr_tensor* t, tsr_dtype dtype, const std::string& what) {
  Mat m = view(t, what);
  require(m.dtype == dtype, what + " must have dtype " + std::to_string(dtype) + ", has " +
                                std::to_string(m.dtype));
  return m;
}

// A KV cache operand: any dtype gpu_decode.cuh's decode_kv decodes.
Mat kv_view(const tsr_tensor* t, const std::string& what) {
  Mat m = view(t, what);
  require(is_kv_dtype(m.dtype), what + ": the GPU backend has no KV cache of dtype " + std::to_string(m.dtype));
  return m;
}

void require_same_shape(const Mat& a, const Mat& b, const char* what) {
  require(a.rows == b.rows && a.cols == b.cols,
          std::string(what) + ": operand shapes differ (" + std::to_string(a.rows) + "x" +
              std::to_string(a.cols) + " vs " + std::to_string(b.rows) + "x" +
              std::to_string(b.cols) + ")");
}

// A contiguous i32 vector of `n` elements (n < 0: any); returns its device address.
const int32_t* index_view(const tsr_tensor* t, int64_t n, const std::string& what,
                          int64_t* length = nullptr) {
  const Mat m = view(t, TSR_DTYPE_I32, what);
  const int64_t total = m.rows * m.cols;
  require(m.rows == 1 || m.stride == m.cols * 4, what + " is not contiguous");
  require(n < 0 || total == n, what + " has " + std::to_string(total) + " elements, expected " +
                                   std::to_string(n));
  if (length) *length = total;
  return static_cast<const int32_t*>(m.data);
}

// Device scratch reused in stream order by the ops of one stream. Once the stream has
// recorded a graph, a grown scratch keeps its old block (the graph's kernels address it)
// until the scratch itself goes, which the graphs delay by sharing it.
class Scratch {
 public:
  ~Scratch() {
    for (void* p : retired_) (void)cudaFree(p);
    if (ptr_) (void)cudaFree(ptr_);
  }
  void* get(size_t bytes, cudaStream_t stream, bool keep_old) {
    if (bytes > bytes_) {
      if (keep_old) {
        if (ptr_) retired_.push_back(ptr_);
      } else {
        GPU_CHECK(cudaStreamSynchronize(stream));  // earlier ops may still read the old block
        if (ptr_) GPU_CHECK(cudaFree(ptr_));
      }
      ptr_ = nullptr;
      bytes_ = 0;
      GPU_CHECK(cudaMalloc(&ptr_, bytes + bytes / 4));  // room to grow a little
      bytes_ = bytes + bytes / 4;
    }
    return ptr_;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  std::vector<void*> retired_;
};

// The scratch blocks of a stream, shared with the graphs recorded on it.
struct StreamScratch {
  Scratch half_x, half_w, partial, tiles;
#if !defined(TSR_GPU_HIP)
  Scratch blas_workspace;  // cuBLAS's, set by us: it must not allocate while recording
  Scratch x_q8;            // x quantized for the Q8_0 GEMV
#endif
};

}  // namespace

class GpuBackend {
 public:
  class Buffer;
  // Mirrored buffers by device address. Shared with the buffers, which may outlive the
  // backend handle.
  using Mirrors = std::map<uintptr_t, Buffer*>;

  class Buffer {
   public:
    Buffer(std::shared_ptr<Mirrors> mirrors, int device, void* ptr, uint64_t size)
        : mirrors_(std::move(mirrors)), device_(device), ptr_(ptr), size_(size) {}
    ~Buffer() {
      mirrors_->erase(reinterpret_cast<uintptr_t>(ptr_));
      (void)cudaSetDevice(device_);
      (void)cudaFree(ptr_);
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    void* data() const { return ptr_; }
    uint64_t size() const { return size_; }

   private:
    friend class GpuBackend;
    std::shared_ptr<Mirrors> mirrors_;
    int device_;
    void* ptr_;
    uint64_t size_;
    std::vector<uint8_t> mirror_;  // host copy of the contents while mirror_valid_
    bool mirror_valid_ = false;
  };

  class Stream {
   public:
    explicit Stream(int device) : device_(device) {
      GPU_CHECK(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking));
    }
    ~Stream() {
      (void)cudaSetDevice(device_);
      (void)cudaStreamSynchronize(handle);
#if !defined(TSR_GPU_HIP)
      if (blas_) cublasDestroy(blas_);
#endif
      (void)cudaStreamDestroy(handle);
    }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

#if !defined(TSR_GPU_HIP)
    // Created on first use: a handle costs device memory, and many streams never GEMM.
    // Its workspace is ours, so that cuBLAS never allocates while a graph is recorded.
    cublasHandle_t blas() {
      if (!blas_) {
        constexpr size_t kWorkspace = size_t(32) << 20;  // NVIDIA's advice for Hopper
        check_blas(cublasCreate(&blas_), "cublasCreate");
        check_blas(cublasSetStream(blas_, handle), "cublasSetStream");
        check_blas(cublasSetWorkspace(blas_, scratch->blas_workspace.get(kWorkspace, handle, false),
                                      kWorkspace),
                   "cublasSetWorkspace");
      }
      return blas_;
    }
#endif

    // A scratch block of `bytes`, kept alive for the graphs that use it.
    void* scratch_block(Scratch StreamScratch::*which, size_t bytes) {
      return (scratch.get()->*which).get(bytes, handle, recorded);
    }

    cudaStream_t handle = nullptr;
    std::shared_ptr<StreamScratch> scratch = std::make_shared<StreamScratch>();
    std::vector<int32_t> tile_map;  // what `tiles` holds
    bool recording = false;         // between graph_begin and graph_end
    bool recorded = false;          // has recorded a graph: scratch blocks are never freed
    bool op_open = false;           // an op began and has not ended (it threw)
    bool record_failed = false;     // an op failed during this recording

   private:
    int device_;
#if !defined(TSR_GPU_HIP)
    cublasHandle_t blas_ = nullptr;
#endif
  };

  // An instantiated CUDA/HIP graph, holding the scratch blocks its kernels address.
  class Graph {
   public:
    Graph(cudaGraphExec_t exec, std::shared_ptr<StreamScratch> scratch)
        : exec(exec), scratch_(std::move(scratch)) {}
    ~Graph() { (void)cudaGraphExecDestroy(exec); }
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;
    cudaGraphExec_t exec;

   private:
    std::shared_ptr<StreamScratch> scratch_;
  };

  class Event {
   public:
    Event() { GPU_CHECK(cudaEventCreateWithFlags(&handle, cudaEventDisableTiming)); }
    ~Event() { (void)cudaEventDestroy(handle); }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    cudaEvent_t handle = nullptr;
  };

  static int32_t device_count() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Failure(TSR_STATUS_DEVICE_ERROR,
                    std::string(TSR_GPU_API_NAME ": no device (" TSR_GPU_API_PREFIX "GetDeviceCount: ") +
                        cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")");
    }
    if (n == 0) {
      throw Failure(TSR_STATUS_DEVICE_ERROR,
                    TSR_GPU_API_NAME ": no device (" TSR_GPU_API_PREFIX "GetDeviceCount found none)");
    }
    return n;
  }

  static void device_props(int32_t device, tsr_device_props& props) {
    cudaDeviceProp prop{};
    GPU_CHECK(cudaGetDeviceProperties(&prop, device));
    std::snprintf(props.name, sizeof(props.name), "%.127s", prop.name);
    props.type = TSR_DEVICE_GPU;
    props.compute_units = prop.multiProcessorCount;
    props.memory_total = prop.totalGlobalMem;
    int current = 0;
    size_t free_bytes = 0, total = 0;
    if (cudaGetDevice(&current) == cudaSuccess && cudaSetDevice(device) == cudaSuccess &&
        cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) {
      props.memory_free = free_bytes;
    }
    (void)cudaSetDevice(current);
    (void)cudaGetLastError();
  }

  explicit GpuBackend(const tsr_backend_params& params) : device_(params.device) {
    GPU_CHECK(cudaSetDevice(device_));
    cudaDeviceProp prop{};
    GPU_CHECK(cudaGetDeviceProperties(&prop, device_));
    sm_count_ = prop.multiProcessorCount;
    const cudaError_t probe = probe_kernels();
    if (probe != cudaSuccess) {
      (void)cudaGetLastError();
      throw Failure(TSR_STATUS_DEVICE_ERROR,
                    std::string(TSR_GPU_API_NAME ": this build has no kernels for ") + prop.name +
                        " (" + cudaGetErrorString(probe) + "); rebuild for its architecture");
    }
#if !defined(TSR_GPU_HIP)
    // A debugging switch: our own GEMM kernels (the HIP backend's) instead of cuBLAS.
    const char* no_blas = std::getenv("TESSERA_GPU_NO_BLAS");
    use_blas_ = no_blas == nullptr || std::string(no_blas) == "0";
#endif
    default_stream_ = std::make_unique<Stream>(device_);
  }

  // Asked with the params: every optional param through ABI 2.8 is implemented (tree
  // attention's parents among them), so the answer depends on the dtypes alone.
  bool supports(const tsr_op_support_query& q) const {
    if (q.dtypes == nullptr || q.n_dtypes < 1) return false;
    return supports(q.op, std::span(q.dtypes, static_cast<size_t>(q.n_dtypes)));
  }

  bool supports(tsr_op op, std::span<const tsr_dtype> dtypes) const {
    for (const tsr_dtype d : dtypes) {
      int32_t v = 0;
      std::memcpy(&v, &d, sizeof(v));
      if ((v < 0 || v >= TSR_DTYPE_COUNT_) && plugin_kernels_.find(d) == nullptr) return false;
      switch (op) {
        case TSR_OP_MATMUL:
          if (!is_weight_dtype(d) && plugin_kernels_.find(d) == nullptr) return false;
          break;
        case TSR_OP_GET_ROWS:
          if (!is_weight_dtype(d)) return false;
          break;
        case TSR_OP_COPY_BLOCKS:
          if (row_bytes(d, 32) <= 0) return false;
          break;
        case TSR_OP_MATMUL_ID:
          if (!is_weight_dtype(d)) return false;
          break;
        case TSR_OP_CAST:
          if (d != TSR_DTYPE_F32 && d != TSR_DTYPE_F16 && d != TSR_DTYPE_BF16) return false;
          break;
        case TSR_OP_KV_WRITE: case TSR_OP_ATTENTION:
          if (!is_kv_dtype(d)) return false;
          break;
        case TSR_OP_RMS_NORM: case TSR_OP_ROPE:
        case TSR_OP_SILU_MUL: case TSR_OP_ADD: case TSR_OP_MUL: case TSR_OP_SCALE: case TSR_OP_GELU:
        case TSR_OP_GELU_MUL: case TSR_OP_LAYER_NORM: case TSR_OP_BIAS_ADD: case TSR_OP_SOFTMAX:
        case TSR_OP_TOP_K: case TSR_OP_SOFTCAP: case TSR_OP_MOE_COMBINE: case TSR_OP_SWIGLU_OAI:
          if (d != TSR_DTYPE_F32) return false;
          break;
        default: return false;
      }
    }
    return true;
  }

  // ---- buffers ----

  std::unique_ptr<Buffer> buffer_alloc(uint64_t size) {
    activate();
    forget_quantized_x();  // the new buffer may reuse the addresses of a freed x
    void* ptr = nullptr;
    GPU_CHECK(cudaMalloc(&ptr, size == 0 ? 1 : size));
    auto buffer = std::make_unique<Buffer>(mirrors_, device_, ptr, size);
    if (size <= kMirrorMax) {
      // Zeroed on both sides, so that the mirror is exact from the start.
      buffer->mirror_.assign(size, 0);
      GPU_CHECK(cudaMemsetAsync(ptr, 0, size, default_stream_->handle));
      GPU_CHECK(cudaStreamSynchronize(default_stream_->handle));
      buffer->mirror_valid_ = true;
      (*mirrors_)[reinterpret_cast<uintptr_t>(ptr)] = buffer.get();
    }
    return buffer;
  }

  // ---- host memory (the feature "tsr_host_memory"): page-locked, so copies from and to
  // it run on the stream's DMA without staging. Freed memory must have no copy in flight:
  // the host's rule (host_memory.h); cudaFreeHost does not wait for one.

  void* host_alloc(uint64_t size) {
    activate();
    void* ptr = nullptr;
    GPU_CHECK(cudaHostAlloc(&ptr, size, cudaHostAllocDefault));
    return ptr;
  }
  void host_free(void* ptr) {
    activate();
    cudaFreeHost(ptr);  // a failure here leaves nothing for the caller to do
  }

  // A pageable source is staged by the runtime before it returns, so the caller may reuse
  // it at once; a page-locked one (host_alloc) is read by the DMA when the stream gets there.
  void buffer_write(Stream* s, Buffer& dst, uint64_t offset, const void* src, uint64_t size) {
    activate();
    not_recording(stream(s), "buffer_write");
    forget_quantized_x();
    if (size == 0) return;
    GPU_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(dst.ptr_) + offset, src, size,
                              cudaMemcpyHostToDevice, stream(s).handle));
    if (dst.mirror_valid_) std::memcpy(dst.mirror_.data() + offset, src, size);
  }

  void buffer_read(Stream* s, const Buffer& src, uint64_t offset, void* dst, uint64_t size) {
    activate();
    not_recording(stream(s), "buffer_read");
    if (size == 0) return;
    GPU_CHECK(cudaMemcpyAsync(dst, static_cast<const uint8_t*>(src.ptr_) + offset, size,
                              cudaMemcpyDeviceToHost, stream(s).handle));
  }

  void buffer_memset(Stream* s, Buffer& dst, uint64_t offset, int value, uint64_t size) {
    activate();
    not_recording(stream(s), "buffer_memset");
    forget_quantized_x();
    if (size == 0) return;
    GPU_CHECK(cudaMemsetAsync(static_cast<uint8_t*>(dst.ptr_) + offset, value, size, stream(s).handle));
    if (dst.mirror_valid_) std::memset(dst.mirror_.data() + offset, value, size);
  }

  // ---- streams and events ----

  std::unique_ptr<Stream> stream_create() {
    activate();
    return std::make_unique<Stream>(device_);
  }

  void stream_synchronize(Stream& s) {
    activate();
    not_recording(s, "stream_synchronize");
    GPU_CHECK(cudaStreamSynchronize(s.handle));
  }

  std::unique_ptr<Event> event_create() {
    activate();
    return std::make_unique<Event>();
  }

  void event_record(Event& e, Stream* s) {
    activate();
    GPU_CHECK(cudaEventRecord(e.handle, stream(s).handle));
  }

  void event_wait(Stream* s, Event& e) {
    activate();
    GPU_CHECK(cudaStreamWaitEvent(stream(s).handle, e.handle, 0));
  }

  void event_synchronize(Event& e) {
    activate();
    GPU_CHECK(cudaEventSynchronize(e.handle));
  }

  // ---- graphs ----

  // Relaxed capture: the recording thread may still allocate (a scratch block that grows).
  void graph_begin(Stream& s) {
    activate();
    require(!s.recording, "graph_begin: the stream is already recording");
    forget_quantized_x();
    GPU_CHECK(cudaStreamBeginCapture(s.handle, cudaStreamCaptureModeRelaxed));
    s.recording = true;
    s.record_failed = s.op_open = false;
    s.recorded = true;
  }

  std::unique_ptr<Graph> graph_end(Stream& s) {
    activate();
    require(s.recording, "graph_end: the stream is not recording");
    forget_quantized_x();
    s.recording = false;
    const bool op_failed = s.record_failed || s.op_open;
    s.op_open = false;
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(s.handle, &graph);
    if (ended != cudaSuccess || op_failed) {
      if (graph != nullptr) (void)cudaGraphDestroy(graph);
      check(ended, "cudaStreamEndCapture");
      throw Failure(TSR_STATUS_INVALID_ARGUMENT, "graph_end: an op failed while recording");
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiateWithFlags(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    check(made, "cudaGraphInstantiateWithFlags");
    return std::make_unique<Graph>(exec, s.scratch);
  }

  void graph_launch(Stream& s, const Graph& g) {
    activate();
    require(!s.recording, "graph_launch: the stream is recording");
    forget_quantized_x();
    GPU_CHECK(cudaGraphLaunch(g.exec, s.handle));
  }

  // ---- ops ----

  void get_rows(Stream* sp, const tsr_get_rows_params& p) {
    Stream& s = begin_op(sp);
    const Mat out = view(p.out, TSR_DTYPE_F32, "get_rows out");
    const Mat table = view(p.table, "get_rows table");
    require(is_weight_dtype(table.dtype), "get_rows: unsupported table dtype");
    require(out.cols == table.cols, "get_rows: out and table widths differ");
    const int32_t* ids = index_view(p.ids, out.rows, "get_rows ids");
    for (const int32_t id : host_ints(s, ids, out.rows)) {
      require(id >= 0 && id < table.rows, "get_rows: id " + std::to_string(id) +
                                               " out of range [0, " + std::to_string(table.rows) + ")");
    }
    gpu::get_rows(s.handle, out, table, ids);
    end_op(s, "get_rows", out);
  }

  void rms_norm(Stream* sp, const tsr_rms_norm_params& p) {
    Stream& s = begin_op(sp);
    const Mat out = view(p.out, TSR_DTYPE_F32, "rms_norm out");
    const Mat x = view(p.x, TSR_DTYPE_F32, "rms_norm x");
    const Mat w = view(p.weight, TSR_DTYPE_F32, "rms_norm weight");
    require_same_shape(out, x, "rms_norm");
    require(w.rows * w.cols == x.cols, "rms_norm: weight length differs from row length");
    require(w.rows == 1 || w.stride == w.cols * 4, "rms_norm: weight is not contiguous");
    require(p.eps >= 0, "rms_norm: negative eps");
    gpu::rms_norm(s.handle, out, x, static_cast<const float*>(w.data), p.eps);
    end_op(s, "rms_norm", out);
  }

  // A quant plugin's matmul for weights of a dtype these kernels do not multiply; it is
  // enqueued on the stream of the op (and captured into graphs with it).
  void kernel_register(tsr_dtype dtype, const tsr_quant_kernels& kernels) {
    require(!is_weight_dtype(dtype), "kernel_register: this backend multiplies dtype " +
                                         std::to_string(int(dtype)) + " itself");
    plugin_kernels_.add(dtype, kernels);
  }

  void matmul(Stream* sp, const tsr_matmul_params& p) {
    if (p.w != nullptr && p.w->struct_size >= sizeof(tsr_tensor)) {
      if (const tsr_quant_kernels* k = plugin_kernels_.find(p.w->dtype)) return plugin_matmul(sp, *k, p);
    }
    Stream& s = begin_op(sp, true);
    const Mat out = view(p.out, TSR_DTYPE_F32, "matmul out");
    const Mat x = view(p.x, TSR_DTYPE_F32, "matmul x");
    const Mat w = view(p.w, "matmul w");
    require(is_weight_dtype(w.dtype), "matmul: unsupported weight dtype " + std::to_string(w.dtype));
    require(x.cols == w.cols, "matmul: x has " + std::to_string(x.cols) + " columns, w has " +
                                  std::to_string(w.cols));
    require(out.rows == x.rows && out.cols == w.rows, "matmul: out must be [n, m]");
#if !defined(TSR_GPU_HIP)
    if (use_blas_ && (w.dtype == TSR_DTYPE_F32 || x.rows >= kGemmMinRows)) {
      blas_matmul(s, out, x, w);
      matmul_wrote(out);
      end_op(s, "matmul", out);
      return;
    }
#endif
    if (x.rows < kGemmMinRows) {
#if !defined(TSR_GPU_HIP)
      if (w.dtype == TSR_DTYPE_Q8_0) {
        gpu::gemv_q8_0(s.handle, out, x.rows, w, quantized_x(s, x));
        matmul_wrote(out);
        end_op(s, "matmul", out);
        return;
      }
#endif
      gpu::gemv(s.handle, out, x, w);
    } else {
      gpu::gemm_tiled(s.handle, out, x, w);
    }
    matmul_wrote(out);
    end_op(s, "matmul", out);
  }

  void rope(Stream* sp, const tsr_rope_params& p) {
    Stream& s = begin_op(sp);
    require(p.x != nullptr && p.x->ndim == 3, "rope: x must be [n, heads, head_dim]");
    const Mat x = view(p.x, TSR_DTYPE_F32, "rope x");
    const sdk::RopeScalars rs = sdk::check_rope_scalars(p, p.x->shape[2]);
    RopeArgs a;
    a.heads = p.x->shape[1];
    a.head_dim = p.x->shape[2];
    a.pos = index_view(p.positions, x.rows, "rope positions");
    a.n_rot = p.n_rot;
    a.neox = rs.neox;
    a.freq_base = p.freq_base;
    a.freq_scale = p.freq_scale;
    if (p.freq_factors != nullptr) {  // their values live on the device, unchecked
      const Mat f = view(p.freq_factors, TSR_DTYPE_F32, "rope freq_factors");
      require(f.rows == 1 && f.cols == p.n_rot / 2, "rope: freq_factors must be [n_rot / 2]");
      a.factors = static_cast<const float*>(f.data);
    }
    a.ext_factor = p.ext_factor;
    a.corr_low = p.corr_low;
    a.corr_high = p.corr_high;
    a.mscale = static_cast<float>(rs.mscale);
    gpu::rope(s.handle, x, a);
    end_op(s, "rope", x);
  }

  void kv_write(Stream* sp, const tsr_kv_write_params& p) {
    Stream& s = begin_op(sp);
    const Mat kc = kv_view(p.k_cache, "kv_write k_cache");
    const Mat vc = kv_view(p.v_cache, "kv_write v_cache");
    const Mat k = view(p.k, TSR_DTYPE_F32, "kv_write k");
    const Mat v = view(p.v, TSR_DTYPE_F32, "kv_write v");
    require_same_shape(kc, vc, "kv_write caches");
    require_same_shape(k, v, "kv_write k/v");
    require(k.cols == kc.cols, "kv_write: row width differs from the cache's");
    const int64_t head_dim = p.k_cache->shape[p.k_cache->ndim - 1];
    require(p.v_cache->shape[p.v_cache->ndim - 1] == head_dim, "kv_write: k_cache and v_cache heads differ");
    const int32_t* slots = index_view(p.slot_mapping, k.rows, "kv_write slot_mapping");
    for (const int32_t slot : host_ints(s, slots, k.rows)) {
      require(slot >= -1 && slot < kc.rows, "kv_write: slot " + std::to_string(slot) + " out of range");
    }
    gpu::kv_write(s.handle, kc, vc, k, v, slots, static_cast<int32_t>(head_dim));
    end_op(s, "kv_write", kc);
    wrote(vc);
  }

  void attention(Stream* sp, const tsr_attention_params& p) {
    Stream& s = begin_op(sp);
    sdk::check_attention_scalars(p);
    sdk::check_attention_layout(p);
    const Mat out = view(p.out, TSR_DTYPE_F32, "attention out");
    const Mat q = view(p.q, TSR_DTYPE_F32, "attention q");
    const Mat kc = kv_view(p.k_cache, "attention k_cache");
    const Mat vc = kv_view(p.v_cache, "attention v_cache");
    require_same_shape(out, q, "attention out/q");
    require_same_shape(kc, vc, "attention caches");
    const int64_t n = q.rows, heads = p.q->shape[1], kv_heads = p.k_cache->shape[1];
    const int64_t head_dim = p.q->shape[2], num_seqs = p.block_tables->shape[0];
    const int64_t max_blocks = p.block_tables->shape[1];
    require(p.k_cache->shape[2] == head_dim, "attention: head_dim of q and cache differ");
    require(kv_heads > 0 && heads % kv_heads == 0, "attention: heads must be a multiple of kv_heads");
    require(p.block_size > 0, "attention: block_size must be > 0");
    const int32_t* tables_d = index_view(p.block_tables, num_seqs * max_blocks, "attention block_tables");
    const int32_t* lens_d = index_view(p.seq_lens, num_seqs, "attention seq_lens");
    const int32_t* qsl_d = index_view(p.query_start_loc, num_seqs + 1, "attention query_start_loc");
    const int32_t* pos_d = index_view(p.positions, n, "attention positions");
    const std::vector<int32_t> tables = host_ints(s, tables_d, num_seqs * max_blocks);
    const std::vector<int32_t> lens = host_ints(s, lens_d, num_seqs);
    const std::vector<int32_t> qsl = host_ints(s, qsl_d, num_seqs + 1);
    const std::vector<int32_t> pos = host_ints(s, pos_d, n);
    validate_attention(n, num_seqs, max_blocks, kc.rows, p.block_size, tables, lens, qsl, pos);
    const int32_t* parents_d = nullptr;
    if (TSR_STRUCT_HAS(&p, tsr_attention_params, parents) && p.parents != nullptr) {
      require(!s.recording, "attention: tree attention cannot be recorded in a graph");
      parents_d = index_view(p.parents, n, "attention parents");
      validate_parents(qsl, host_ints(s, parents_d, n));
    }

    AttentionPlan plan;
    if (!attention_tiles(static_cast<int32_t>(heads), static_cast<int32_t>(kv_heads),
                         static_cast<int32_t>(head_dim), plan)) {
      throw Failure(TSR_STATUS_UNSUPPORTED, "attention: head_dim " + std::to_string(head_dim) +
                                                " is too large for the GPU kernel");
    }
    AttentionArgs a{};
    a.out = static_cast<float*>(out.data);
    a.q = static_cast<const float*>(q.data);
    a.k_cache = static_cast<const uint8_t*>(kc.data);
    a.v_cache = static_cast<const uint8_t*>(vc.data);
    a.k_dtype = kc.dtype;
    a.v_dtype = vc.dtype;
    a.k_stride = kc.stride;
    a.v_stride = vc.stride;
    a.out_stride = out.stride / 4;
    a.q_stride = q.stride / 4;
    a.tables = tables_d;
    a.qsl = qsl_d;
    a.pos = pos_d;
    a.max_blocks = static_cast<int32_t>(max_blocks);
    a.block_size = p.block_size;
    a.heads = static_cast<int32_t>(heads);
    a.kv_heads = static_cast<int32_t>(kv_heads);
    a.head_dim = static_cast<int32_t>(head_dim);
    a.n = n;
    a.scale = p.scale;
    a.window = p.window;
    a.softcap = p.softcap;
    a.parents = parents_d;
    if (p.sinks != nullptr) {  // their values live on the device, unchecked
      const Mat sinks = view(p.sinks, TSR_DTYPE_F32, "attention sinks");
      require(sinks.rows * sinks.cols == heads && (sinks.rows == 1 || sinks.stride == 4), "attention: sinks must be [heads]");
      a.sinks = static_cast<const float*>(sinks.data);
    }

    // Tiles: each sequence's query rows in runs of rows_per_tile. Decode steps (one row per
    // sequence) need no list: tile y is sequence y.
    std::vector<int32_t> map;
    bool one_tile_each = true;
    for (int64_t q_seq = 0; q_seq < num_seqs; ++q_seq) {
      one_tile_each = one_tile_each && qsl[q_seq + 1] - qsl[q_seq] <= plan.rows_per_tile;
      for (int32_t r = qsl[q_seq]; r < qsl[q_seq + 1]; r += plan.rows_per_tile) {
        map.push_back(static_cast<int32_t>(q_seq));
        map.push_back(r);
      }
    }
    int64_t tiles = static_cast<int64_t>(map.size() / 2);
    if (one_tile_each) {
      tiles = num_seqs;
    } else if (map != s.tile_map) {  // uploaded once per step, reused by every layer
      require(!s.recording, "attention: prefill tiles cannot be recorded in a graph");
      void* dst = s.scratch_block(&StreamScratch::tiles, map.size() * sizeof(int32_t));
      GPU_CHECK(cudaMemcpyAsync(dst, map.data(), map.size() * sizeof(int32_t),
                                cudaMemcpyHostToDevice, s.handle));
      s.tile_map = std::move(map);
    }
    a.tile_map = one_tile_each ? nullptr : static_cast<const int32_t*>(s.scratch_block(&StreamScratch::tiles, 0));
    require(tiles <= 65535, "attention: too many query tiles (" + std::to_string(tiles) + ")");
    plan.tiles = static_cast<int32_t>(tiles);

    // Flash-Decoding: split the keys when the grid would leave most of the device idle.
    // A recorded launch serves every later sequence length its block table allows.
    const int32_t max_keys = s.recording ? static_cast<int32_t>(max_blocks * p.block_size)
                             : pos.empty() ? 0 : *std::max_element(pos.begin(), pos.end()) + 1;
    const int64_t blocks = kv_heads * (heads / kv_heads / plan.heads_per_block) * tiles;
    int64_t splits = 1;
    if (blocks > 0 && blocks < 2 * sm_count_) {
      splits = std::min<int64_t>({(2 * sm_count_ + blocks - 1) / blocks,
                                  (max_keys + kMinSplitKeys - 1) / kMinSplitKeys, kMaxSplits});
      splits = std::max<int64_t>(splits, 1);
    }
    const int64_t per_split = (max_keys + splits - 1) / splits;
    plan.split_keys = static_cast<int32_t>((per_split + plan.tile_keys - 1) / plan.tile_keys * plan.tile_keys);
    plan.splits = plan.split_keys > 0 ? static_cast<int32_t>((max_keys + plan.split_keys - 1) / plan.split_keys) : 1;
    if (plan.splits > 1) {
      const size_t bytes = sizeof(float) * size_t(n) * heads * plan.splits * (head_dim + 2);
      a.partial = static_cast<float*>(s.scratch_block(&StreamScratch::partial, bytes));
    }
    gpu::attention(s.handle, a, plan);
    end_op(s, "attention", out);
  }

  void silu_mul(Stream* sp, const tsr_silu_mul_params& p) {
    binary_op(sp, Binary::kSiluMul, "silu_mul", p.out, {p.gate, "gate"}, {p.up, "up"});
  }

  void add(Stream* sp, const tsr_add_params& p) { binary_op(sp, Binary::kAdd, "add", p.out, {p.a, "a"}, {p.b, "b"}); }

  void mul(Stream* sp, const tsr_mul_params& p) { binary_op(sp, Binary::kMul, "mul", p.out, {p.a, "a"}, {p.b, "b"}); }

  void scale(Stream* sp, const tsr_scale_params& p) {
    sdk::check_scale_scalars(p);
    unary_op(sp, Unary::kScale, p.out, p.x, p.scale, "scale");
  }

  void softcap(Stream* sp, const tsr_softcap_params& p) {
    sdk::check_softcap_scalars(p);
    unary_op(sp, Unary::kSoftcap, p.out, p.x, p.cap, "softcap");
  }

  void gelu(Stream* sp, const tsr_gelu_params& p) { unary_op(sp, Unary::kGelu, p.out, p.x, 0, "gelu"); }

  void gelu_mul(Stream* sp, const tsr_gelu_params& p) {
    binary_op(sp, Binary::kGeluMul, "gelu_mul", p.out, {p.x, "x"}, {p.up, "up"});
  }

  void swiglu_oai(Stream* sp, const tsr_swiglu_oai_params& p) {
    sdk::check_swiglu_oai_scalars(p);
    Stream& s = begin_op(sp);
    const Mat out = view(p.out, TSR_DTYPE_F32, "swiglu_oai out");
    const Mat gate = view(p.gate, TSR_DTYPE_F32, "swiglu_oai gate");
    const Mat up = view(p.up, TSR_DTYPE_F32, "swiglu_oai up");
    require_same_shape(out, gate, "swiglu_oai");
    require_same_shape(out, up, "swiglu_oai");
    gpu::swiglu_oai(s.handle, out, gate, up, p.alpha, p.limit);
    end_op(s, "swiglu_oai", out);
  }

  void bias_add(Stream* sp, const tsr_bias_add_params& p) {
    Stream& s = begin_op(sp);
    const Mat out = view(p.out, TSR_DTYPE_F32, "bias_add out");
    const Mat x = view(p.x, TSR_DTYPE_F32, "bias_add x");
    require_same_shape(out, x, "bias_add");
    gpu::bias_add(s.handle, out, x, row_vector(p.bias, x.cols, "bias_add bias"));
    end_op(s, "bias_add", out);
  }

  void layer_norm(Stream* sp, const tsr_layer_norm_params& p) {
    Stream& s = begin_op(sp);
    const Mat out = view(p.out, TSR_DTYPE_F32, "layer_norm out");
    const Mat x = view(p.x, TSR_DTYPE_F32, "layer_norm x");
    require_same_shape(out, x, "layer_norm");
    const float* w = row_vector(p.weight, x.cols, "layer_norm weight");
    const float* b = p.bias != nullptr ? row_vector(p.bias, x.cols, "layer_norm bias") : nullptr;
    sdk::check_layer_norm_scalars(p);
    gpu::layer_norm(s.handle, out, x, w, b, p.eps);
    end_op(s, "layer_norm", out);
  }

  void softmax(Stream* sp, const tsr_softmax_params& p) {
    Stream& s = begin_op(sp);
    const Mat out = view(p.out, TSR_DTYPE_F32, "softmax out");
    const Mat x = view(p.x, TSR_DTYPE_F32, "softmax x");
    require_same_shape(out, x, "softmax");
    sdk::check_softmax_scalars(p);
    gpu::softmax(s.handle, out, x, p.scale);
    end_op(s, "softmax", out);
  }

  void top_k(Stream* sp, const tsr_top_k_params& p) {
    Stream& s = begin_op(sp);
    const Mat x = view(p.x, TSR_DTYPE_F32, "top_k x");
    const Mat ids = view(p.ids, TSR_DTYPE_I32, "top_k ids");
    const Mat values = view(p.values, TSR_DTYPE_F32, "top_k values");
    sdk::check_top_k_scalars(p, x.cols);
    require(ids.rows == x.rows && ids.cols == p.k && values.rows == x.rows && values.cols == p.k,
            "top_k: ids and values must be [n, k]");
    gpu::top_k(s.handle, ids, values, x, p.k);
    end_op(s, "top_k", values);
    wrote(ids);
  }

  void moe_combine(Stream* sp, const tsr_moe_combine_params& p) {
    Stream& s = begin_op(sp);
    sdk::check_moe_combine_layout(p);
    const Mat out = view(p.out, TSR_DTYPE_F32, "moe_combine out");
    const Mat x = view(p.x, TSR_DTYPE_F32, "moe_combine x");  // [n, n_used * d], slots packed
    const Mat w = view(p.weights, TSR_DTYPE_F32, "moe_combine weights");
    gpu::moe_combine(s.handle, out, x, w, p.x->shape[1], p.normalize, p.scale);
    end_op(s, "moe_combine", out);
  }

  // Ids the host wrote are checked as on the CPU; ids written on the device (top_k's) are
  // not read back, which would wait for the stream: the kernel turns a bad one into NaNs.
  void matmul_id(Stream* sp, const tsr_matmul_id_params& p) {
    Stream& s = begin_op(sp);
    require(p.w != nullptr && p.w->struct_size >= sizeof(tsr_tensor) && p.w->ndim == 3,
            "matmul_id: w must be [n_expert, m, k]");
    require(p.out != nullptr && p.out->ndim == 3, "matmul_id: out must be [n, n_used, m]");
    require(p.x != nullptr && (p.x->ndim == 2 || p.x->ndim == 3), "matmul_id: x must be [n, k] or [n, n_used, k]");
    const Mat w0 = view(p.w, "matmul_id w");  // rows: experts, each one packed [m, k]
    require(is_weight_dtype(w0.dtype), "matmul_id: unsupported weight dtype " + std::to_string(w0.dtype));
    ExpertWeights w;
    w.data = w0.data;
    w.dtype = w0.dtype;
    w.n_expert = p.w->shape[0];
    w.rows = p.w->shape[1];
    w.cols = p.w->shape[2];
    w.expert_stride = w0.stride;
    w.row_stride = p.w->strides[1];
    const Mat ids = view(p.ids, TSR_DTYPE_I32, "matmul_id ids");
    require(ids.rows == 1 || ids.stride == ids.cols * 4, "matmul_id ids is not contiguous");
    const int64_t n = ids.rows, n_used = ids.cols;
    require(p.out->dtype == TSR_DTYPE_F32 && p.out->shape[0] == n && p.out->shape[1] == n_used &&
                p.out->shape[2] == w.rows,
            "matmul_id: out must be f32 [n, n_used, m] with contiguous rows");
    const Mat out = view(p.out, TSR_DTYPE_F32, "matmul_id out");  // [n, n_used * m], slots packed
    const bool per_slot = p.x->ndim == 3;
    const Mat x = view(p.x, TSR_DTYPE_F32, "matmul_id x");
    require(per_slot ? (p.x->shape[0] == n && p.x->shape[1] == n_used && p.x->shape[2] == w.cols)
                     : (x.rows == n && x.cols == w.cols),
            "matmul_id: x must be [n, k] or [n, n_used, k] with k = w's columns");
    const auto* ids_d = static_cast<const int32_t*>(ids.data);
    if (const std::vector<int32_t> host = mirrored_ints(ids_d, n * n_used); !host.empty()) {
      for (const int32_t e : host) {
        require(e >= 0 && e < w.n_expert, "matmul_id: expert id " + std::to_string(e) + " out of range [0, " +
                                              std::to_string(w.n_expert) + ")");
      }
    }
    const MatmulIdArgs a{static_cast<float*>(out.data), static_cast<const float*>(x.data), ids_d, n, n_used,
                         out.stride, p.out->strides[1], x.stride, per_slot ? p.x->strides[1] : 0};
    gpu::matmul_id(s.handle, a, w);
    end_op(s, "matmul_id", out);
  }

  void cast(Stream* sp, const tsr_cast_params& p) {
    Stream& s = begin_op(sp);
    const Mat out = view(p.out, "cast out");
    const Mat x = view(p.x, "cast x");
    const auto is_float = [](tsr_dtype d) { return d == TSR_DTYPE_F32 || d == TSR_DTYPE_F16 || d == TSR_DTYPE_BF16; };
    require(is_float(x.dtype) && is_float(out.dtype), "cast: only F32, F16 and BF16 convert");
    require(p.x->ndim == p.out->ndim && x.rows == out.rows && x.cols == out.cols, "cast: shapes differ");
    for (int i = 0; i < p.x->ndim; ++i) require(p.x->shape[i] == p.out->shape[i], "cast: shapes differ");
    gpu::cast(s.handle, out, x);
    end_op(s, "cast", out);
  }

  void copy_blocks(Stream* sp, const tsr_copy_blocks_params& p) {
    Stream& s = begin_op(sp);
    require(p.n_caches >= 0 && (p.n_caches == 0 || p.caches != nullptr), "copy_blocks: caches missing");
    require(p.block_size > 0, "copy_blocks: block_size must be > 0");
    require(p.pairs != nullptr && p.pairs->ndim == 2 && p.pairs->shape[1] == 2,
            "copy_blocks: pairs must be [n, 2]");
    int64_t n_values = 0;
    const int32_t* pairs_d = index_view(p.pairs, -1, "copy_blocks pairs", &n_values);
    const std::vector<int32_t> pairs = host_ints(s, pairs_d, n_values);
    // Every cache and pair is checked before anything is copied: a failed call changes nothing.
    std::vector<Mat> caches;
    for (int32_t c = 0; c < p.n_caches; ++c) {
      caches.push_back(view(p.caches[c], "copy_blocks cache"));
      const int64_t n_blocks = caches.back().rows / p.block_size;
      for (const int32_t b : pairs) require(b >= 0 && b < n_blocks, "copy_blocks: block id out of range");
    }
    const int64_t n_pairs = n_values / 2;
    // Pairs run in parallel unless one pair's destination is another's source or
    // destination: then one after another, as the CPU backend copies them.
    std::vector<int32_t> dst(n_pairs);
    for (int64_t i = 0; i < n_pairs; ++i) dst[i] = pairs[2 * i + 1];
    std::sort(dst.begin(), dst.end());
    bool ordered = std::adjacent_find(dst.begin(), dst.end()) != dst.end();
    for (int64_t i = 0; i < n_pairs && !ordered; ++i) {
      ordered = std::binary_search(dst.begin(), dst.end(), pairs[2 * i]) && pairs[2 * i] != pairs[2 * i + 1];
    }
    for (const Mat& cache : caches) {
      if (n_pairs == 0) break;
      if (ordered) {
        for (int64_t i = 0; i < n_pairs; ++i) gpu::copy_blocks(s.handle, cache, pairs_d, i, 1, p.block_size);
      } else {
        gpu::copy_blocks(s.handle, cache, pairs_d, 0, n_pairs, p.block_size);
      }
      end_op(s, "copy_blocks", cache);
    }
    s.op_open = false;  // also when there was nothing to copy
  }

 private:
  void activate() const { GPU_CHECK(cudaSetDevice(device_)); }

  struct Operand {
    const tsr_tensor* tensor;
    const char* name;  // in messages: "<op> <name>"
  };

  // out = a (op) b, elementwise over f32 operands of one shape.
  void binary_op(Stream* sp, Binary op, const char* name, const tsr_tensor* out_t, Operand a_t, Operand b_t) {
    Stream& s = begin_op(sp);
    const std::string n = name;
    const Mat out = view(out_t, TSR_DTYPE_F32, n + " out");
    const Mat a = view(a_t.tensor, TSR_DTYPE_F32, n + " " + a_t.name);
    const Mat b = view(b_t.tensor, TSR_DTYPE_F32, n + " " + b_t.name);
    require_same_shape(out, a, name);
    require_same_shape(out, b, name);
    gpu::binary(s.handle, op, out, a, b);
    end_op(s, name, out);
  }

  void unary_op(Stream* sp, Unary op, const tsr_tensor* out_t, const tsr_tensor* x_t, float arg, const char* name) {
    Stream& s = begin_op(sp);
    const Mat out = view(out_t, TSR_DTYPE_F32, std::string(name) + " out");
    const Mat x = view(x_t, TSR_DTYPE_F32, std::string(name) + " x");
    require_same_shape(out, x, name);
    gpu::unary(s.handle, op, out, x, arg);
    end_op(s, name, out);
  }

  // A [d] f32 vector (weights, biases): contiguous, d elements.
  static const float* row_vector(const tsr_tensor* t, int64_t d, const std::string& what) {
    const Mat v = view(t, TSR_DTYPE_F32, what);
    require(v.rows * v.cols == d, what + " length differs from the row length");
    require(v.rows == 1 || v.stride == v.cols * 4, what + " is not contiguous");
    return static_cast<const float*>(v.data);
  }

  void plugin_matmul(Stream* sp, const tsr_quant_kernels& k, const tsr_matmul_params& p) {
    Stream& s = begin_op(sp);
    const Mat out = view(p.out, TSR_DTYPE_F32, "matmul out");
    const tsr_quant_matmul_args args{sizeof(args), &k, &p, static_cast<void*>(s.handle), 0, 0};
    tsr_error* error = nullptr;
    const tsr_status status = k.matmul(&args, &error);
    if (status != TSR_STATUS_OK) {
      const std::string message = error != nullptr ? sdk::g_host->error_message(error) : "no details given";
      sdk::g_host->error_free(error);
      throw Failure(status, "matmul on the kernels of a quant plugin: " + message);
    }
    end_op(s, "matmul", out);
  }

  Stream& stream(Stream* s) { return s != nullptr ? *s : *default_stream_; }

  // Only ops may be enqueued on a recording stream (backend.h).
  static void not_recording(const Stream& s, const char* entry) {
    require(!s.recording, std::string(entry) + ": the stream is recording a graph");
  }

  // An op that throws between begin_op and end_op leaves op_open set: while recording,
  // that op is missing from the graph, so graph_end must fail.
  Stream& begin_op(Stream* sp, bool keeps_quantized_x = false) {
    activate();
    if (!keeps_quantized_x) forget_quantized_x();
    Stream& s = stream(sp);
    if (s.recording && s.op_open) s.record_failed = true;
    s.op_open = true;
    return s;
  }

  // After a launch: a bad launch fails the op now; `written` loses its mirror and, when it
  // overlaps the quantized x kept for the Q8_0 GEMV, that too.
  void end_op(Stream& s, const char* op, const Mat& written) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) device_failure(e, std::string(op) + " kernel launch");
    wrote(written);
    s.op_open = false;
  }

#if !defined(TSR_GPU_HIP)
  // x quantized for the Q8_0 GEMV, reused by the next matmuls of the same x (q, k and v of
  // a layer read one x; gate and up another) as long as nothing may have written x since:
  // every op but a matmul whose output lies elsewhere, every buffer write or memset and
  // every graph entry forgets it (a recording must quantize for itself, and a launch leaves
  // the scratch as its recording's last op did).
  struct QuantizedX {
    const Stream* stream = nullptr;
    const void* data = nullptr;
    int64_t rows = 0, cols = 0, stride = 0;
    bool same(const Stream& s, const Mat& x) const {
      return stream == &s && data == x.data && rows == x.rows && cols == x.cols && stride == x.stride;
    }
  };

  const void* quantized_x(Stream& s, const Mat& x) {
    void* scratch = s.scratch_block(&StreamScratch::x_q8, gpu::gemv_q8_0_scratch(x.rows, x.cols));
    if (!quantized_.same(s, x)) {
      gpu::quantize_q8_0(s.handle, x, scratch);
      quantized_ = {&s, x.data, x.rows, x.cols, x.stride};
    }
    return scratch;
  }

  void forget_quantized_x() { quantized_ = {}; }

  // A matmul keeps the quantized x unless its output overlaps x.
  void matmul_wrote(const Mat& out) {
    const auto* lo = static_cast<const uint8_t*>(quantized_.data);
    const auto* hi = lo + quantized_.rows * quantized_.stride;
    const auto* o = static_cast<const uint8_t*>(out.data);
    if (o < hi && o + out.rows * out.stride > lo) forget_quantized_x();
  }

  QuantizedX quantized_;
#else
  void forget_quantized_x() {}
  void matmul_wrote(const Mat&) {}
#endif

  void wrote(const Mat& m) {
    if (Buffer* b = mirrored(m.data)) b->mirror_valid_ = false;
  }

  // The mirrored buffer that contains `p`, or NULL.
  Buffer* mirrored(const void* p) {
    const auto addr = reinterpret_cast<uintptr_t>(p);
    auto it = mirrors_->upper_bound(addr);
    if (it == mirrors_->begin()) return nullptr;
    --it;
    return addr < it->first + std::max<uint64_t>(it->second->size_, 1) ? it->second : nullptr;
  }

  // `n` i32 values at device address `p` when a valid mirror holds them; else empty.
  std::vector<int32_t> mirrored_ints(const int32_t* p, int64_t n) {
    Buffer* b = mirrored(p);
    const size_t bytes = static_cast<size_t>(n) * sizeof(int32_t);
    const uint64_t offset = b ? reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(b->ptr_) : 0;
    if (b == nullptr || !b->mirror_valid_ || offset + bytes > b->size_) return {};
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::memcpy(v.data(), b->mirror_.data() + offset, bytes);
    return v;
  }

  // `n` i32 values at device address `p`: from the mirror when it holds them, else read
  // back (waiting for the stream, so that earlier ops that write them have run).
  std::vector<int32_t> host_ints(Stream& s, const int32_t* p, int64_t n) {
    std::vector<int32_t> v = mirrored_ints(p, n);
    if (!v.empty() || n <= 0) return v;
    require(!s.recording, "an index operand that the host did not write with buffer_write "
                          "cannot be checked while recording a graph");
    v.resize(static_cast<size_t>(n));
    GPU_CHECK(cudaMemcpyAsync(v.data(), p, v.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, s.handle));
    GPU_CHECK(cudaStreamSynchronize(s.handle));
    return v;
  }

  // Every key a query may read lies inside its block table and the cache (as the CPU backend).
  // Tree attention's parents: each row's is -1 or an earlier row of its own sequence, so
  // that every path ends at a root within the sequence's rows.
  static void validate_parents(const std::vector<int32_t>& qsl, const std::vector<int32_t>& parents) {
    for (size_t q = 0; q + 1 < qsl.size(); ++q) {
      for (int32_t i = qsl[q]; i < qsl[q + 1]; ++i) {
        const int32_t parent = parents[size_t(i)];
        require(parent == -1 || (parent >= qsl[q] && parent < i),
                "attention: parents[" + std::to_string(i) + "] must be -1 or an earlier row of its sequence");
      }
    }
  }

  static void validate_attention(int64_t n, int64_t num_seqs, int64_t max_blocks, int64_t num_slots,
                                 int32_t block_size, const std::vector<int32_t>& tables,
                                 const std::vector<int32_t>& seq_lens,
                                 const std::vector<int32_t>& qsl, const std::vector<int32_t>& pos) {
    require(qsl[0] == 0 && qsl[num_seqs] == n,
            "attention: query_start_loc must run from 0 to the number of tokens");
    for (int64_t q = 0; q < num_seqs; ++q) {
      require(qsl[q + 1] >= qsl[q] && qsl[q + 1] <= n,
              "attention: query_start_loc must not decrease nor pass the number of tokens");
      const int64_t blocks = (int64_t{seq_lens[q]} + block_size - 1) / block_size;
      require(seq_lens[q] >= 0 && blocks <= max_blocks,
              "attention: seq_len " + std::to_string(seq_lens[q]) + " exceeds the block table");
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t block = tables[q * max_blocks + b];
        require(block >= 0 && (block + 1) * block_size <= num_slots,
                "attention: block " + std::to_string(block) + " outside the cache");
      }
      for (int32_t i = qsl[q]; i < qsl[q + 1]; ++i) {
        require(pos[i] >= 0 && pos[i] < seq_lens[q],
                "attention: position " + std::to_string(pos[i]) + " not below seq_len " +
                    std::to_string(seq_lens[q]));
      }
    }
  }

#if !defined(TSR_GPU_HIP)
  // out = x · wᵀ with cuBLAS (column-major: outᵀ = w · xᵀ). F32 in f32; F16 and BF16 weights
  // with x rounded to the weight's type; the block formats decoded to bf16 in chunks of rows, as
  // the CPU backend's prefill GEMM does. Accumulation is f32 throughout.
  void blas_matmul(Stream& s, const Mat& out, const Mat& x, const Mat& w) {
    require(w.rows <= INT_MAX && x.rows <= INT_MAX && x.cols <= INT_MAX && out.stride / 4 <= INT_MAX &&
                x.stride / 4 <= INT_MAX && w.stride / 2 <= INT_MAX,
            "matmul: dimensions exceed cuBLAS's int range");
    cublasHandle_t h = s.blas();
    const int m = static_cast<int>(w.rows), n = static_cast<int>(x.rows), k = static_cast<int>(x.cols);
    const int ldo = static_cast<int>(out.stride / 4);
    const float one = 1.0f, zero = 0.0f;
    float* o = static_cast<float*>(out.data);
    if (w.dtype == TSR_DTYPE_F32) {
      check_blas(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, static_cast<const float*>(w.data),
                             static_cast<int>(w.stride / 4), static_cast<const float*>(x.data),
                             static_cast<int>(x.stride / 4), &zero, o, ldo),
                 "cublasSgemm");
      return;
    }
    const bool bf16 = w.dtype != TSR_DTYPE_F16;
    const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    auto* xh = static_cast<uint16_t*>(s.scratch_block(&StreamScratch::half_x, size_t(n) * k * 2));
    to_half(s.handle, x, bf16, xh);
    if (!is_quantized(w.dtype)) {
      check_blas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w.data, type,
                              static_cast<int>(w.stride / 2), xh, type, k, &zero, o, CUDA_R_32F, ldo,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
      return;
    }
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(m, kDequantChunk / k));
    auto* wh = static_cast<uint16_t*>(s.scratch_block(&StreamScratch::half_w, size_t(chunk) * k * 2));
    for (int64_t j0 = 0; j0 < m; j0 += chunk) {
      const int rows = static_cast<int>(std::min<int64_t>(chunk, m - j0));
      dequant_bf16(s.handle, w, j0, rows, wh);
      check_blas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, k, &one, wh, CUDA_R_16BF, k, xh,
                              CUDA_R_16BF, k, &zero, o + j0, CUDA_R_32F, ldo, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    }
  }

  bool use_blas_ = true;
#endif

  int device_;
  int64_t sm_count_ = 1;
  sdk::QuantKernelRegistry plugin_kernels_;  // quant plugins' matmuls, by weight dtype
  std::unique_ptr<Stream> default_stream_;
  std::shared_ptr<Mirrors> mirrors_ = std::make_shared<Mirrors>();
};

}  // namespace tsr::gpu

TSR_SDK_BACKEND_PLUGIN(tsr::gpu::GpuBackend, TSR_GPU_PLUGIN_NAME, "0.1.0")
