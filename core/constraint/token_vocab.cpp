#include "core/constraint/token_vocab.h"

#include <algorithm>

#include "core/tokenizer/tokenizer.h"

namespace tsr {

namespace {

bool is_text(TokenType type) {
  return type == TokenType::NORMAL || type == TokenType::USER_DEFINED ||
         type == TokenType::BYTE || type == TokenType::UNDEFINED;
}

}  // namespace

TokenVocab::TokenVocab(const Tokenizer& tokenizer) {
  const Vocab& v = tokenizer.vocab();
  const auto n = static_cast<size_t>(tokenizer.n_tokens());
  bytes_.resize(n);
  kinds_.assign(n, TSR_TOKEN_SPECIAL);
  for (size_t id = 0; id < n; ++id) {
    const TokenType type = id < v.types.size() ? v.types[id] : TokenType::NORMAL;
    if (!is_text(type)) continue;
    kinds_[id] = TSR_TOKEN_TEXT;
    bytes_[id] = tokenizer.token_to_piece(static_cast<int32_t>(id), true);
  }
  std::vector<int32_t> eos = v.eog_ids;
  if (eos.empty() && v.eos_id >= 0) eos.push_back(v.eos_id);
  for (int32_t id : eos) {
    if (id >= 0 && static_cast<size_t>(id) < n) kinds_[id] = TSR_TOKEN_EOS;
  }
  pointers_.resize(n);
  lens_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    pointers_[id] = bytes_[id].data();
    lens_[id] = kinds_[id] == TSR_TOKEN_TEXT ? static_cast<uint32_t>(bytes_[id].size()) : 0;
  }
  desc_.struct_size = sizeof(desc_);
  desc_.n_tokens = static_cast<int32_t>(n);
  desc_.token_bytes = pointers_.data();
  desc_.token_lens = lens_.data();
  desc_.token_kinds = kinds_.data();
}

}  // namespace tsr
