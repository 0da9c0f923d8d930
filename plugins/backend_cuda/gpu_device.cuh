// Device helpers shared by the GPU backends' kernels: row addressing, grid sizing, block
// reductions and the f32 → f16 / bf16 roundings (nearest even, as the CPU backend's).
#pragma once

#include <cstdint>

#include "gpu_kernels.h"
#include "gpu_runtime.h"

namespace tsr::gpu {

template <class T>
__device__ __forceinline__ T* row_ptr(const Mat& m, int64_t r) {
  return reinterpret_cast<T*>(static_cast<uint8_t*>(m.data) + r * m.stride);
}

inline unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// A grid for a grid-stride loop over n elements: enough blocks to fill any current GPU.
inline unsigned flat_grid(int64_t n, int threads = 256) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

// Sum (or max) over the block; every thread gets the result. `scratch` holds one float per
// warp and may be reused by the next reduction: the leading barrier waits for its readers.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  const auto warp_reduce = [](float x) { return kMax ? warp_max(x) : warp_sum(x); };
  v = warp_reduce(v);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / kWarp) ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  return warp_reduce(v);
}

__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce<false>(v, scratch); }
__device__ __forceinline__ float block_max(float v, float* scratch) { return block_reduce<true>(v, scratch); }

__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) { return __half_as_ushort(__float2half_rn(f)); }

}  // namespace tsr::gpu
