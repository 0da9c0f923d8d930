// Elementwise ops of the GPU backends: add, mul, SwiGLU (also gpt-oss's clamped one) and GeGLU, scale, GELU (tanh
// form), tanh softcapping, bias add and casts between F32, F16 and BF16. Grid-stride loops
// over [rows, cols] with independent row strides; each element is read and written by one
// thread, so out may alias an input. Semantics follow plugins/backend_cpu/cpu_elementwise.cpp.
#include "gpu_decode.cuh"
#include "gpu_kernels.h"

namespace tsr::gpu {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

template <Binary kOp>
__device__ __forceinline__ float apply_binary(float x, float y) {
  if constexpr (kOp == Binary::kAdd) return x + y;
  else if constexpr (kOp == Binary::kMul) return x * y;
  else if constexpr (kOp == Binary::kSiluMul) return x / (1.0f + expf(-x)) * y;
  else return gelu_tanh(x) * y;
}

template <Unary kOp>
__device__ __forceinline__ float apply_unary(float x, float arg) {
  if constexpr (kOp == Unary::kScale) return x * arg;
  else if constexpr (kOp == Unary::kGelu) return gelu_tanh(x);
  else return arg * tanhf(x / arg);
}

template <Binary kOp>
__global__ void binary_kernel(Mat out, Mat a, Mat b) {
  const int64_t n = out.rows * out.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / out.cols, c = i % out.cols;
    row_ptr<float>(out, r)[c] = apply_binary<kOp>(row_ptr<const float>(a, r)[c], row_ptr<const float>(b, r)[c]);
  }
}

template <Unary kOp>
__global__ void unary_kernel(Mat out, Mat x, float arg) {
  const int64_t n = out.rows * out.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / out.cols, c = i % out.cols;
    row_ptr<float>(out, r)[c] = apply_unary<kOp>(row_ptr<const float>(x, r)[c], arg);
  }
}

__global__ void bias_add_kernel(Mat out, Mat x, const float* bias) {
  const int64_t n = out.rows * out.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / out.cols, c = i % out.cols;
    row_ptr<float>(out, r)[c] = row_ptr<const float>(x, r)[c] + bias[c];
  }
}

__global__ void swiglu_oai_kernel(Mat out, Mat gate, Mat up, float alpha, float limit) {
  const int64_t n = out.rows * out.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / out.cols, c = i % out.cols;
    const float x = fminf(row_ptr<const float>(gate, r)[c], limit);
    const float y = fminf(fmaxf(row_ptr<const float>(up, r)[c], -limit), limit);
    row_ptr<float>(out, r)[c] = x / (1.0f + expf(alpha * -x)) * (y + 1.0f);
  }
}

template <int To>
__device__ __forceinline__ void store(uint8_t* row, int64_t c, float v) {
  if constexpr (To == TSR_DTYPE_F32) reinterpret_cast<float*>(row)[c] = v;
  else if constexpr (To == TSR_DTYPE_F16) reinterpret_cast<uint16_t*>(row)[c] = f32_to_f16_bits(v);
  else reinterpret_cast<uint16_t*>(row)[c] = f32_to_bf16_bits(v);
}

template <int From, int To>
__global__ void cast_kernel(Mat out, Mat x) {
  const int64_t n = out.rows * out.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / out.cols, c = i % out.cols;
    store<To>(row_ptr<uint8_t>(out, r), c, decode<From>(row_ptr<const uint8_t>(x, r), c));
  }
}

template <int From>
void launch_cast(cudaStream_t s, const Mat& out, const Mat& x) {
  const unsigned grid = flat_grid(out.rows * out.cols, kThreads);
  switch (out.dtype) {
    case TSR_DTYPE_F32: cast_kernel<From, TSR_DTYPE_F32><<<grid, kThreads, 0, s>>>(out, x); break;
    case TSR_DTYPE_F16: cast_kernel<From, TSR_DTYPE_F16><<<grid, kThreads, 0, s>>>(out, x); break;
    case TSR_DTYPE_BF16: cast_kernel<From, TSR_DTYPE_BF16><<<grid, kThreads, 0, s>>>(out, x); break;
    default: break;  // the caller checked the dtypes
  }
}

}  // namespace

void binary(cudaStream_t s, Binary op, const Mat& out, const Mat& a, const Mat& b) {
  const unsigned grid = flat_grid(out.rows * out.cols, kThreads);
  switch (op) {
    case Binary::kAdd: binary_kernel<Binary::kAdd><<<grid, kThreads, 0, s>>>(out, a, b); break;
    case Binary::kMul: binary_kernel<Binary::kMul><<<grid, kThreads, 0, s>>>(out, a, b); break;
    case Binary::kSiluMul: binary_kernel<Binary::kSiluMul><<<grid, kThreads, 0, s>>>(out, a, b); break;
    case Binary::kGeluMul: binary_kernel<Binary::kGeluMul><<<grid, kThreads, 0, s>>>(out, a, b); break;
  }
}

void swiglu_oai(cudaStream_t s, const Mat& out, const Mat& gate, const Mat& up, float alpha, float limit) {
  swiglu_oai_kernel<<<flat_grid(out.rows * out.cols, kThreads), kThreads, 0, s>>>(out, gate, up, alpha, limit);
}

void unary(cudaStream_t s, Unary op, const Mat& out, const Mat& x, float arg) {
  const unsigned grid = flat_grid(out.rows * out.cols, kThreads);
  switch (op) {
    case Unary::kScale: unary_kernel<Unary::kScale><<<grid, kThreads, 0, s>>>(out, x, arg); break;
    case Unary::kGelu: unary_kernel<Unary::kGelu><<<grid, kThreads, 0, s>>>(out, x, arg); break;
    case Unary::kSoftcap: unary_kernel<Unary::kSoftcap><<<grid, kThreads, 0, s>>>(out, x, arg); break;
  }
}

void bias_add(cudaStream_t s, const Mat& out, const Mat& x, const float* bias) {
  bias_add_kernel<<<flat_grid(out.rows * out.cols, kThreads), kThreads, 0, s>>>(out, x, bias);
}

void cast(cudaStream_t s, const Mat& out, const Mat& x) {
  switch (x.dtype) {
    case TSR_DTYPE_F32: launch_cast<TSR_DTYPE_F32>(s, out, x); break;
    case TSR_DTYPE_F16: launch_cast<TSR_DTYPE_F16>(s, out, x); break;
    case TSR_DTYPE_BF16: launch_cast<TSR_DTYPE_BF16>(s, out, x); break;
    default: break;
  }
}

}  // namespace tsr::gpu
