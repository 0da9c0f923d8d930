// Vocabularies from Hugging Face tokenizer.json files (byte-level BPE models: GPT-2,
// Llama 3, Qwen2), given the same form and defaults as one read from a GGUF file.
#pragma once

#include <string>
#include <string_view>

#include "core/tokenizer/vocab.h"

namespace tsr {

// Reads `path` and, when present beside it, tokenizer_config.json (BOS/EOS, add_bos_token,
// add_eos_token, chat_template). Throws tsr::Error naming the file for unreadable or
// unsupported tokenizers (model types other than BPE, pre-tokenizers that are not
// byte-level or whose regex is unknown).
Vocab vocab_from_hf_tokenizer_json(const std::string& path);

// The same from the files' contents; `tokenizer_config_json` may be empty.
Vocab vocab_from_hf_tokenizer_json_string(std::string_view tokenizer_json,
                                          std::string_view tokenizer_config_json = {});

}  // namespace tsr
