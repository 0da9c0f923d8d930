// The one place where CUDA and HIP differ for the GPU backends: the sources in
// plugins/backend_cuda/ use CUDA names, and a HIP build (TSR_GPU_HIP, compiled by hipcc or
// by a host compiler with __HIP_PLATFORM_AMD__) maps them to HIP here, as ggml does. Only
// names the backend uses are mapped.
#pragma once

#if defined(TSR_GPU_HIP)

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#else
#include <hip/hip_runtime_api.h>  // host-only translation units, built by g++
#endif

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceProp hipDeviceProp_t
#define cudaSetDevice hipSetDevice
#define cudaGetDevice hipGetDevice
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaMemGetInfo hipMemGetInfo
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocDefault hipHostMallocDefault
#define cudaFreeHost hipHostFree
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaStream_t hipStream_t
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaEvent_t hipEvent_t
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventDestroy hipEventDestroy
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy

#define TSR_GPU_API_NAME "HIP"
#define TSR_GPU_API_PREFIX "hip"

#else

#include <cuda_runtime.h>
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#define TSR_GPU_API_NAME "CUDA"
#define TSR_GPU_API_PREFIX "cuda"

#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
// Kernels reduce over groups of 32 lanes on both vendors: on a 64-wide AMD wavefront a
// width-32 shuffle stays within its half, so the same code serves both.
constexpr int kWarp = 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = kWarp / 2; m > 0; m >>= 1) {
#if defined(TSR_GPU_HIP)
    v += __shfl_xor(v, m, kWarp);
#else
    v += __shfl_xor_sync(0xffffffffu, v, m, kWarp);
#endif
  }
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int m = kWarp / 2; m > 0; m >>= 1) {
#if defined(TSR_GPU_HIP)
    v = fmaxf(v, __shfl_xor(v, m, kWarp));
#else
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m, kWarp));
#endif
  }
  return v;
}

// Whether `pred` holds in any lane of the (full) warp.
__device__ __forceinline__ bool warp_any(bool pred) {
#if defined(TSR_GPU_HIP)
  return __any(pred);
#else
  return __any_sync(0xffffffffu, pred);
#endif
}

__device__ __forceinline__ float f16_bits_to_f32(unsigned short h) {
  return __half2float(__ushort_as_half(h));
}
#endif
