#include "core/tokenizer/tokenizer.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "core/tokenizer/bpe_tokenizer.h"
#include "core/tokenizer/spm_tokenizer.h"

namespace tsr {
namespace {

void check_id(const Vocab& vocab, int32_t id, const char* what) {
  if (id < -1 || id >= static_cast<int32_t>(vocab.tokens.size())) {
    throw Error("tokenizer: " + std::string(what) + " id " + std::to_string(id) +
                " is outside the vocabulary of " + std::to_string(vocab.tokens.size()) +
                " tokens");
  }
}

// A Vocab may be built by hand (tests, synthesized models), so the invariants the
// tokenizers index by are checked here and not only when reading a GGUF file.
void check_vocab(const Vocab& vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) throw Error("tokenizer: the vocabulary has no tokens");
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    throw Error("tokenizer: " + std::to_string(vocab.scores.size()) + " scores for " +
                std::to_string(n) + " tokens");
  }
  if (!vocab.types.empty() && vocab.types.size() != n) {
    throw Error("tokenizer: " + std::to_string(vocab.types.size()) + " token types for " +
                std::to_string(n) + " tokens");
  }
  check_id(vocab, vocab.bos_id, "BOS");
  check_id(vocab, vocab.eos_id, "EOS");
  check_id(vocab, vocab.unk_id, "unknown-token");
  check_id(vocab, vocab.pad_id, "padding");
  for (int32_t id : vocab.eog_ids) check_id(vocab, id, "end-of-generation");
  if (vocab.add_bos && vocab.bos_id < 0) {
    throw Error("tokenizer: add_bos is set but there is no BOS token");
  }
  if (vocab.add_eos && vocab.eos_id < 0) {
    throw Error("tokenizer: add_eos is set but there is no EOS token");
  }
}

// Cuts every raw fragment of `in` at each occurrence of `special`.
std::vector<TextFragment> split_at(const std::vector<TextFragment>& in, std::string_view special,
                                   int32_t id) {
  std::vector<TextFragment> out;
  out.reserve(in.size());
  for (const TextFragment& f : in) {
    if (f.token >= 0) {
      out.push_back(f);
      continue;
    }
    std::string_view rest = f.text;
    for (size_t pos; (pos = rest.find(special)) != std::string_view::npos;) {
      if (pos > 0) out.push_back({rest.substr(0, pos)});
      out.push_back({{}, id});
      rest.remove_prefix(pos + special.size());
    }
    if (!rest.empty()) out.push_back({rest});
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::create(Vocab vocab) {
  check_vocab(vocab);
  if (vocab.types.empty()) vocab.types.assign(vocab.tokens.size(), TokenType::NORMAL);
  std::unique_ptr<Tokenizer> t;
  if (vocab.model == "llama") {
    t = std::make_unique<SpmTokenizer>(std::move(vocab));
  } else if (vocab.model == "gpt2") {
    t = std::make_unique<BpeTokenizer>(std::move(vocab));
  } else {
    throw Error("tokenizer model '" + vocab.model + "' is not supported yet", TSR_STATUS_UNSUPPORTED);
  }
  for (const std::string& text : t->vocab_.tokens) t->max_token_bytes_ = std::max(t->max_token_bytes_, text.size());
  for (const std::string& piece : t->pieces_) t->max_token_bytes_ = std::max(t->max_token_bytes_, piece.size());
  return t;
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::find(vocab_.eog_ids.begin(), vocab_.eog_ids.end(), id) != vocab_.eog_ids.end();
}

std::vector<int32_t> special_token_ids(const Vocab& vocab) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    const TokenType t = vocab.types[i];
    // An empty text would match everywhere without consuming anything.
    if (vocab.tokens[i].empty()) continue;
    if (t == TokenType::CONTROL || t == TokenType::USER_DEFINED || t == TokenType::UNKNOWN) {
      ids.push_back(static_cast<int32_t>(i));
    }
  }
  // Longest first, so that a token containing a shorter one wins; stable for determinism.
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return vocab.tokens[a].size() > vocab.tokens[b].size();
  });
  return ids;
}

std::vector<TextFragment> split_special(const Vocab& vocab,
                                        const std::vector<int32_t>& special_ids,
                                        std::string_view text, bool parse_special) {
  std::vector<TextFragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({text});
  for (int32_t id : special_ids) {
    // llama.cpp matches user-defined tokens even without parse_special (as Hugging Face
    // tokenizers do): they are part of the vocabulary's normal text handling.
    if (!parse_special && vocab.types[id] != TokenType::USER_DEFINED) continue;
    fragments = split_at(fragments, vocab.tokens[id], id);
  }
  return fragments;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_tokens()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary of " +
                std::to_string(n_tokens()) + " tokens");
  }
  const TokenType type = vocab_.types[id];
  if (render_special && (type == TokenType::CONTROL || type == TokenType::UNKNOWN)) {
    return vocab_.tokens[id];
  }
  return pieces_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool strip_leading_space,
                              bool render_special) const {
  std::string out;
  // The prefix space follows BOS and other control tokens, so it sits in the first
  // piece after them.
  bool strip = strip_leading_space && vocab_.add_space_prefix;
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, render_special);
    if (strip && vocab_.types[id] != TokenType::CONTROL) {
      if (piece.starts_with(' ')) piece.erase(0, 1);
      strip = false;
    }
    out += piece;
  }
  return out;
}

}  // namespace tsr
