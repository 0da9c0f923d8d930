// A test backend whose device fails part-way through serving: memory works as host memory
// and ops compute nothing (outputs keep what they held: zeros) until the op budget runs
// out. Then the op fails with TSR_STATUS_DEVICE_ERROR and, as a GPU after an Xid or a
// CUDA sticky error, so does every later op and synchronize; with
// TESSERA_TEST_LOST_DEVICE_TRANSIENT=1 only that op fails and the device works on. The
// budget is TESSERA_TEST_LOST_DEVICE_OPS op calls (default 300), counted per backend.
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>

#include "tessera/sdk/backend.hpp"

namespace {

using tsr::sdk::Failure;

class LostDevice {
 public:
  class Buffer {
   public:
    explicit Buffer(uint64_t size) : data_(std::calloc(size + 64, 1)), size_(size) {
      if (data_ == nullptr) throw Failure(TSR_STATUS_OUT_OF_MEMORY, "cannot allocate");
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { std::free(data_); }
    void* data() const { return data_; }
    uint64_t size() const { return size_; }
    uint8_t* at(uint64_t offset) const { return static_cast<uint8_t*>(data_) + offset; }

   private:
    void* data_;
    uint64_t size_;
  };
  struct Stream {};
  struct Event {};

  static int32_t device_count() { return 1; }
  static void device_props(int32_t, tsr_device_props& props) {
    std::strncpy(props.name, "lost device (test)", sizeof(props.name) - 1);
    props.type = TSR_DEVICE_GPU;
    props.compute_units = 1;
    props.host_visible = 1;
  }

  explicit LostDevice(const tsr_backend_params&) {
    const char* ops = std::getenv("TESSERA_TEST_LOST_DEVICE_OPS");
    const char* transient = std::getenv("TESSERA_TEST_LOST_DEVICE_TRANSIENT");
    budget_ = ops != nullptr ? std::atol(ops) : 300;
    transient_ = transient != nullptr && std::string(transient) == "1";
  }

  bool supports(tsr_op, std::span<const tsr_dtype>) const { return true; }

  std::unique_ptr<Buffer> buffer_alloc(uint64_t size) { return std::make_unique<Buffer>(size); }
  void buffer_write(Stream*, Buffer& b, uint64_t off, const void* src, uint64_t n) { std::memcpy(b.at(off), src, n); }
  void buffer_read(Stream*, const Buffer& b, uint64_t off, void* dst, uint64_t n) {
    alive();
    std::memcpy(dst, b.at(off), n);
  }
  void buffer_memset(Stream*, Buffer& b, uint64_t off, int v, uint64_t n) { std::memset(b.at(off), v, n); }
  std::unique_ptr<Stream> stream_create() { return std::make_unique<Stream>(); }
  void stream_synchronize(Stream&) { alive(); }
  std::unique_ptr<Event> event_create() { return std::make_unique<Event>(); }
  void event_record(Event&, Stream*) {}
  void event_wait(Stream*, Event&) {}
  void event_synchronize(Event&) { alive(); }

  void get_rows(Stream*, const tsr_get_rows_params&) { op(); }
  void rms_norm(Stream*, const tsr_rms_norm_params&) { op(); }
  void matmul(Stream*, const tsr_matmul_params&) { op(); }
  void rope(Stream*, const tsr_rope_params&) { op(); }
  void kv_write(Stream*, const tsr_kv_write_params&) { op(); }
  void attention(Stream*, const tsr_attention_params&) { op(); }
  void silu_mul(Stream*, const tsr_silu_mul_params&) { op(); }
  void add(Stream*, const tsr_add_params&) { op(); }
  void copy_blocks(Stream*, const tsr_copy_blocks_params&) { op(); }

 private:
  void op() {
    alive();
    if (--budget_ > 0) return;
    if (transient_) {
      budget_ = std::numeric_limits<long>::max();
      throw Failure(TSR_STATUS_DEVICE_ERROR, "device fault (test backend): this op only");
    }
    lost_ = true;
    alive();
  }
  void alive() const {
    if (lost_) throw Failure(TSR_STATUS_DEVICE_ERROR, "device lost (test backend): every call fails from now on");
  }

  long budget_;
  bool transient_;
  bool lost_ = false;
};

}  // namespace

TSR_SDK_BACKEND_PLUGIN(LostDevice, "lost_device", "0.1.0")
