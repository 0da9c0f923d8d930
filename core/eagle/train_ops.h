// The ops of an EAGLE-3 head's training on the CPU, each a forward and the backward that
// accumulates its gradients (row-major f32; rows are tokens). Plain loops: heads for small
// targets train in minutes, and every backward is checked against finite differences
// (train_ops_test.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tsr::eagle {

// y[n, out] = x[n, in] · wᵀ (w [out, in]).
void matmul(std::span<const float> x, std::span<const float> w, int64_t n, int64_t in, int64_t out,
            std::span<float> y);
// dx += dy · w; dw += dyᵀ · x.
void matmul_backward(std::span<const float> x, std::span<const float> w, std::span<const float> dy, int64_t n,
                     int64_t in, int64_t out, std::span<float> dx, std::span<float> dw);

// y = x / rms(x) * w per row of d; inv_rms[n] keeps 1 / rms for the backward.
void rms_norm(std::span<const float> x, std::span<const float> w, int64_t n, int64_t d, float eps,
              std::span<float> y, std::span<float> inv_rms);
// dx += ..., dw += ...
void rms_norm_backward(std::span<const float> x, std::span<const float> w, std::span<const float> inv_rms,
                       std::span<const float> dy, int64_t n, int64_t d, std::span<float> dx, std::span<float> dw);

// RoPE of llama's NORMAL mode in place over rows of `heads` x `dim`, row r at positions[r];
// `inverse` turns back (the backward of a rotation is its inverse on the gradient).
void rope(std::span<float> x, std::span<const int32_t> positions, int64_t heads, int64_t dim, float base,
          bool inverse);

// Attention of n queries over m keys: query i attends to the keys keys_of[i] lists
// (GQA: head h reads kv head h / (heads / kv_heads)), scaled by 1 / sqrt(dim).
// q [n, heads, dim], k and v [m, kv_heads, dim], out [n, heads, dim]; probs keeps the
// weights (per query and head, in keys_of[i]'s order) for the backward.
struct AttentionShape {
  int64_t heads, kv_heads, dim;
};
void attention(std::span<const float> q, std::span<const float> k, std::span<const float> v,
               const std::vector<std::vector<int32_t>>& keys_of, const AttentionShape& s, std::span<float> out,
               std::vector<float>& probs);
void attention_backward(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                        const std::vector<std::vector<int32_t>>& keys_of, const AttentionShape& s,
                        std::span<const float> probs, std::span<const float> dout, std::span<float> dq,
                        std::span<float> dk, std::span<float> dv);

// y = silu(gate) * up, elementwise.
void swiglu(std::span<const float> gate, std::span<const float> up, std::span<float> y);
void swiglu_backward(std::span<const float> gate, std::span<const float> up, std::span<const float> dy,
                     std::span<float> dgate, std::span<float> dup);

// Soft cross-entropy of each row's softmax(logits) against the distribution `target`
// (rows of d): returns the sum over rows of -sum target * log softmax, and writes
// dlogits = weight * (softmax - target).
double soft_cross_entropy(std::span<const float> logits, std::span<const float> target, int64_t n, int64_t d,
                          float weight, std::span<float> dlogits);

}  // namespace tsr::eagle
