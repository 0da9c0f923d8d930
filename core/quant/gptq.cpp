#include "core/quant/gptq.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "core/quant/layer_error.h"

namespace tsr::quant {

namespace {

// Lower Cholesky factor of the [n, n] row-major `a`, in place (the upper triangle is left
// as it was). Row-wise Crout: every inner product runs over two contiguous rows. False when
// `a` is not positive definite.
bool cholesky_lower(std::vector<double>& a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double* ri = &a[size_t(i * n)];
    for (int64_t j = 0; j <= i; ++j) {
      const double* rj = &a[size_t(j * n)];
      double s = ri[j];
      for (int64_t k = 0; k < j; ++k) s -= ri[k] * rj[k];
      if (j < i) {
        ri[j] = s / rj[j];
      } else {
        if (!(s > 0)) return false;
        ri[i] = std::sqrt(s);
      }
    }
  }
  return true;
}

// The inverse of the lower triangular [n, n] `l`: row i is (e_i - sum_k<i l_ik row_k) / l_ii.
std::vector<double> invert_lower(const std::vector<double>& l, int64_t n) {
  std::vector<double> m(l.size(), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double* mi = &m[size_t(i * n)];
    for (int64_t k = 0; k < i; ++k) {
      const double lik = l[size_t(i * n + k)];
      const double* mk = &m[size_t(k * n)];
      for (int64_t j = 0; j <= k; ++j) mi[j] -= lik * mk[j];
    }
    mi[i] += 1.0;
    const double inv = 1.0 / l[size_t(i * n + i)];
    for (int64_t j = 0; j <= i; ++j) mi[j] *= inv;
  }
  return m;
}

}  // namespace

// With J the index reversal, J H J = L L^T gives H = R R^T for the upper R = J L J, so
// H^-1 = R^-T R^-1 and U = R^-1 = J L^-1 J: one factorization and one triangular inverse.
GptqFactor gptq_factor(std::span<const float> hessian, int64_t n, double damp, bool act_order) {
  if (hessian.size() != size_t(n * n)) throw Error("gptq: the Hessian is not [cols, cols]");
  GptqFactor f;
  f.cols = n;
  f.dead.assign(size_t(n), 0);
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) {
    f.dead[i] = hessian[size_t(i * n + i)] == 0.0f;
    mean += f.dead[i] ? 1.0 : hessian[size_t(i * n + i)];
  }
  mean /= double(n);
  if (act_order) {
    f.order.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) f.order[size_t(i)] = i;
    std::stable_sort(f.order.begin(), f.order.end(),
                     [&](int64_t a, int64_t b) { return hessian[size_t(a * n + a)] > hessian[size_t(b * n + b)]; });
  }
  // Position p of the order is column col(p) of H.
  const auto col = [&](int64_t p) { return f.order.empty() ? p : f.order[size_t(p)]; };
  for (f.damp = damp;; f.damp *= 10) {
    if (f.damp > 1.0) {
      throw Error(fmt::format("gptq: the inputs' Hessian is not positive definite, even damped by {} of its mean diagonal",
                              f.damp / 10));
    }
    std::vector<double> r(size_t(n * n));  // J H J, damped
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t si = col(n - 1 - i), sj = col(n - 1 - j);
        const bool dead = f.dead[si] || f.dead[sj];
        r[size_t(i * n + j)] = dead ? double(si == sj) : double(hessian[size_t(si * n + sj)]);
      }
      r[size_t(i * n + i)] += f.damp * mean;
    }
    if (!cholesky_lower(r, n)) continue;
    for (int64_t i = 0; i < n; ++i) std::fill(r.begin() + i * n + i + 1, r.begin() + (i + 1) * n, 0.0);
    const std::vector<double> m = invert_lower(r, n);
    f.u.assign(size_t(n * n), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = i; j < n; ++j) f.u[size_t(i * n + j)] = float(m[size_t((n - 1 - i) * n + (n - 1 - j))]);
    }
    return f;
  }
}

namespace {

// The fits of every row's blocks, and for int4_g128 each block's pinned codes: the block's
// smallest and largest value at fit time keep codes 0 and 15 whatever the updates do, so the
// decoded block spans its fitted range and the scheme's quantizer, run again on the values
// GPTQ writes, finds the same grid and the same codes.
class BlockFits {
 public:
  BlockFits(const BlockGrid& grid, int64_t rows, int64_t n_blocks)
      : grid_(grid), n_blocks_(n_blocks), fits_(size_t(rows * n_blocks)),
        pins_(grid.is_int4_g128() ? size_t(rows * n_blocks) : 0) {}

  void fit(int64_t r, int64_t b, const float* x) {
    const size_t k = size_t(r * n_blocks_ + b);
    fits_[k] = grid_.fit(x);
    if (pins_.empty()) return;
    const auto [lo, hi] = std::minmax_element(x, x + grid_.block());
    // Code 0 matters only where the range reaches below 0 (z > 0), 15 where above (z < 15).
    pins_[k] = {fits_[k].z > 0 ? int(lo - x) : -1, fits_[k].z < 15 ? int(hi - x) : -1};
  }
  const BlockFit& at(int64_t r, int64_t b) const { return fits_[size_t(r * n_blocks_ + b)]; }
  // The code of x at offset j of block b of row r.
  int code(int64_t r, int64_t b, int64_t j, float x) const {
    if (!pins_.empty()) {
      const Pins& p = pins_[size_t(r * n_blocks_ + b)];
      if (j == p.lo) return 0;
      if (j == p.hi) return 15;
    }
    return grid_.code(x, at(r, b));
  }

 private:
  struct Pins {
    int lo = -1, hi = -1;
  };
  const BlockGrid& grid_;
  int64_t n_blocks_;
  std::vector<BlockFit> fits_;
  std::vector<Pins> pins_;
};

// The GGUF blocks of the codes.
std::vector<uint8_t> write_blocks(const BlockGrid& grid, const BlockFits& fits, const std::vector<int16_t>& codes,
                                  int64_t rows, int64_t cols) {
  const int64_t n_blocks = cols / kGridBlock;
  const auto traits = ggml_type_traits(static_cast<uint32_t>(grid.type()));
  std::vector<uint8_t> out(size_t(rows * n_blocks) * traits->block_bytes);
  int block_codes[kGridBlock];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      for (int j = 0; j < kGridBlock; ++j) block_codes[j] = codes[size_t(r * cols + b * kGridBlock + j)];
      grid.write(fits.at(r, b), block_codes, &out[size_t((r * n_blocks + b) * traits->block_bytes)]);
    }
  }
  return out;
}

}  // namespace

std::vector<uint8_t> gptq_quantize(const BlockGrid& grid, std::span<const float> w, int64_t rows, int64_t cols,
                                   const GptqFactor& factor, std::vector<float>* quantized) {
  const int64_t gb = grid.block();
  if (factor.cols != cols || cols % gb != 0 || w.size() != size_t(rows * cols)) {
    throw Error(fmt::format("gptq: a [{}, {}] weight does not fit a factor of {} columns in blocks of {}", rows, cols,
                            factor.cols, gb));
  }
  if (!std::all_of(w.begin(), w.end(), [](float v) { return std::isfinite(v); })) {
    throw Error("gptq: the weight holds NaN or infinity");
  }
  // Columns contiguous, in the factor's order: every step reads one column of all rows and
  // updates later ones. Position p holds column col(p).
  const auto col = [&](int64_t p) { return factor.order.empty() ? p : factor.order[size_t(p)]; };
  std::vector<float> wt(w.size());
  for (int64_t p = 0; p < cols; ++p) {
    const int64_t c = col(p);
    for (int64_t r = 0; r < rows; ++r) wt[size_t(p * rows + r)] = factor.dead[c] ? 0.0f : w[size_t(r * cols + c)];
  }
  const int64_t n_blocks = cols / gb;
  BlockFits fits(grid, rows, n_blocks);
  std::vector<float> group(static_cast<size_t>(gb));
  // Act-order fits every block before any update, from the weights as given.
  const bool static_groups = !factor.order.empty();
  if (static_groups) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < n_blocks; ++b) {
        for (int64_t j = 0; j < gb; ++j) {
          const int64_t c = b * gb + j;
          group[size_t(j)] = factor.dead[c] ? 0.0f : w[size_t(r * cols + c)];
        }
        fits.fit(r, b, group.data());
      }
    }
  }
  std::vector<int16_t> codes(w.size());  // [rows, cols], columns in their own order
  std::vector<float> values(quantized ? w.size() : 0);
  constexpr int64_t kLazy = 128;
  std::vector<float> err(size_t(kLazy * rows));
  const float* u = factor.u.data();
  for (int64_t b0 = 0; b0 < cols; b0 += kLazy) {
    const int64_t b1 = std::min(cols, b0 + kLazy);
    for (int64_t i = b0; i < b1; ++i) {
      float* cur = &wt[size_t(i * rows)];
      if (!static_groups && i % gb == 0) {
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < gb; ++j) group[size_t(j)] = wt[size_t((i + j) * rows + r)];
          fits.fit(r, i / gb, group.data());
        }
      }
      const int64_t c = col(i);
      const float d = u[i * cols + i];
      float* e = &err[size_t((i - b0) * rows)];
      for (int64_t r = 0; r < rows; ++r) {
        const int q = fits.code(r, c / gb, c % gb, cur[r]);
        const float v = grid.value(q, fits.at(r, c / gb));
        codes[size_t(r * cols + c)] = static_cast<int16_t>(q);
        if (quantized) values[size_t(r * cols + c)] = v;
        e[r] = (cur[r] - v) / d;
      }
      for (int64_t j = i + 1; j < b1; ++j) {
        const float uij = u[i * cols + j];
        float* cj = &wt[size_t(j * rows)];
        for (int64_t r = 0; r < rows; ++r) cj[r] -= e[r] * uij;
      }
    }
    // The block's errors reach every later column at once: W[b1:] -= U[b0:b1, b1:]^T E.
    sgemm('T', 'N', cols - b1, rows, b1 - b0, -1.0f, u + b0 * cols + b1, cols, err.data(), rows, 1.0f,
          &wt[size_t(b1 * rows)], rows);
  }
  if (quantized) *quantized = std::move(values);
  return grid.is_int4_g128() ? std::vector<uint8_t>{} : write_blocks(grid, fits, codes, rows, cols);
}

}  // namespace tsr::quant
