// How an embedding pools the output norm's hidden states of its tokens, from GGUF's
// {arch}.pooling_type as llama.cpp numbers it: mean (1), cls (2: the first token), last (3),
// rank (4: a reranker's classifier head, which embeddings refuse). None (0) or no key, the
// case of generative models: the last token, the one llama.cpp returns for them.
#pragma once

namespace tsr {

enum class Pooling { LAST, MEAN, CLS, RANK };
const char* pooling_name(Pooling p);

}  // namespace tsr
