#include "core/quant/awq_clip.h"

#include <algorithm>
#include <cmath>

namespace tsr::quant {

namespace {

// The block's diagonal block of the Hessian of the inputs w sees (x / s).
std::vector<double> block_hessian(std::span<const float> h, std::span<const float> s, int64_t cols, int64_t c0,
                                  int64_t n) {
  std::vector<double> hb(size_t(n * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double v = h[size_t((c0 + i) * cols + c0 + j)];
      if (!s.empty()) v /= double(s[size_t(c0 + i)]) * s[size_t(c0 + j)];
      hb[size_t(i * n + j)] = v;
    }
  }
  return hb;
}

double quadratic(const std::vector<double>& hb, const float* d, int64_t n) {
  double e = 0;
  for (int64_t i = 0; i < n; ++i) {
    double row = 0;
    for (int64_t j = 0; j < n; ++j) row += hb[size_t(i * n + j)] * d[j];
    e += d[i] * row;
  }
  return e;
}

}  // namespace

ClipResult awq_clip(std::span<float> w, int64_t rows, int64_t cols, const RoundTrip& round_trip,
                    std::span<const float> hessian, std::span<const float> scales, const ClipOptions& opt) {
  const int64_t n = opt.block, blocks = cols / n;
  const int steps = int(std::floor(opt.grid * opt.max_shrink + 1e-9));
  // Each block's largest magnitude, and per candidate the clipped matrix's round trip error.
  std::vector<float> amax(size_t(rows * blocks));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* x = w.data() + r * cols + b * n;
      for (int64_t j = 0; j < n; ++j) amax[size_t(r * blocks + b)] = std::max(amax[size_t(r * blocks + b)], std::fabs(x[j]));
    }
  }
  std::vector<std::vector<double>> hb(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) hb[size_t(b)] = block_hessian(hessian, scales, cols, b * n, n);
  std::vector<double> best(size_t(rows * blocks));
  std::vector<int> best_step(size_t(rows * blocks), 0);
  std::vector<float> clipped(w.size()), q(w.size()), d(static_cast<size_t>(n));
  ClipResult res;
  for (int i = 0; i <= steps; ++i) {
    const float ratio = 1.0f - float(i) / float(opt.grid);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < blocks; ++b) {
        const float m = amax[size_t(r * blocks + b)] * ratio;
        for (int64_t j = r * cols + b * n; j < r * cols + (b + 1) * n; ++j) clipped[size_t(j)] = std::clamp(w[size_t(j)], -m, m);
      }
    }
    round_trip(clipped, rows, cols, q);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t at = r * cols + b * n;
        for (int64_t j = 0; j < n; ++j) d[size_t(j)] = w[size_t(at + j)] - q[size_t(at + j)];
        const double e = quadratic(hb[size_t(b)], d.data(), n);
        const size_t k = size_t(r * blocks + b);
        if (i == 0) res.rtn_error += e;
        if (i == 0 || e < best[k]) best[k] = e, best_step[k] = i;
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const size_t k = size_t(r * blocks + b);
      res.error += best[k];
      if (best_step[k] == 0) continue;
      ++res.clipped;
      const float m = amax[k] * (1.0f - float(best_step[k]) / float(opt.grid));
      for (int64_t j = r * cols + b * n; j < r * cols + (b + 1) * n; ++j) w[size_t(j)] = std::clamp(w[size_t(j)], -m, m);
    }
  }
  return res;
}

}  // namespace tsr::quant
