#include "core/kv/kv_dtype.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "base/error.h"

namespace tsr {

namespace {

tsr_dtype dtype_named(std::string_view name, const char* what) {
  for (std::string_view n : kKvDtypeNames) {
    if (n != name) continue;
    for (int d = 0; d < TSR_DTYPE_COUNT_; ++d) {
      const char* dn = tsr_dtype_name(static_cast<tsr_dtype>(d));
      if (dn != nullptr && n == dn) return static_cast<tsr_dtype>(d);
    }
  }
  std::string names;
  for (std::string_view n : kKvDtypeNames) names += (names.empty() ? "" : ", ") + std::string(n);
  throw Error(fmt::format("{}: unknown KV cache dtype '{}' (expected one of: {})", what, name, names));
}

}  // namespace

KvFormat kv_format_resolve(std::string_view k_name, std::string_view v_name, std::string_view rotation,
                           int32_t head_dim) {
  KvFormat f{dtype_named(k_name, "KV cache K dtype"), dtype_named(v_name, "KV cache V dtype"), false};
  for (const tsr_dtype d : {f.k, f.v}) {
    if (kv_head_bytes(d, head_dim) < 0) {
      throw Error(fmt::format("KV cache dtype {} stores blocks of 32 along the head dimension, and this model's "
                              "heads have {} elements: choose f16, bf16, f32 or fp8_e4m3",
                              tsr_dtype_name(d), head_dim));
    }
  }
  if (std::find(std::begin(kKvRotations), std::end(kKvRotations), rotation) == std::end(kKvRotations)) {
    throw Error(fmt::format("[cache] rotation: unknown value '{}' (expected auto, hadamard or none)", rotation));
  }
  f.rotated = rotation == "hadamard" || (rotation == "auto" && (f.k == TSR_DTYPE_Q4_0 || f.v == TSR_DTYPE_Q4_0));
  if (f.rotated && !std::has_single_bit(static_cast<uint32_t>(head_dim))) {
    if (rotation == "hadamard") {
      throw Error(fmt::format("[cache] rotation = \"hadamard\" needs heads of a power-of-two size; this model's "
                              "have {} elements",
                              head_dim));
    }
    f.rotated = false;  // auto: a q4_0 cache unrotated
  }
  return f;
}

int64_t kv_head_bytes(tsr_dtype dtype, int32_t head_dim) { return tsr_dtype_row_bytes(dtype, head_dim); }

void kv_format_check(const Backend& backend, const KvFormat& format) {
  for (const tsr_dtype d : {format.k, format.v}) {
    for (const tsr_op op : {TSR_OP_KV_WRITE, TSR_OP_ATTENTION, TSR_OP_COPY_BLOCKS}) {
      if (backend.supports(op, d)) continue;
      throw Error(fmt::format("backend '{}' has no KV cache of dtype {} (its {} refuses it): choose another "
                              "[cache] dtype / -ctk / -ctv, e.g. f32",
                              backend.name(), tsr_dtype_name(d),
                              op == TSR_OP_ATTENTION ? "attention" : op == TSR_OP_KV_WRITE ? "kv_write" : "copy_blocks"),
                  TSR_STATUS_UNSUPPORTED);
    }
  }
}

KvFormat kv_format_for_backend(const Backend& backend, const KvFormat& format, bool is_default) {
  try {
    kv_format_check(backend, format);
    return format;
  } catch (const Error& e) {
    if (!is_default) throw;
    spdlog::warn("{}; the default f16 KV cache is F32 on this backend (set [cache] dtype to choose)", e.what());
    return KvFormat{};
  }
}

std::vector<float> hadamard_matrix(int32_t n) {
  std::vector<float> h(size_t(n) * n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  // Sylvester: H[i][j] = (-1)^popcount(i & j).
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t j = 0; j < n; ++j) h[size_t(i) * n + j] = std::popcount(uint32_t(i & j)) % 2 ? -scale : scale;
  }
  return h;
}

}  // namespace tsr
