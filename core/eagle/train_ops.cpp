#include "core/eagle/train_ops.h"

#include <algorithm>
#include <cmath>

namespace tsr::eagle {

void matmul(std::span<const float> x, std::span<const float> w, int64_t n, int64_t in, int64_t out,
            std::span<float> y) {
#pragma omp parallel for if (n * in * out > (1 << 18))
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x.data() + r * in;
    for (int64_t o = 0; o < out; ++o) {
      const float* wr = w.data() + o * in;
      float acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < in; ++i) acc += xr[i] * wr[i];
      y[size_t(r * out + o)] = acc;
    }
  }
}

void matmul_backward(std::span<const float> x, std::span<const float> w, std::span<const float> dy, int64_t n,
                     int64_t in, int64_t out, std::span<float> dx, std::span<float> dw) {
  if (!dx.empty()) {
#pragma omp parallel for if (n * in * out > (1 << 18))
    for (int64_t r = 0; r < n; ++r) {
      float* dxr = dx.data() + r * in;
      for (int64_t o = 0; o < out; ++o) {
        const float g = dy[size_t(r * out + o)];
        const float* wr = w.data() + o * in;
#pragma omp simd
        for (int64_t i = 0; i < in; ++i) dxr[i] += g * wr[i];
      }
    }
  }
#pragma omp parallel for if (n * in * out > (1 << 18))
  for (int64_t o = 0; o < out; ++o) {
    float* dwr = dw.data() + o * in;
    for (int64_t r = 0; r < n; ++r) {
      const float g = dy[size_t(r * out + o)];
      const float* xr = x.data() + r * in;
#pragma omp simd
      for (int64_t i = 0; i < in; ++i) dwr[i] += g * xr[i];
    }
  }
}

void rms_norm(std::span<const float> x, std::span<const float> w, int64_t n, int64_t d, float eps,
              std::span<float> y, std::span<float> inv_rms) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x.data() + r * d;
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += double(xr[i]) * xr[i];
    const float s = 1.0f / std::sqrt(float(sum / double(d)) + eps);
    inv_rms[size_t(r)] = s;
    for (int64_t i = 0; i < d; ++i) y[size_t(r * d + i)] = xr[i] * s * w[size_t(i)];
  }
}

// y_i = x_i s w_i with s = (mean x² + eps)^(-1/2): dx_i = s (w_i dy_i) - x_i s³ / d · Σ_j w_j dy_j x_j.
void rms_norm_backward(std::span<const float> x, std::span<const float> w, std::span<const float> inv_rms,
                       std::span<const float> dy, int64_t n, int64_t d, std::span<float> dx, std::span<float> dw) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x.data() + r * d;
    const float* g = dy.data() + r * d;
    const double s = inv_rms[size_t(r)];
    double dot = 0;
    for (int64_t i = 0; i < d; ++i) dot += double(w[size_t(i)]) * g[i] * xr[i];
    const double c = dot * s * s * s / double(d);
    for (int64_t i = 0; i < d; ++i) {
      dx[size_t(r * d + i)] += float(s * w[size_t(i)] * g[i] - xr[i] * c);
      dw[size_t(i)] += float(g[i] * xr[i] * s);
    }
  }
}

void rope(std::span<float> x, std::span<const int32_t> positions, int64_t heads, int64_t dim, float base,
          bool inverse) {
  const int64_t n = static_cast<int64_t>(positions.size());
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < dim / 2; ++i) {
      const double theta = positions[size_t(r)] * std::pow(double(base), -2.0 * double(i) / double(dim));
      const float c = float(std::cos(theta)), s = float(inverse ? -std::sin(theta) : std::sin(theta));
      for (int64_t h = 0; h < heads; ++h) {
        float* p = x.data() + (r * heads + h) * dim + 2 * i;
        const float a = p[0], b = p[1];
        p[0] = a * c - b * s;
        p[1] = a * s + b * c;
      }
    }
  }
}

void attention(std::span<const float> q, std::span<const float> k, std::span<const float> v,
               const std::vector<std::vector<int32_t>>& keys_of, const AttentionShape& s, std::span<float> out,
               std::vector<float>& probs) {
  const int64_t n = static_cast<int64_t>(keys_of.size()), group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(float(s.dim));
  std::vector<size_t> offset(size_t(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) offset[size_t(i) + 1] = offset[size_t(i)] + keys_of[size_t(i)].size() * size_t(s.heads);
  probs.assign(offset.back(), 0.0f);
  std::fill(out.begin(), out.end(), 0.0f);
#pragma omp parallel for if (n > 64)
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t>& keys = keys_of[size_t(i)];
    for (int64_t h = 0; h < s.heads; ++h) {
      const float* qh = q.data() + (i * s.heads + h) * s.dim;
      const int64_t kvh = h / group;
      float* p = probs.data() + offset[size_t(i)] + size_t(h) * keys.size();
      float best = -INFINITY;
      for (size_t j = 0; j < keys.size(); ++j) {
        const float* kj = k.data() + (keys[j] * s.kv_heads + kvh) * s.dim;
        float dot = 0;
        for (int64_t e = 0; e < s.dim; ++e) dot += qh[e] * kj[e];
        p[j] = dot * scale;
        best = std::max(best, p[j]);
      }
      float total = 0;
      for (size_t j = 0; j < keys.size(); ++j) total += (p[j] = std::exp(p[j] - best));
      float* o = out.data() + (i * s.heads + h) * s.dim;
      for (size_t j = 0; j < keys.size(); ++j) {
        p[j] /= total;
        const float* vj = v.data() + (keys[j] * s.kv_heads + kvh) * s.dim;
        for (int64_t e = 0; e < s.dim; ++e) o[e] += p[j] * vj[e];
      }
    }
  }
}

// With p = softmax(scale q·k): dv_j += p_j dout; dp_j = dout·v_j; ds_j = p_j (dp_j - Σ p dp);
// dq += scale Σ ds_j k_j; dk_j += scale ds_j q. (Serial: keys are shared between queries.)
void attention_backward(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                        const std::vector<std::vector<int32_t>>& keys_of, const AttentionShape& s,
                        std::span<const float> probs, std::span<const float> dout, std::span<float> dq,
                        std::span<float> dk, std::span<float> dv) {
  const int64_t n = static_cast<int64_t>(keys_of.size()), group = s.heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(float(s.dim));
  size_t offset = 0;
  std::vector<float> dp;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t>& keys = keys_of[size_t(i)];
    for (int64_t h = 0; h < s.heads; ++h) {
      const float* qh = q.data() + (i * s.heads + h) * s.dim;
      const float* g = dout.data() + (i * s.heads + h) * s.dim;
      float* dqh = dq.data() + (i * s.heads + h) * s.dim;
      const int64_t kvh = h / group;
      const float* p = probs.data() + offset;
      offset += keys.size();
      dp.assign(keys.size(), 0.0f);
      float mix = 0;
      for (size_t j = 0; j < keys.size(); ++j) {
        const float* vj = v.data() + (keys[j] * s.kv_heads + kvh) * s.dim;
        float* dvj = dv.data() + (keys[j] * s.kv_heads + kvh) * s.dim;
        for (int64_t e = 0; e < s.dim; ++e) {
          dp[j] += g[e] * vj[e];
          dvj[e] += p[j] * g[e];
        }
        mix += p[j] * dp[j];
      }
      for (size_t j = 0; j < keys.size(); ++j) {
        const float ds = p[j] * (dp[j] - mix) * scale;
        const float* kj = k.data() + (keys[j] * s.kv_heads + kvh) * s.dim;
        float* dkj = dk.data() + (keys[j] * s.kv_heads + kvh) * s.dim;
        for (int64_t e = 0; e < s.dim; ++e) {
          dqh[e] += ds * kj[e];
          dkj[e] += ds * qh[e];
        }
      }
    }
  }
}

void swiglu(std::span<const float> gate, std::span<const float> up, std::span<float> y) {
  for (size_t i = 0; i < y.size(); ++i) y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// silu(g) = g σ(g); silu'(g) = σ(g) (1 + g (1 - σ(g))).
void swiglu_backward(std::span<const float> gate, std::span<const float> up, std::span<const float> dy,
                     std::span<float> dgate, std::span<float> dup) {
  for (size_t i = 0; i < dy.size(); ++i) {
    const float sg = 1.0f / (1.0f + std::exp(-gate[i]));
    dgate[i] += dy[i] * up[i] * sg * (1.0f + gate[i] * (1.0f - sg));
    dup[i] += dy[i] * gate[i] * sg;
  }
}

double soft_cross_entropy(std::span<const float> logits, std::span<const float> target, int64_t n, int64_t d,
                          float weight, std::span<float> dlogits) {
  double loss = 0;
  for (int64_t r = 0; r < n; ++r) {
    const float* l = logits.data() + r * d;
    const float* t = target.data() + r * d;
    const float best = *std::max_element(l, l + d);
    double total = 0;
    for (int64_t i = 0; i < d; ++i) total += std::exp(double(l[i] - best));
    const double log_total = std::log(total);
    for (int64_t i = 0; i < d; ++i) {
      const double log_p = double(l[i] - best) - log_total;
      loss -= double(t[i]) * log_p;
      dlogits[size_t(r * d + i)] = weight * float(std::exp(log_p) - t[i]);
    }
  }
  return loss;
}

}  // namespace tsr::eagle
