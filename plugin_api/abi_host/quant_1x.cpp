#include "abi_host/quant_1x.h"

#include <stdexcept>
#include <string>
#include <type_traits>

namespace tsr::abi {
namespace {

// The kernels table of ABI 1.1 … 1.4.
struct Kernels1x {
  size_t struct_size;
  const char* backend;
  tsr_status (*matmul)(const float* x, int64_t x_stride, int64_t m, int64_t k, const void* w,
                       int64_t w_row_bytes, int64_t n, float* y, int64_t y_stride, int32_t n_threads,
                       tsr_error** error);
};
static_assert(sizeof(Kernels1x) == 24, "the 1.x kernels table is 24 bytes");

bool is_matrix(const tsr_tensor* t) {
  return t != nullptr && t->struct_size >= sizeof(tsr_tensor) && t->ndim == 2 && t->data != nullptr;
}

}  // namespace

// The 2.0 table comes first, so that args->kernels leads back to the adapter.
struct QuantKernels1x::Impl {
  tsr_quant_kernels table;
  const Kernels1x* old;
  const tsr_host_api* host;
};
static_assert(std::is_standard_layout_v<QuantKernels1x::Impl>);

namespace {

tsr_status refuse(const tsr_host_api* host, tsr_error** error, const std::string& message) {
  if (error != nullptr && host != nullptr) {
    *error = host->error_new(TSR_STATUS_INVALID_ARGUMENT, message.data(), message.size());
  }
  return TSR_STATUS_INVALID_ARGUMENT;
}

// The tensors' addresses and row strides, as the 1.x entry took them; the plugin checks
// the rest (whole blocks, strides at least a row).
tsr_status matmul(const tsr_quant_matmul_args* a, tsr_error** error) {
  if (a == nullptr || a->struct_size < sizeof(*a) || a->kernels == nullptr) {
    return TSR_STATUS_INVALID_ARGUMENT;  // no adapter to reach a host through
  }
  const auto& self = *reinterpret_cast<const QuantKernels1x::Impl*>(a->kernels);
  const tsr_matmul_params* p = a->params;
  if (p == nullptr || p->struct_size < sizeof(*p) || !is_matrix(p->x) || !is_matrix(p->w) || !is_matrix(p->out)) {
    return refuse(self.host, error, "quant matmul: x, w and out must be 2-d tensors with data");
  }
  const tsr_tensor &x = *p->x, &w = *p->w, &y = *p->out;
  if (x.dtype != TSR_DTYPE_F32 || y.dtype != TSR_DTYPE_F32 || x.strides[1] != 4 || y.strides[1] != 4) {
    return refuse(self.host, error, "quant matmul: x and out must be contiguous f32 rows");
  }
  if (y.shape[0] != x.shape[0] || y.shape[1] != w.shape[0] || w.shape[1] != x.shape[1] || x.strides[0] % 4 != 0 ||
      y.strides[0] % 4 != 0) {
    return refuse(self.host, error, "quant matmul: out must be [rows of x, rows of w] and w as wide as x");
  }
  return self.old->matmul(static_cast<const float*>(x.data), x.strides[0] / 4, x.shape[0], x.shape[1], w.data,
                          w.strides[0], w.shape[0], static_cast<float*>(y.data), y.strides[0] / 4, a->n_threads,
                          error);
}

}  // namespace

QuantKernels1x::QuantKernels1x(const void* kernels, const tsr_host_api* host) : impl_(std::make_unique<Impl>()) {
  const auto* old = static_cast<const Kernels1x*>(kernels);
  if (old == nullptr || old->struct_size < sizeof(Kernels1x) || old->matmul == nullptr) {
    throw std::invalid_argument("its 1.x kernels table is NULL, smaller than 24 bytes or has no matmul");
  }
  impl_->table = {sizeof(tsr_quant_kernels), old->backend, matmul};
  impl_->old = old;
  impl_->host = host;
}

QuantKernels1x::~QuantKernels1x() = default;

const tsr_quant_kernels* QuantKernels1x::kernels() const { return &impl_->table; }

}  // namespace tsr::abi
