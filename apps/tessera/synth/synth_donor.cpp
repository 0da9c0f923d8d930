#include "apps/tessera/synth/synth_donor.h"

#include <fmt/format.h>

#include <filesystem>

#include "base/error.h"
#include "core/model/gguf.h"
#include "core/tokenizer/hf_tokenizer_json.h"

namespace tsr::app {

namespace {

// A self-contained SentencePiece vocabulary: any text encodes (by byte fallback), so a
// model can be made without any donor file.
Vocab byte_vocab() {
  Vocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.types = {TokenType::UNKNOWN, TokenType::CONTROL, TokenType::CONTROL};
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(fmt::format("<0x{:02X}>", b));
    v.types.push_back(TokenType::BYTE);
  }
  v.tokens.push_back("\xe2\x96\x81");
  v.types.push_back(TokenType::NORMAL);
  v.scores.assign(v.tokens.size(), 0.0f);
  v.unk_id = 0, v.bos_id = 1, v.eos_id = 2;
  v.eog_ids = {2};
  return v;
}

}  // namespace

Vocab synth_donor_vocab(const std::string& donor) {
  if (donor == "bytes") return byte_vocab();
  namespace fs = std::filesystem;
  const fs::path path = fs::is_directory(donor) ? fs::path(donor) / "tokenizer.json" : fs::path(donor);
  if (!fs::exists(path)) {
    throw Error("tokenizer donor " + path.string() +
                    " not found; give --donor a GGUF file, a Hugging Face tokenizer.json (or its folder), or bytes",
                TSR_STATUS_IO_ERROR);
  }
  if (path.extension() == ".json") {
    Vocab v = vocab_from_hf_tokenizer_json(path.string());
    // Qwen's tokenizer.json has no BOS, which GGUF cannot say; llama.cpp's converter names
    // <|endoftext|> (the padding token) and adds it to nothing.
    if (v.bos_id < 0) v.bos_id = v.pad_id;
    return v;
  }
  return vocab_from_gguf(*GgufFile::open(path.string()));
}

void synth_pad_vocab(Vocab& v, int32_t n) {
  const auto have = static_cast<int32_t>(v.tokens.size());
  if (n == 0 || n == have) return;
  if (n < have) {
    throw Error(fmt::format("the donor's vocabulary has {} tokens, more than --vocab {}", have, n));
  }
  for (int32_t id = have; id < n; ++id) {
    v.tokens.push_back(fmt::format("[PAD{}]", id));
    v.types.push_back(TokenType::UNUSED);
    if (!v.scores.empty()) v.scores.push_back(0.0f);
  }
}

}  // namespace tsr::app
