// Per-row reductions of the GPU backends: layer norm (with optional bias), softmax,
// top-k (MoE routing) and the MoE combine. One block per row; a row is read from memory in each pass and
// written last, so out may alias x. Semantics follow plugins/backend_cpu/cpu_row_ops.cpp.
#include "gpu_decode.cuh"
#include "gpu_kernels.h"

namespace tsr::gpu {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    layer_norm_kernel(Mat out, Mat x, const float* w, const float* b, float eps) {
  __shared__ float scratch[kThreads / kWarp];
  const float* in = row_ptr<const float>(x, blockIdx.x);
  float* o = row_ptr<float>(out, blockIdx.x);
  float sum = 0;
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) sum += in[c];
  const float mean = block_sum(sum, scratch) / static_cast<float>(x.cols);
  float sq = 0;
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) sq += (in[c] - mean) * (in[c] - mean);
  const float inv = 1.0f / sqrtf(block_sum(sq, scratch) / static_cast<float>(x.cols) + eps);
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
    o[c] = (in[c] - mean) * inv * w[c] + (b != nullptr ? b[c] : 0.0f);
  }
}

__global__ void __launch_bounds__(kThreads) softmax_kernel(Mat out, Mat x, float scale) {
  __shared__ float scratch[kThreads / kWarp];
  const float* in = row_ptr<const float>(x, blockIdx.x);
  float* o = row_ptr<float>(out, blockIdx.x);
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) mx = fmaxf(mx, in[c] * scale);
  mx = block_max(mx, scratch);
  float sum = 0;
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) sum += expf(in[c] * scale - mx);
  const float inv = 1.0f / block_sum(sum, scratch);
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) o[c] = expf(in[c] * scale - mx) * inv;
}

// The order of top-k: larger values first, NaN after every number, the lower index first
// among equals (NaNs included), so that the order is total and each pick is unique.
struct Candidate {
  float value;
  int32_t index;  // -1: none
};

__device__ __forceinline__ bool before(const Candidate& a, const Candidate& b) {
  if (b.index < 0) return a.index >= 0;
  if (a.index < 0) return false;
  const bool na = isnan(a.value), nb = isnan(b.value);
  if (na != nb) return nb;
  if (!na && a.value != b.value) return a.value > b.value;
  return a.index < b.index;
}

__device__ __forceinline__ Candidate shfl_xor(Candidate c, int mask) {
#if defined(TSR_GPU_HIP)
  return {__shfl_xor(c.value, mask, kWarp), __shfl_xor(c.index, mask, kWarp)};
#else
  return {__shfl_xor_sync(0xffffffffu, c.value, mask, kWarp), __shfl_xor_sync(0xffffffffu, c.index, mask, kWarp)};
#endif
}

__device__ Candidate block_first(Candidate c, Candidate* scratch) {
#pragma unroll
  for (int m = kWarp / 2; m > 0; m >>= 1) {
    const Candidate o = shfl_xor(c, m);
    if (before(o, c)) c = o;
  }
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  __syncthreads();  // the previous round's readers are done
  if (lane == 0) scratch[warp] = c;
  __syncthreads();
  c = lane < static_cast<int>(blockDim.x / kWarp) ? scratch[lane] : Candidate{0.0f, -1};
#pragma unroll
  for (int m = kWarp / 2; m > 0; m >>= 1) {
    const Candidate o = shfl_xor(c, m);
    if (before(o, c)) c = o;
  }
  return c;
}

// Round j picks the first element (in the order above) that comes after round j - 1's
// pick: k passes over the row, no per-row memory, exact ties as the CPU backend breaks them.
__global__ void __launch_bounds__(kThreads) top_k_kernel(Mat ids, Mat values, Mat x, int32_t k) {
  __shared__ Candidate scratch[kThreads / kWarp];
  const float* in = row_ptr<const float>(x, blockIdx.x);
  Candidate last{0.0f, -1};
  for (int32_t j = 0; j < k; ++j) {
    Candidate best{0.0f, -1};
    for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
      const Candidate cand{in[c], static_cast<int32_t>(c)};
      if ((last.index < 0 || before(last, cand)) && before(cand, best)) best = cand;
    }
    best = block_first(best, scratch);
    if (threadIdx.x == 0) {
      row_ptr<int32_t>(ids, blockIdx.x)[j] = best.index;
      row_ptr<float>(values, blockIdx.x)[j] = best.value;
    }
    last = best;
  }
}

// One block per token: each thread derives the token's weights (n_used is small) and sums
// its columns in slot order, each product rounded before it is added, as the CPU does.
__global__ void __launch_bounds__(kThreads)
    moe_combine_kernel(Mat out, Mat x, Mat w, int64_t n_used, int64_t d, int normalize, float scale) {
  const float* wr = row_ptr<const float>(w, blockIdx.x);
  const float* in = row_ptr<const float>(x, blockIdx.x);
  float* o = row_ptr<float>(out, blockIdx.x);
  float sum = 0;
  if (normalize != 0) {
    for (int64_t s = 0; s < n_used; ++s) sum += wr[s];
  }
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = 0;
    for (int64_t s = 0; s < n_used; ++s) {
      float ws = normalize != 0 ? wr[s] / sum : wr[s];
      if (scale != 0) ws *= scale;
      const float product = __fmul_rn(in[s * d + c], ws);
      acc = s == 0 ? product : __fadd_rn(acc, product);
    }
    o[c] = acc;
  }
}

int threads_for(int64_t cols) {
  const int64_t warps = (cols + kWarp - 1) / kWarp;
  return static_cast<int>(warps * kWarp < kThreads ? warps * kWarp : kThreads);
}

}  // namespace

void layer_norm(cudaStream_t s, const Mat& out, const Mat& x, const float* weight, const float* bias, float eps) {
  layer_norm_kernel<<<static_cast<unsigned>(x.rows), threads_for(x.cols), 0, s>>>(out, x, weight, bias, eps);
}

void softmax(cudaStream_t s, const Mat& out, const Mat& x, float scale) {
  softmax_kernel<<<static_cast<unsigned>(x.rows), threads_for(x.cols), 0, s>>>(out, x, scale);
}

void moe_combine(cudaStream_t s, const Mat& out, const Mat& x, const Mat& weights, int64_t n_used, int normalize,
                 float scale) {
  const int64_t d = out.cols;
  moe_combine_kernel<<<static_cast<unsigned>(out.rows), threads_for(d), 0, s>>>(out, x, weights, n_used, d, normalize,
                                                                               scale);
}

void top_k(cudaStream_t s, const Mat& ids, const Mat& values, const Mat& x, int32_t k) {
  top_k_kernel<<<static_cast<unsigned>(x.rows), threads_for(x.cols), 0, s>>>(ids, values, x, k);
}

}  // namespace tsr::gpu
