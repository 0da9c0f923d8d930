// Which x86 instruction sets a CPU plugin's kernels may use: what the CPU has, capped by
// the environment variable TESSERA_CPU_MAX_ISA (as oneDNN's ONEDNN_MAX_CPU_ISA), so that
// one machine can run, and test, the paths that other machines take. Header-only; each
// plugin that includes it reads the variable once, at first use.
//
//   TESSERA_CPU_MAX_ISA   kernels allowed
//   baseline              portable C++ (x86-64 baseline)
//   avx2                  + AVX2, FMA, F16C
//   avx512                + AVX-512 F, DQ, BW, VL
//   avx512_vnni (unset)   + AVX-512 VNNI and BF16: everything the CPU has
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tsr::sdk {

enum class CpuIsa : int { baseline = 0, avx2 = 1, avx512 = 2, avx512_vnni = 3 };

namespace cpu_isa_detail {

struct Cap {
  CpuIsa level = CpuIsa::avx512_vnni;
  std::string error;  // non-empty for a value of the variable that names no level
};

inline Cap parse(const char* value) {
  if (value == nullptr || *value == '\0') return {};
  const struct {
    const char* name;
    CpuIsa level;
  } names[] = {{"baseline", CpuIsa::baseline},
               {"avx2", CpuIsa::avx2},
               {"avx512", CpuIsa::avx512},
               {"avx512_vnni", CpuIsa::avx512_vnni}};
  for (const auto& n : names) {
    if (std::strcmp(value, n.name) == 0) return {n.level, {}};
  }
  return {CpuIsa::baseline, std::string("TESSERA_CPU_MAX_ISA: unknown value '") + value +
                                "' (baseline, avx2, avx512 or avx512_vnni)"};
}

inline const Cap& cap() {
  static const Cap c = parse(std::getenv("TESSERA_CPU_MAX_ISA"));
  return c;
}

#if defined(__x86_64__) || defined(__i386__)
// CPUID leaf 1, ECX bit 29: clang's __builtin_cpu_supports has no "f16c".
inline bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
#endif

inline CpuIsa cpu_level() {
#if defined(__x86_64__) || defined(__i386__)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512vnni")) return CpuIsa::avx512_vnni;
  if (avx512) return CpuIsa::avx512;
  return avx2 ? CpuIsa::avx2 : CpuIsa::baseline;
#else
  return CpuIsa::baseline;
#endif
}

}  // namespace cpu_isa_detail

// The message for a TESSERA_CPU_MAX_ISA that names no level, else empty. A plugin refuses
// to start (backend_create, a kernel call) with it rather than guess; cpu_isa() then
// allows the baseline only.
inline const std::string& cpu_isa_cap_error() { return cpu_isa_detail::cap().error; }

// The highest level the kernels may use: the CPU's, capped by TESSERA_CPU_MAX_ISA.
inline CpuIsa cpu_isa() {
  static const CpuIsa level = [] {
    const CpuIsa cpu = cpu_isa_detail::cpu_level(), cap = cpu_isa_detail::cap().level;
    return static_cast<int>(cpu) < static_cast<int>(cap) ? cpu : cap;
  }();
  return level;
}

inline const char* cpu_isa_name(CpuIsa level) {
  switch (level) {
    case CpuIsa::baseline: return "baseline";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx512_vnni: return "avx512_vnni";
  }
  return "?";
}

inline bool cpu_isa_at_least(CpuIsa level) { return static_cast<int>(cpu_isa()) >= static_cast<int>(level); }

// AVX-512 BF16 (vdpbf16ps), allowed with the avx512_vnni level where the CPU has it.
inline bool cpu_has_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes = cpu_isa_at_least(CpuIsa::avx512_vnni) && __builtin_cpu_supports("avx512bf16");
  return yes;
#else
  return false;
#endif
}

}  // namespace tsr::sdk
