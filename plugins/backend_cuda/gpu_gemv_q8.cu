// Q8_0 GEMV on int8 dot products, as llama.cpp's mmvq: x is quantized to Q8_0 blocks once
// per matmul (the CPU backend's GEMV rounds x the same way), and each lane of a warp takes a
// pair of weight blocks (68 bytes) per step with 17 word loads and 16 dp4a. One warp per
// weight row; a pair of blocks is 4-byte aligned or 2 bytes off (rows of an odd number of
// blocks), which is resolved at compile time by funnel shifts between aligned words.
#include "gpu_decode.cuh"
#include "gpu_kernels.h"

namespace tsr::gpu {

namespace {

constexpr int kWarps = 4;     // weight rows per thread block
constexpr int kPairBytes = 2 * kQ8Bytes;
constexpr int kPairWords = kPairBytes / 4;  // 17

// Quantizes x (nc rows) to int8 blocks of 32 with an f32 scale per block: amax / 127. A
// block with a NaN or an infinity gets zeros and a NaN scale (its products turn NaN, as
// on the CPU backend), where fmaxf would drop a NaN and the conversion give 0.
__global__ void quantize_x_kernel(Mat x, int8_t* xq, float* xd, int64_t blocks_per_row) {
  const int64_t block = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarp;
  if (block >= x.rows * blocks_per_row) return;
  const int lane = threadIdx.x % kWarp;
  const int64_t r = block / blocks_per_row, b = block % blocks_per_row;
  const float v = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x.data) + r * x.stride)[b * kQK + lane];
  if (warp_any(!isfinite(v))) {
    xq[block * kQK + lane] = 0;
    if (lane == 0) xd[block] = __int_as_float(0x7fc00000);  // quiet NaN
    return;
  }
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.0f;
  xq[block * kQK + lane] = static_cast<int8_t>(d > 0 ? __float2int_rn(v / d) : 0);
  if (lane == 0) xd[block] = d;
}

// Bytes [o, o + 4) of the words w (o even, known at compile time).
template <int O>
__device__ __forceinline__ int word_at(const uint32_t (&w)[kPairWords + 1]) {
  if constexpr (O % 4 == 0) {
    return static_cast<int>(w[O / 4]);
  } else {
    return static_cast<int>(__funnelshift_r(w[O / 4], w[O / 4 + 1], 16));
  }
}

template <int O>
__device__ __forceinline__ float half_at(const uint32_t (&w)[kPairWords + 1]) {
  return f16_bits_to_f32(static_cast<uint16_t>(w[O / 4] >> (8 * (O % 4))));
}

// The dot products of weight block pair `p` (starting A bytes past a word boundary) with
// block pair p of each of the NC rows of quantized x.
template <int NC, int A>
__device__ __forceinline__ void pair_dot(const uint8_t* pair, const int8_t* xq, const float* xd,
                                         int64_t x_blocks, int64_t p, float (&acc)[NC]) {
  const uint32_t* base = reinterpret_cast<const uint32_t*>(pair - A);
  uint32_t w[kPairWords + 1];
#pragma unroll
  for (int i = 0; i < kPairWords; ++i) w[i] = base[i];
  // The last 2 bytes of a pair that starts 2 bytes off lie in one more word: read as u16 so
  // that nothing past the tensor is touched.
  w[kPairWords] = A == 0 ? 0u : *reinterpret_cast<const uint16_t*>(pair + kPairBytes - 2);
  const float d0 = half_at<A>(w), d1 = half_at<A + kQ8Bytes>(w);
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int4* xv = reinterpret_cast<const int4*>(xq + (c * x_blocks + 2 * p) * kQK);
    const int4 x0 = xv[0], x1 = xv[1], x2 = xv[2], x3 = xv[3];
    int s0 = 0, s1 = 0;
    s0 = __dp4a(word_at<A + 2>(w), x0.x, s0);
    s0 = __dp4a(word_at<A + 6>(w), x0.y, s0);
    s0 = __dp4a(word_at<A + 10>(w), x0.z, s0);
    s0 = __dp4a(word_at<A + 14>(w), x0.w, s0);
    s0 = __dp4a(word_at<A + 18>(w), x1.x, s0);
    s0 = __dp4a(word_at<A + 22>(w), x1.y, s0);
    s0 = __dp4a(word_at<A + 26>(w), x1.z, s0);
    s0 = __dp4a(word_at<A + 30>(w), x1.w, s0);
    s1 = __dp4a(word_at<A + 36>(w), x2.x, s1);
    s1 = __dp4a(word_at<A + 40>(w), x2.y, s1);
    s1 = __dp4a(word_at<A + 44>(w), x2.z, s1);
    s1 = __dp4a(word_at<A + 48>(w), x2.w, s1);
    s1 = __dp4a(word_at<A + 52>(w), x3.x, s1);
    s1 = __dp4a(word_at<A + 56>(w), x3.y, s1);
    s1 = __dp4a(word_at<A + 60>(w), x3.z, s1);
    s1 = __dp4a(word_at<A + 64>(w), x3.w, s1);
    const float* dx = xd + c * x_blocks + 2 * p;
    acc[c] += d0 * dx[0] * static_cast<float>(s0) + d1 * dx[1] * static_cast<float>(s1);
  }
}

// A lone last block (rows of an odd number of blocks), read in 16-bit units.
template <int NC>
__device__ __forceinline__ void block_dot(const uint8_t* blk, const int8_t* xq, const float* xd,
                                          int64_t x_blocks, int64_t b, float (&acc)[NC]) {
  const float d = f16_bits_to_f32(load_u16(blk));
  int q[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) q[i] = static_cast<int>(load_u16(blk + 2 + 4 * i) | uint32_t(load_u16(blk + 4 + 4 * i)) << 16);
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int* xv = reinterpret_cast<const int*>(xq + (c * x_blocks + b) * kQK);
    int s = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) s = __dp4a(q[i], xv[i], s);
    acc[c] += d * xd[c * x_blocks + b] * static_cast<float>(s);
  }
}

template <int NC>
__global__ void __launch_bounds__(kWarps * kWarp) gemv_q8_kernel(Mat out, Mat w, const int8_t* xq,
                                                                   const float* xd) {
  const int64_t j = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarp;
  if (j >= w.rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % kWarp;
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + j * w.stride;
  const int64_t blocks = w.cols / kQK, pairs = blocks / 2;
  float acc[NC] = {};
  if ((reinterpret_cast<uintptr_t>(row) & 2) == 0) {
    for (int64_t p = lane; p < pairs; p += kWarp) pair_dot<NC, 0>(row + p * kPairBytes, xq, xd, blocks, p, acc);
  } else {
    for (int64_t p = lane; p < pairs; p += kWarp) pair_dot<NC, 2>(row + p * kPairBytes, xq, xd, blocks, p, acc);
  }
  if (blocks % 2 != 0 && lane == static_cast<int>(pairs % kWarp)) {
    block_dot<NC>(row + (blocks - 1) * kQ8Bytes, xq, xd, blocks, blocks - 1, acc);
  }
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const float v = warp_sum(acc[c]);
    if (lane == 0) reinterpret_cast<float*>(static_cast<uint8_t*>(out.data) + c * out.stride)[j] = v;
  }
}

template <int NC>
void launch(cudaStream_t s, const Mat& out, const Mat& w, const int8_t* xq, const float* xd) {
  gemv_q8_kernel<NC><<<grid_for(w.rows, kWarps), kWarps * kWarp, 0, s>>>(out, w, xq, xd);
}

}  // namespace

size_t gemv_q8_0_scratch(int64_t rows, int64_t k) {
  return size_t(rows) * size_t(k) + size_t(rows) * size_t(k / kQK) * sizeof(float);
}

void quantize_q8_0(cudaStream_t s, const Mat& x, void* scratch) {
  const int64_t blocks = x.cols / kQK;
  auto* xq = static_cast<int8_t*>(scratch);
  auto* xd = reinterpret_cast<float*>(xq + x.rows * x.cols);
  quantize_x_kernel<<<grid_for(x.rows * blocks, kWarps), kWarps * kWarp, 0, s>>>(x, xq, xd, blocks);
}

void gemv_q8_0(cudaStream_t s, const Mat& out, int64_t x_rows, const Mat& w, const void* scratch) {
  const int64_t blocks = w.cols / kQK;
  const auto* xq = static_cast<const int8_t*>(scratch);
  const auto* xd = reinterpret_cast<const float*>(xq + x_rows * w.cols);
  for (int64_t c0 = 0; c0 < x_rows; c0 += 8) {
    const int nc = static_cast<int>(x_rows - c0 < 8 ? x_rows - c0 : 8);
    Mat os = out;
    os.data = static_cast<uint8_t*>(out.data) + c0 * out.stride;
    const int8_t* q = xq + c0 * w.cols;
    const float* d = xd + c0 * blocks;
    switch (nc) {
      case 1: launch<1>(s, os, w, q, d); break;
      case 2: launch<2>(s, os, w, q, d); break;
      case 3: launch<3>(s, os, w, q, d); break;
      case 4: launch<4>(s, os, w, q, d); break;
      case 5: launch<5>(s, os, w, q, d); break;
      case 6: launch<6>(s, os, w, q, d); break;
      case 7: launch<7>(s, os, w, q, d); break;
      default: launch<8>(s, os, w, q, d); break;
    }
  }
}

}  // namespace tsr::gpu
