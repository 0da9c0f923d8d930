// llama.cpp's quantization mixes: which type each tensor of a model gets under a
// `llama-quantize` file type (Q4_K_M, Q5_K_M, Q6_K), as llama-quant.cpp decides it
// (llama_tensor_get_type): the output head (and a tied embedding) to Q6_K, the value
// projections and FFN down-projections of the layers that gain most from more bits to
// Q6_K, the tensors no file type quantizes (norms, routers, 1-D tensors) kept, and a
// tensor whose rows do not fill a 256-block to llama.cpp's fallback type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/gguf.h"

namespace tsr::quant {

enum class MixKind { q4_k_m, q5_k_m, q6_k };

struct QuantMix {
  MixKind kind;
  GgmlType base;       // the type of the tensors no rule moves
  uint32_t file_type;  // llama.cpp's general.file_type (llama_ftype)
};

// "q4_k_m", "q5_k_m", "q6_k" (case-insensitive); nullopt for anything else.
std::optional<QuantMix> quant_mix_parse(std::string name);

// What of the model the rules look at, read from its metadata and tensor list.
struct MixModel {
  std::string arch;
  int32_t n_layer = 0;
  int32_t n_expert = 0;
  bool has_output = false;  // false: the embedding is tied to the output head
  bool is_70b = false;      // llama.cpp's LLM_TYPE_70B (80 layers with grouped KV heads)
  int32_t n_attention_wv = 0;
  static MixModel of(const GgufFile& file);
};

// Whether llama-quantize quantizes this tensor at all (2-D or 3-D weights other than norms,
// expert routers and position embeddings).
bool mix_allows(const GgufTensorInfo& t);

// The type of each tensor of `file` under `mix`, in file order; tensors mix_allows refuses
// keep their stored type. `fallbacks` receives "name: wanted -> got" for every tensor whose
// rows do not fill the chosen type's blocks.
std::vector<GgmlType> quant_mix_types(const GgufFile& file, const QuantMix& mix, std::vector<std::string>* fallbacks);

// llama.cpp's type for a tensor whose row length `ncols` does not fit `type`'s 256-blocks
// (tensor_type_fallback): a block of 32 of about the same size, F16 where not even that fits.
GgmlType quant_fallback_type(GgmlType type, int64_t ncols);

}  // namespace tsr::quant
