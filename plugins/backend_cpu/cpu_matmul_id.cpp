// The CPU backend's grouped matmul of MoE layers (ABI 2.0 matmul_id): the rows routed to
// each expert are gathered, multiplied by that expert's matrix on the ordinary matmul
// kernels (so every weight dtype matmul takes works here too), or on the packed kernels
// where the experts were packed (ABI 2.5), and scattered back.
#include <cstring>
#include <string>
#include <vector>

#include "cpu_ops.h"
#include "cpu_packed_matmul.h"
#include "cpu_tensor.h"
#include "tessera/sdk/status.hpp"

namespace tsr::cpu {

using sdk::require;

namespace {

bool well_formed(const tsr_tensor* t, int ndim) {
  return t != nullptr && t->struct_size >= sizeof(tsr_tensor) && t->ndim == ndim && t->data != nullptr;
}

// Expert e's [m, k] matrix of w ([n_expert, m, k]).
tsr_tensor expert(const tsr_tensor& w, int64_t e) {
  tsr_tensor t = w;
  t.ndim = 2;
  t.shape[0] = w.shape[1];
  t.shape[1] = w.shape[2];
  t.strides[0] = w.strides[1];
  t.strides[1] = w.strides[2];
  t.data = static_cast<uint8_t*>(w.data) + e * w.strides[0];
  return t;
}

tsr_tensor f32_rows(float* data, int64_t rows, int64_t cols) {
  tsr_tensor t{};
  t.struct_size = sizeof(t);
  t.dtype = TSR_DTYPE_F32;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.strides[0] = cols * 4;
  t.strides[1] = 4;
  t.data = data;
  return t;
}

}  // namespace

void op_matmul_id(OpContext& ctx, const tsr_matmul_id_params& p) {
  require(well_formed(p.w, 3), "matmul_id: w must be [n_expert, m, k]");
  require(well_formed(p.out, 3), "matmul_id: out must be [n, n_used, m]");
  require(p.x != nullptr && (p.x->ndim == 2 || p.x->ndim == 3), "matmul_id: x must be [n, k] or [n, n_used, k]");
  const tsr_tensor& w = *p.w;
  const int64_t n_expert = w.shape[0], m = w.shape[1], k = w.shape[2];
  const bool packed = w.dtype == TSR_DTYPE_PACKED;
  const PackedWeight all = packed ? as_packed(p.w, "matmul_id w") : PackedWeight{};
  require(packed || (n_expert > 0 && w.strides[0] >= w.shape[1] * w.strides[1]), "matmul_id: experts of w overlap");
  const Matrix ids = as_matrix(p.ids, TSR_DTYPE_I32, "matmul_id ids");
  const int64_t n = ids.rows, n_used = ids.cols;
  const tsr_tensor& o = *p.out;
  require(o.dtype == TSR_DTYPE_F32 && o.shape[0] == n && o.shape[1] == n_used && o.shape[2] == m && o.strides[2] == 4,
          "matmul_id: out must be f32 [n, n_used, m] with contiguous rows");
  const Matrix x = as_matrix(p.x, TSR_DTYPE_F32, "matmul_id x");
  const bool per_slot = p.x->ndim == 3;
  require(per_slot ? (p.x->shape[0] == n && p.x->shape[1] == n_used && p.x->shape[2] == k)
                   : (x.rows == n && x.cols == k),
          "matmul_id: x must be [n, k] or [n, n_used, k] with k = w's columns");
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t s = 0; s < n_used; ++s) {
      const int32_t e = ids.row<int32_t>(i)[s];
      require(e >= 0 && e < n_expert, [&] {
        return "matmul_id: expert id " + std::to_string(e) + " out of range [0, " + std::to_string(n_expert) + ")";
      });
    }
  }
  // x's rows: [n * n_used] when per slot (rows of n_used k-vectors), else [n].
  const auto x_row = [&](int64_t i, int64_t s) {
    return per_slot ? reinterpret_cast<const float*>(static_cast<const uint8_t*>(p.x->data) + i * p.x->strides[0] +
                                                     s * p.x->strides[1])
                    : x.row<float>(i);
  };
  const auto out_row = [&](int64_t i, int64_t s) {
    return reinterpret_cast<float*>(static_cast<uint8_t*>(o.data) + i * o.strides[0] + s * o.strides[1]);
  };
  std::vector<float> xs, ys;
  std::vector<std::pair<int64_t, int64_t>> routed;
  for (int64_t e = 0; e < n_expert; ++e) {
    routed.clear();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t s = 0; s < n_used; ++s) {
        if (ids.row<int32_t>(i)[s] == e) routed.emplace_back(i, s);
      }
    }
    if (routed.empty()) continue;
    const auto rows = static_cast<int64_t>(routed.size());
    xs.resize(static_cast<size_t>(rows * k));
    ys.resize(static_cast<size_t>(rows * m));
    for (int64_t r = 0; r < rows; ++r) std::memcpy(&xs[r * k], x_row(routed[r].first, routed[r].second), k * 4);
    const tsr_tensor tx = f32_rows(xs.data(), rows, k), ty = f32_rows(ys.data(), rows, m);
    if (packed) {
      packed_matmul(ctx, as_matrix(&ty, "matmul_id out"), as_matrix(&tx, "matmul_id x"), packed_rows(all, e * m, m));
    } else {
      const tsr_tensor tw = expert(w, e);
      op_matmul(ctx, tsr_matmul_params{sizeof(tsr_matmul_params), &ty, &tx, &tw});
    }
    for (int64_t r = 0; r < rows; ++r) std::memcpy(out_row(routed[r].first, routed[r].second), &ys[r * m], m * 4);
  }
}

}  // namespace tsr::cpu
