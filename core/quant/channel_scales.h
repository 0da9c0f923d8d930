// Per-input-channel scales folded into a model so that its float function is unchanged:
// the weights reading one input have their columns multiplied by s, and what produces that
// input (a norm's weights, or the rows and bias of the matrix before) is divided by s. AWQ
// (awq.h) and SmoothQuant (smoothquant.h) choose s; both move the difficulty of an input's
// large channels between activations and weights.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tsr::quant {

// A model's f32 tensors by GGUF name: rows = ne[1] (1 for a vector), cols = ne[0].
struct FloatTensor {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
};
using FloatTensors = std::map<std::string, FloatTensor>;

struct ScaleGroup {
  std::string down;   // divided: a norm's weights, or a matrix's rows
  std::string bias;   // a matrix's bias, divided with its rows (may be absent from the tensors)
  std::vector<std::string> weights;  // multiplied column-wise; the first names the input
};

// The groups of layer `layer` of a llama-family model in `t`: attn_norm before Q/K/V (or
// Phi-3's fused QKV), ffn_norm before gate/up, and with `matrices` also up's rows before
// down (down reads act(gate) * up, linear in up) and V's rows before the output projection
// where every head has its own V (MHA: the projection's columns are V's rows one to one).
std::vector<ScaleGroup> scale_groups(const FloatTensors& t, int layer, bool matrices);

// Whether every tensor of `g` is in `t` with `cols` input channels.
bool scale_group_fits(const ScaleGroup& g, const FloatTensors& t, int64_t cols);

// Folds `s` ([cols]) into `t`.
void scale_group_apply(const ScaleGroup& g, FloatTensors& t, const std::vector<float>& s);

// The tensors a group may name (norms, dense weights, the biases of scaled rows): what a
// caller loads into FloatTensors.
bool scale_group_tensor(const std::string& name);

}  // namespace tsr::quant
