// The vocabulary a synthesized model carries, taken from a donor: a GGUF file, a Hugging
// Face tokenizer.json (with the tokenizer_config.json beside it, for the special tokens
// and the chat template), a folder holding one, or "bytes" for a built-in byte vocabulary.
#pragma once

#include <cstdint>
#include <string>

#include "core/tokenizer/vocab.h"

namespace tsr::app {

// The built-in vocabulary's size: <unk>, <s>, </s>, the 256 byte tokens and "▁".
constexpr int32_t kByteVocabSize = 260;

// Throws tsr::Error naming the donor when it is missing or unreadable.
Vocab synth_donor_vocab(const std::string& donor);

// Pads `v` to `n` tokens with unused "[PAD<id>]" tokens, as llama.cpp's converter pads a
// vocabulary to the model's embedding rows; n = 0 keeps it. Throws when n is smaller than
// the vocabulary.
void synth_pad_vocab(Vocab& v, int32_t n);

}  // namespace tsr::app
