// The small ops: one block per row where a row needs a reduction or an index, a flat grid
// for elementwise ops. Semantics follow plugins/backend_cpu/cpu_ops.cpp.
#include <cfloat>

#include "gpu_decode.cuh"
#include "gpu_kernels.h"

namespace tsr::gpu {

namespace {

constexpr int kThreads = 256;

template <int D>
__global__ void get_rows_kernel(Mat out, Mat table, const int32_t* ids) {
  const int64_t i = blockIdx.x;
  const int32_t id = ids[i];
  if (id < 0 || id >= table.rows) return;  // refused on the host; never read out of bounds
  const uint8_t* src = row_ptr<const uint8_t>(table, id);
  float* dst = row_ptr<float>(out, i);
  for (int64_t j = threadIdx.x; j < out.cols; j += blockDim.x) dst[j] = decode<D>(src, j);
}

// One block per row, up to 1024 threads. A thread keeps its columns (up to kNormPer) in
// registers between the sum and the scaling: `out` may alias `x`, so a second pass over
// memory would wait for each store before the next load.
constexpr int kNormThreads = 1024;
constexpr int kNormPer = 8;

__global__ void __launch_bounds__(kNormThreads) rms_norm_kernel(Mat out, Mat x, const float* w, float eps) {
  __shared__ float scratch[kNormThreads / kWarp];
  const float* in = row_ptr<const float>(x, blockIdx.x);
  float* o = row_ptr<float>(out, blockIdx.x);
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
__global__ void rope_kernel(Mat x, RopeArgs a) {
  const int half = a.n_rot / 2;
  const int64_t per_token = a.heads * half;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= x.rows * per_token) return;
  const int64_t token = t / per_token, h = t % per_token / half;
  const int i = static_cast<int>(t % half);
  double inv_freq = pow(static_cast<double>(a.freq_base), -2.0 * i / a.n_rot);
  if (a.factors != nullptr) inv_freq /= static_cast<double>(a.factors[i]);
  const double extrap = static_cast<double>(a.pos[token]) * inv_freq;
  double theta = extrap * a.freq_scale;
  if (a.ext_factor != 0) {  // YaRN: the interpolated and the extrapolated angle, mixed by a ramp
    const double y = (i - double(a.corr_low)) / fmax(0.001, double(a.corr_high) - a.corr_low);
    const double mix = (1.0 - fmin(1.0, fmax(0.0, y))) * a.ext_factor;
    theta = theta * (1 - mix) + extrap * mix;
  }
  double sd, cd;
  sincos(theta, &sd, &cd);
  const float sn = static_cast<float>(sd * a.mscale), cs = static_cast<float>(cd * a.mscale);
  float* v = row_ptr<float>(x, token) + h * a.head_dim;
  const int p = a.neox ? i : 2 * i, q = a.neox ? i + half : 2 * i + 1;
  const float x0 = v[p], x1 = v[q];
  v[p] = x0 * cs - x1 * sn;
  v[q] = x0 * sn + x1 * cs;
}

// One GGUF block of 32 floats quantized as quant_formats/ggml_blocks.cpp's reference does
// (the CPU backend's KV cache): a block with a NaN or an infinity gets a NaN scale.
template <int D>
__device__ void quantize_block(const float* x, uint8_t* block) {
  bool finite = true;
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    finite = finite && isfinite(x[j]);
    if (amax < fabsf(x[j])) amax = fabsf(x[j]), max = x[j];
  }
  const float d = !finite ? NAN : D == TSR_DTYPE_Q8_0 ? amax / 127.0f : max / -8.0f;
  const float id = finite && fabsf(d) >= FLT_MIN ? 1.0f / d : 0.0f;
  const uint16_t dh = f32_to_f16_bits(d);
  block[0] = static_cast<uint8_t>(dh & 0xff);  // blocks are 2-byte aligned at best
  block[1] = static_cast<uint8_t>(dh >> 8);
  for (int j = 0; j < kQK && D == TSR_DTYPE_Q8_0; ++j) {
    block[2 + j] = static_cast<uint8_t>(finite ? static_cast<int8_t>(roundf(x[j] * id)) : 0);
  }
  for (int j = 0; j < kQK / 2 && D == TSR_DTYPE_Q4_0; ++j) {
    const int q0 = finite ? min(15, int(static_cast<int8_t>(x[j] * id + 8.5f))) : 8;
    const int q1 = finite ? min(15, int(static_cast<int8_t>(x[j + kQK / 2] * id + 8.5f))) : 8;
    block[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// cache[slots[i]] = src[i] in the cache's dtype D: an element per thread, or a block of 32
// per thread for Q8_0 / Q4_0.
template <int D>
__global__ void kv_store_kernel(Mat cache, Mat src, const int32_t* slots) {
  const int32_t slot = slots[blockIdx.x];
  if (slot < 0 || slot >= cache.rows) return;  // -1 skips the row
  const float* s = row_ptr<const float>(src, blockIdx.x);
  uint8_t* d = row_ptr<uint8_t>(cache, slot);
  if constexpr (D == TSR_DTYPE_Q8_0 || D == TSR_DTYPE_Q4_0) {
    const int bytes = D == TSR_DTYPE_Q8_0 ? kQ8Bytes : kQ4Bytes;
    for (int64_t b = threadIdx.x; b < src.cols / kQK; b += blockDim.x) quantize_block<D>(s + b * kQK, d + b * bytes);
  } else {
    for (int64_t c = threadIdx.x; c < src.cols; c += blockDim.x) {
      if constexpr (D == TSR_DTYPE_F32) reinterpret_cast<float*>(d)[c] = s[c];
      else if constexpr (D == TSR_DTYPE_F16) reinterpret_cast<uint16_t*>(d)[c] = f32_to_f16_bits(s[c]);
      else reinterpret_cast<uint16_t*>(d)[c] = f32_to_bf16_bits(s[c]);
    }
  }
}

// One head per thread: the scale max|x| / 448 and a byte per element, as the CPU backend's
// quantize_row_fp8_e4m3.
__global__ void kv_store_fp8_kernel(Mat cache, Mat src, const int32_t* slots, int32_t hd) {
  const int32_t slot = slots[blockIdx.x];
  if (slot < 0 || slot >= cache.rows) return;  // -1 skips the row
  const float* s = row_ptr<const float>(src, blockIdx.x);
  uint8_t* d = row_ptr<uint8_t>(cache, slot);
  for (int64_t h = threadIdx.x; h < src.cols / hd; h += blockDim.x) {
    const float* x = s + h * hd;
    uint8_t* out = d + h * (kFp8ScaleBytes + hd);
    float amax = 0.0f;
    for (int j = 0; j < hd; ++j) amax = fmaxf(amax, fabsf(x[j]));
    const float scale = amax / kFp8Max, inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    *reinterpret_cast<float*>(out) = scale;
    for (int j = 0; j < hd; ++j) out[kFp8ScaleBytes + j] = f32_to_e4m3(x[j] * inv);
  }
}

// Row by row, each row's own bytes only: padding may belong to another tensor.
template <class Word>
__global__ void copy_blocks_kernel(Mat cache, const int32_t* pairs, int64_t first,
                                   int32_t block_size, int64_t row_words) {
  const int64_t pair = first + blockIdx.x;
  const int64_t src = int64_t(pairs[2 * pair]) * block_size + blockIdx.y;
  const int64_t dst = int64_t(pairs[2 * pair + 1]) * block_size + blockIdx.y;
  const Word* s = row_ptr<const Word>(cache, src);
  Word* d = row_ptr<Word>(cache, dst);
  for (int64_t i = threadIdx.x; i < row_words; i += blockDim.x) d[i] = s[i];
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

void rope(cudaStream_t s, const Mat& x, const RopeArgs& a) {
  rope_kernel<<<grid_for(x.rows * a.heads * (a.n_rot / 2), kThreads), kThreads, 0, s>>>(x, a);
}

void kv_write(cudaStream_t s, const Mat& k_cache, const Mat& v_cache, const Mat& k, const Mat& v,
              const int32_t* slots, int32_t head_dim) {
  for (const auto& io : {std::pair{&k_cache, &k}, {&v_cache, &v}}) {
    const Mat& cache = *io.first;
    const Mat& src = *io.second;
    if (cache.dtype == TSR_DTYPE_FP8_E4M3) {
      kv_store_fp8_kernel<<<static_cast<unsigned>(src.rows), kWarp, 0, s>>>(cache, src, slots, head_dim);
      continue;
    }
    dispatch_dtype(cache.dtype, [&](auto tag) {
      constexpr int D = decltype(tag)::value;
      // The weight-only formats are no cache dtype (the backend refuses them before).
      if constexpr (D != TSR_DTYPE_Q4_K && D != TSR_DTYPE_Q6_K && D != TSR_DTYPE_MXFP4) {
        kv_store_kernel<D><<<static_cast<unsigned>(src.rows), kThreads, 0, s>>>(cache, src, slots);
      }
    });
  }
}

void copy_blocks(cudaStream_t s, const Mat& cache, const int32_t* pairs, int64_t first, int64_t n,
                 int32_t block_size) {
  const int64_t bytes = cache.row_bytes;
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
