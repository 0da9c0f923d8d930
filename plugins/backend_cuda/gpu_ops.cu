// The small ops: one block per row where a row needs a reduction or an index, a flat grid
// for elementwise ops. Semantics follow plugins/backend_cpu/cpu_ops.cpp.
#include "gpu_decode.cuh"
#include "gpu_kernels.h"

namespace tsr::gpu {

namespace {

constexpr int kThreads = 256;

template <class T>
__device__ __forceinline__ T* row_ptr(void* base, int64_t stride, int64_t r) {
  return reinterpret_cast<T*>(static_cast<uint8_t*>(base) + r * stride);
}

template <int D>
__global__ void get_rows_kernel(Mat out, Mat table, const int32_t* ids) {
  const int64_t i = blockIdx.x;
  const int32_t id = ids[i];
  if (id < 0 || id >= table.rows) return;  // refused on the host; never read out of bounds
  const uint8_t* src = row_ptr<const uint8_t>(table.data, table.stride, id);
  float* dst = row_ptr<float>(out.data, out.stride, i);
  for (int64_t j = threadIdx.x; j < out.cols; j += blockDim.x) dst[j] = decode<D>(src, j);
}

// Sum over the block; every thread gets the total. `scratch` holds one float per warp.
__device__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / kWarp) ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

// One block per row, up to 1024 threads. A thread keeps its columns (up to kNormPer) in
// registers between the sum and the scaling: `out` may alias `x`, so a second pass over
// memory would wait for each store before the next load.
constexpr int kNormThreads = 1024;
constexpr int kNormPer = 8;

__global__ void __launch_bounds__(kNormThreads) rms_norm_kernel(Mat out, Mat x, const float* w, float eps) {
  __shared__ float scratch[kNormThreads / kWarp];
  const float* in = row_ptr<const float>(x.data, x.stride, blockIdx.x);
  float* o = row_ptr<float>(out.data, out.stride, blockIdx.x);
  const int64_t step = blockDim.x, held = kNormPer * step;
  float v[kNormPer];
  float sum = 0;
#pragma unroll
  for (int e = 0; e < kNormPer; ++e) {
    const int64_t c = threadIdx.x + e * step;
    v[e] = c < x.cols ? in[c] : 0.0f;
    sum += v[e] * v[e];
  }
  for (int64_t c = threadIdx.x + held; c < x.cols; c += step) sum += in[c] * in[c];  // rows > 8192
  sum = block_sum(sum, scratch);
  const float scale = 1.0f / sqrtf(sum / static_cast<float>(x.cols) + eps);
  for (int64_t c = threadIdx.x + held; c < x.cols; c += step) o[c] = in[c] * scale * w[c];
#pragma unroll
  for (int e = 0; e < kNormPer; ++e) {
    const int64_t c = threadIdx.x + e * step;
    if (c < x.cols) o[c] = v[e] * scale * w[c];
  }
}

// One thread per (token, head, pair): each computes its angle (in double, as the CPU backend
// does, so that positions in the thousands keep f32 accuracy) and rotates one pair. The
// angle is recomputed per head: cheaper than a loop over heads, whose loads must wait for
// the previous head's stores (they may alias).
__global__ void rope_kernel(Mat x, int64_t heads, int64_t head_dim, const int32_t* pos,
                            int32_t n_rot, bool neox, float freq_base, float freq_scale,
                            const float* factors) {
  const int half = n_rot / 2;
  const int64_t per_token = heads * half;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= x.rows * per_token) return;
  const int64_t token = t / per_token, h = t % per_token / half;
  const int i = static_cast<int>(t % half);
  const double theta = static_cast<double>(pos[token]) * freq_scale *
                       pow(static_cast<double>(freq_base), -2.0 * i / n_rot) /
                       (factors != nullptr ? static_cast<double>(factors[i]) : 1.0);
  double sd, cd;
  sincos(theta, &sd, &cd);
  const float sn = static_cast<float>(sd), cs = static_cast<float>(cd);
  float* v = row_ptr<float>(x.data, x.stride, token) + h * head_dim;
  const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * cs - x1 * sn;
  v[b] = x0 * sn + x1 * cs;
}

__global__ void kv_write_kernel(Mat kc, Mat vc, Mat k, Mat v, const int32_t* slots) {
  const int32_t slot = slots[blockIdx.x];
  if (slot < 0 || slot >= kc.rows) return;  // -1 skips the row
  const float* ks = row_ptr<const float>(k.data, k.stride, blockIdx.x);
  const float* vs = row_ptr<const float>(v.data, v.stride, blockIdx.x);
  float* kd = row_ptr<float>(kc.data, kc.stride, slot);
  float* vd = row_ptr<float>(vc.data, vc.stride, slot);
  for (int64_t c = threadIdx.x; c < k.cols; c += blockDim.x) {
    kd[c] = ks[c];
    vd[c] = vs[c];
  }
}

// Elementwise over [rows, cols] with independent row strides; out may alias an input
// since every element is read and written by the same thread.
template <bool kSilu>
__global__ void binary_kernel(Mat out, Mat a, Mat b) {
  const int64_t n = out.rows * out.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / out.cols, c = i % out.cols;
    const float x = row_ptr<const float>(a.data, a.stride, r)[c];
    const float y = row_ptr<const float>(b.data, b.stride, r)[c];
    row_ptr<float>(out.data, out.stride, r)[c] = kSilu ? x / (1.0f + expf(-x)) * y : x + y;
  }
}

// Row by row, each row's own bytes only: padding may belong to another tensor.
template <class Word>
__global__ void copy_blocks_kernel(Mat cache, const int32_t* pairs, int64_t first,
                                   int32_t block_size, int64_t row_words) {
  const int64_t pair = first + blockIdx.x;
  const int64_t src = int64_t(pairs[2 * pair]) * block_size + blockIdx.y;
  const int64_t dst = int64_t(pairs[2 * pair + 1]) * block_size + blockIdx.y;
  const Word* s = row_ptr<const Word>(cache.data, cache.stride, src);
  Word* d = row_ptr<Word>(cache.data, cache.stride, dst);
  for (int64_t i = threadIdx.x; i < row_words; i += blockDim.x) d[i] = s[i];
}

unsigned flat_grid(int64_t n) {
  // Enough blocks to fill any current GPU; the grid-stride loop covers the rest.
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

int64_t dtype_row_bytes(tsr_dtype dtype, int64_t n) {
  switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_I32: return n * 4;
    case TSR_DTYPE_F16: case TSR_DTYPE_BF16: return n * 2;
    case TSR_DTYPE_Q8_0: return n / kQK * kQ8Bytes;
    case TSR_DTYPE_Q4_0: return n / kQK * kQ4Bytes;
    default: return 0;
  }
}

}  // namespace

cudaError_t probe_kernels() {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(rms_norm_kernel));
}

void get_rows(cudaStream_t s, const Mat& out, const Mat& table, const int32_t* ids) {
  dispatch_dtype(table.dtype, [&](auto tag) {
    constexpr int D = decltype(tag)::value;
    get_rows_kernel<D><<<static_cast<unsigned>(out.rows), kThreads, 0, s>>>(out, table, ids);
  });
}

void rms_norm(cudaStream_t s, const Mat& out, const Mat& x, const float* weight, float eps) {
  const int64_t warps = (x.cols + kWarp - 1) / kWarp;
  const int threads = static_cast<int>(warps * kWarp < kNormThreads ? warps * kWarp : kNormThreads);
  rms_norm_kernel<<<static_cast<unsigned>(x.rows), threads, 0, s>>>(out, x, weight, eps);
}

void rope(cudaStream_t s, const Mat& x, int64_t heads, int64_t head_dim, const int32_t* pos,
          int32_t n_rot, bool neox, float freq_base, float freq_scale, const float* factors) {
  rope_kernel<<<grid_for(x.rows * heads * (n_rot / 2), kThreads), kThreads, 0, s>>>(
      x, heads, head_dim, pos, n_rot, neox, freq_base, freq_scale, factors);
}

void kv_write(cudaStream_t s, const Mat& k_cache, const Mat& v_cache, const Mat& k, const Mat& v,
              const int32_t* slots) {
  kv_write_kernel<<<static_cast<unsigned>(k.rows), kThreads, 0, s>>>(k_cache, v_cache, k, v, slots);
}

void silu_mul(cudaStream_t s, const Mat& out, const Mat& gate, const Mat& up) {
  binary_kernel<true><<<flat_grid(out.rows * out.cols), kThreads, 0, s>>>(out, gate, up);
}

void add(cudaStream_t s, const Mat& out, const Mat& a, const Mat& b) {
  binary_kernel<false><<<flat_grid(out.rows * out.cols), kThreads, 0, s>>>(out, a, b);
}

void copy_blocks(cudaStream_t s, const Mat& cache, const int32_t* pairs, int64_t first, int64_t n,
                 int32_t block_size) {
  const int64_t bytes = dtype_row_bytes(cache.dtype, cache.cols);
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(block_size));
  const bool words = bytes % 4 == 0 && cache.stride % 4 == 0 &&
                     reinterpret_cast<uintptr_t>(cache.data) % 4 == 0;
  if (words) {
    copy_blocks_kernel<uint32_t><<<grid, kThreads, 0, s>>>(cache, pairs, first, block_size, bytes / 4);
  } else {
    copy_blocks_kernel<uint8_t><<<grid, kThreads, 0, s>>>(cache, pairs, first, block_size, bytes);
  }
}

}  // namespace tsr::gpu
