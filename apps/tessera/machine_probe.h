// What this machine can do at most, measured in the same run as a benchmark (the VM it
// runs on is shared and swings from minute to minute): memory read bandwidth, which bounds
// decode, and the multiply-add rates that bound prompts and large batches.
#pragma once

#include <cstdint>

namespace tsr::app {

// Read bandwidth in GB/s over a buffer far larger than the caches, with `threads` threads.
double measure_read_bandwidth(int32_t threads);

// Multiply-adds per second (in G) that `threads` threads sustain with independent chains
// of 512-bit instructions: f32 FMAs (how F16/BF16/F32 weights multiply) and int8 dot
// products (AVX-512 VNNI, how packed Q8_0/Q4_0 weights multiply: 64 per instruction).
// 0 where the CPU lacks the instructions.
struct ComputePeak {
  double f32_fma_g_s = 0;
  double i8_mac_g_s = 0;
};
ComputePeak measure_compute_peak(int32_t threads);

}  // namespace tsr::app
