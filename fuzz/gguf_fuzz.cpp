// GGUF files from untrusted sources: the reader, the model hyperparameters and the
// tokenizer built from the file's vocabulary must reject any malformed input with
// tsr::Error, never crash, leak or allocate without bound.
#include <cstdint>
#include <span>

#include "base/error.h"
#include "core/model/gguf.h"
#include "core/model/llama_model.h"
#include "core/tokenizer/tokenizer.h"

namespace {

void use_vocab(const tsr::GgufFile& gguf) {
  const auto tokenizer = tsr::Tokenizer::create(tsr::vocab_from_gguf(gguf));
  const auto ids = tokenizer->encode("Hello world, \xE6\x97\xA5\xE6\x9C\xAC <s> 123", true, true);
  tokenizer->decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<tsr::GgufFile> gguf;
  try {
    gguf = tsr::GgufFile::from_bytes(std::span(data, size), "fuzz.gguf");
  } catch (const tsr::Error&) {
    return 0;
  }
  try {
    tsr::llama_hparams_from_gguf(*gguf);
  } catch (const tsr::Error&) {
  }
  try {
    use_vocab(*gguf);
  } catch (const tsr::Error&) {
  }
  return 0;
}
