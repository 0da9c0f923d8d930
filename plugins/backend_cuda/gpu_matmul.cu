// out = x · wᵀ with our own kernels: a GEMV for decode (bound by reading the weights once),
// a tiled GEMM for prefill where no BLAS is at hand, and the conversions that feed cuBLAS.
#include "gpu_decode.cuh"
#include "gpu_kernels.h"

namespace tsr::gpu {

namespace {

constexpr int kGemvWarps = 4;  // output features per block: one per warp
constexpr int kGemvMaxRows = 8;  // rows of x per pass over the weights

// One warp per weight row. Quantized rows: several lanes share a block, four quants each,
// so a warp step reads consecutive blocks; the scale is applied to each block's partial
// dot product. K-quant rows: a super-block per warp step, eight elements per lane.
template <int D, int NC>
__global__ void gemv_kernel(Mat out, Mat x, Mat w) {
  const int64_t j = int64_t(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (j >= w.rows) return;  // the whole warp leaves together
  const uint8_t* row = row_ptr<const uint8_t>(w, j);
  const float* xr[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) xr[c] = row_ptr<const float>(x, c);
  float acc[NC] = {};
  const int64_t k = w.cols;
  if constexpr (D == TSR_DTYPE_Q8_0) {
    const int e = (lane % 8) * 4;
    for (int64_t b = lane / 8; b < k / kQK; b += kWarp / 8) {
      const uint8_t* blk = row + b * kQ8Bytes;
      const float d = f16_bits_to_f32(load_u16(blk));
      const uint16_t lo = load_u16(blk + 2 + e), hi = load_u16(blk + 4 + e);
      const float q0 = static_cast<int8_t>(lo & 0xff), q1 = static_cast<int8_t>(lo >> 8);
      const float q2 = static_cast<int8_t>(hi & 0xff), q3 = static_cast<int8_t>(hi >> 8);
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const float* xv = xr[c] + b * kQK + e;
        acc[c] += d * (q0 * xv[0] + q1 * xv[1] + q2 * xv[2] + q3 * xv[3]);
      }
    }
  } else if constexpr (D == TSR_DTYPE_Q4_0) {
    const int e = (lane % 4) * 4;  // bytes e..e+3: elements e..e+3 and e+16..e+19
    for (int64_t b = lane / 4; b < k / kQK; b += kWarp / 4) {
      const uint8_t* blk = row + b * kQ4Bytes;
      const float d = f16_bits_to_f32(load_u16(blk));
      const uint32_t q = load_u16(blk + 2 + e) | uint32_t(load_u16(blk + 4 + e)) << 16;
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const float* xv = xr[c] + b * kQK + e;
        float s = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint32_t byte = (q >> (8 * i)) & 0xff;
          s += static_cast<float>(int(byte & 0xf) - 8) * xv[i] +
               static_cast<float>(int(byte >> 4) - 8) * xv[i + 16];
        }
        acc[c] += d * s;
      }
    }
  } else if constexpr (D == TSR_DTYPE_Q4_K || D == TSR_DTYPE_Q6_K) {
    // A super-block of 256 per warp step, 8 consecutive elements per lane (a lane's
    // sub-block scale is decoded by each of its lanes: 4 of them share a Q4_K sub-block).
    constexpr int kBytes = D == TSR_DTYPE_Q4_K ? kQ4KBytes : kQ6KBytes;
    const int e0 = lane * (kQK_K / kWarp);
    for (int64_t b = 0; b < k / kQK_K; ++b) {
      const uint8_t* blk = row + b * kBytes;
      float wv[kQK_K / kWarp];
#pragma unroll
      for (int t = 0; t < kQK_K / kWarp; ++t) {
        wv[t] = D == TSR_DTYPE_Q4_K ? decode_q4_k(blk, e0 + t) : decode_q6_k(blk, e0 + t);
      }
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const float* xv = xr[c] + b * kQK_K + e0;
#pragma unroll
        for (int t = 0; t < kQK_K / kWarp; ++t) acc[c] += wv[t] * xv[t];
      }
    }
  } else {
    for (int64_t i = lane; i < k; i += kWarp) {
      const float wv = decode<D>(row, i);
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[c] += wv * xr[c][i];
    }
  }
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const float v = warp_sum(acc[c]);
    if (lane == 0) row_ptr<float>(out, c)[j] = v;
  }
}

template <int D, int NC>
void launch_gemv(cudaStream_t s, const Mat& out, const Mat& x, const Mat& w) {
  gemv_kernel<D, NC><<<grid_for(w.rows, kGemvWarps), kGemvWarps * kWarp, 0, s>>>(out, x, w);
}

template <int D>
void gemv_rows(cudaStream_t s, const Mat& out, const Mat& x, const Mat& w, int nc) {
  switch (nc) {
    case 1: launch_gemv<D, 1>(s, out, x, w); break;
    case 2: launch_gemv<D, 2>(s, out, x, w); break;
    case 3: launch_gemv<D, 3>(s, out, x, w); break;
    case 4: launch_gemv<D, 4>(s, out, x, w); break;
    case 5: launch_gemv<D, 5>(s, out, x, w); break;
    case 6: launch_gemv<D, 6>(s, out, x, w); break;
    case 7: launch_gemv<D, 7>(s, out, x, w); break;
    default: launch_gemv<D, 8>(s, out, x, w); break;
  }
}

// One warp per (output feature, routed pair); pairs beyond the grid's y extent loop.
template <int D>
__global__ void matmul_id_kernel(MatmulIdArgs a, ExpertWeights w) {
  const int64_t j = int64_t(blockIdx.x) * kGemvWarps + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (j >= w.rows) return;  // the whole warp leaves together
  for (int64_t p = blockIdx.y; p < a.n * a.n_used; p += gridDim.y) {
    const int64_t i = p / a.n_used, slot = p % a.n_used;
    const int32_t e = a.ids[p];
    float* o = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(a.out) + i * a.out_stride + slot * a.out_slot_stride);
    if (e < 0 || e >= w.n_expert) {
      if (lane == 0) o[j] = __int_as_float(0x7fc00000);  // NaN
      continue;
    }
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + e * w.expert_stride + j * w.row_stride;
    const float* xr = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(a.x) + i * a.x_stride +
                                                     slot * a.x_slot_stride);
    float acc = 0;
    for (int64_t c = lane; c < w.cols; c += kWarp) acc += decode<D>(row, c) * xr[c];
    acc = warp_sum(acc);
    if (lane == 0) o[j] = acc;
  }
}

// 64x64 output tiles, 32-deep steps (one quantized block), 16x16 threads with 4x4 outputs
// each. Thread (tx, ty) owns rows ty + 16i and columns tx + 16j, so that a warp reads
// consecutive shared-memory columns and writes consecutive output columns. Weights are
// decoded to f32 as the tile is loaded; the arithmetic is f32 throughout.
constexpr int kTileM = 64, kTileN = 64, kTileK = 32;

template <int D>
__global__ void __launch_bounds__(256) gemm_tiled_kernel(Mat out, Mat x, Mat w) {
  __shared__ float xs[kTileK][kTileM + 1];
  __shared__ float ws[kTileK][kTileN + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t i0 = int64_t(blockIdx.y) * kTileM, j0 = int64_t(blockIdx.x) * kTileN;
  const int64_t k = w.cols;
  // Loader: tile row lr, elements le..le+7 of the 32-deep step.
  const int lr = threadIdx.x / 4, le = (threadIdx.x % 4) * 8;
  const float* xrow = i0 + lr < x.rows ? row_ptr<const float>(x, i0 + lr) : nullptr;
  const uint8_t* wrow = j0 + lr < w.rows ? row_ptr<const uint8_t>(w, j0 + lr) : nullptr;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int64_t kk = k0 + le + e;
      xs[le + e][lr] = xrow != nullptr && kk < k ? xrow[kk] : 0.0f;
      ws[le + e][lr] = wrow != nullptr && kk < k ? decode<D>(wrow, kk) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = xs[kk][ty + 16 * i], b[i] = ws[kk][tx + 16 * i];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) acc[i][jj] += a[i] * b[jj];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = i0 + ty + 16 * i;
    if (r >= out.rows) continue;
    float* o = row_ptr<float>(out, r);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const int64_t c = j0 + tx + 16 * jj;
      if (c < out.cols) o[c] = acc[i][jj];
    }
  }
}

#if !defined(TSR_GPU_HIP)
template <bool kBf16>
__global__ void to_half_kernel(Mat x, uint16_t* dst) {
  const int64_t n = x.rows * x.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = row_ptr<const float>(x, i / x.cols)[i % x.cols];
    dst[i] = kBf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
  }
}

template <int D>
__global__ void dequant_bf16_kernel(Mat w, int64_t first, int64_t rows, uint16_t* dst) {
  const int64_t n = rows * w.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = f32_to_bf16_bits(decode<D>(row_ptr<const uint8_t>(w, first + i / w.cols), i % w.cols));
  }
}
#endif

}  // namespace

void gemv(cudaStream_t s, const Mat& out, const Mat& x, const Mat& w) {
  for (int64_t c0 = 0; c0 < x.rows; c0 += kGemvMaxRows) {
    const int nc = static_cast<int>(x.rows - c0 < kGemvMaxRows ? x.rows - c0 : kGemvMaxRows);
    Mat xs = x, os = out;
    xs.data = static_cast<uint8_t*>(x.data) + c0 * x.stride;
    os.data = static_cast<uint8_t*>(out.data) + c0 * out.stride;
    xs.rows = os.rows = nc;
    dispatch_dtype(w.dtype, [&](auto tag) { gemv_rows<decltype(tag)::value>(s, os, xs, w, nc); });
  }
}

void matmul_id(cudaStream_t s, const MatmulIdArgs& a, const ExpertWeights& w) {
  const int64_t pairs = a.n * a.n_used;
  const dim3 grid(grid_for(w.rows, kGemvWarps), static_cast<unsigned>(pairs < 65535 ? pairs : 65535));
  dispatch_dtype(w.dtype, [&](auto tag) {
    matmul_id_kernel<decltype(tag)::value><<<grid, kGemvWarps * kWarp, 0, s>>>(a, w);
  });
}

void gemm_tiled(cudaStream_t s, const Mat& out, const Mat& x, const Mat& w) {
  const dim3 grid(grid_for(w.rows, kTileN), grid_for(x.rows, kTileM));
  dispatch_dtype(w.dtype, [&](auto tag) {
    gemm_tiled_kernel<decltype(tag)::value><<<grid, 256, 0, s>>>(out, x, w);
  });
}

#if !defined(TSR_GPU_HIP)
void to_half(cudaStream_t s, const Mat& x, bool bf16, uint16_t* dst) {
  if (bf16) {
    to_half_kernel<true><<<flat_grid(x.rows * x.cols), 256, 0, s>>>(x, dst);
  } else {
    to_half_kernel<false><<<flat_grid(x.rows * x.cols), 256, 0, s>>>(x, dst);
  }
}

void dequant_bf16(cudaStream_t s, const Mat& w, int64_t first, int64_t rows, uint16_t* dst) {
  dispatch_dtype(w.dtype, [&](auto tag) {
    constexpr int D = decltype(tag)::value;
    dequant_bf16_kernel<D><<<flat_grid(rows * w.cols), 256, 0, s>>>(w, first, rows, dst);
  });
}
#endif

}  // namespace tsr::gpu
