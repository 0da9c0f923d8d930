// The vocabulary of a model as GGUF stores it (tokenizer.ggml.*), independent of
// the tokenization algorithm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tsr {

class GgufFile;
class GgufWriter;

// Token attributes, numbered as llama.cpp's tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6,
};

struct Vocab {
  std::string model;                  // tokenizer.ggml.model: "llama", "gpt2", ...
  std::string pre;                    // tokenizer.ggml.pre (byte-level BPE pre-tokenizer)
  std::vector<std::string> tokens;
  std::vector<float> scores;          // empty when absent
  std::vector<TokenType> types;       // NORMAL for all when absent
  std::vector<std::string> merges;    // BPE merges "a b" (gpt2 model)
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  std::vector<int32_t> eog_ids;       // end-of-generation ids: EOS, EOT, EOM ... (no BOS)
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;
  std::string chat_template;          // tokenizer.chat_template, empty when absent
};

// Reads tokenizer.ggml.* from a GGUF file, applying llama.cpp's defaults for missing
// flags. Throws tsr::Error for missing or inconsistent tokenizer data.
Vocab vocab_from_gguf(const GgufFile& gguf);

// Adds to v.eog_ids the tokens llama.cpp ends generation at by their text (<|eot_id|>,
// <|im_end|>, <|end|>, <|return|>, <|call|>, <end_of_turn>, ...: its llama_vocab load, for
// the families Tessera runs), whatever their type, as llama.cpp does; and its rule for
// o200k_harmony (gpt-oss): where <|return|> and <|call|> end generation, <|end|> ends a
// message only, and is left out.
void vocab_add_eog_texts(Vocab& v);

// Writes `v` as tokenizer.ggml.* (and tokenizer.chat_template) keys, every flag and id
// spelled out so that readers' defaults do not matter: vocab_from_gguf reads back `v`,
// and llama.cpp loads the same vocabulary, but for an absent BOS (-1), which the format
// cannot express: readers then take their default (11 for gpt2). An EOG id other than EOS becomes
// tokenizer.ggml.eot_token_id (only one more fits the format).
void vocab_write_gguf(const Vocab& v, GgufWriter& w);

}  // namespace tsr
