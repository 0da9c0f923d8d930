#include "core/tokenizer/vocab.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "core/model/gguf.h"
#include "core/model/gguf_writer.h"
#include "core/tokenizer/bpe_tokenizer.h"

namespace tsr {
namespace {

constexpr int32_t kMaxTokenType = static_cast<int32_t>(TokenType::BYTE);

[[noreturn]] void fail(const GgufFile& gguf, const std::string& what) {
  throw Error(gguf.path() + ": " + what);
}

template <typename T>
T require(const GgufFile& gguf, std::optional<T> value, const char* key) {
  if (!value) fail(gguf, std::string("missing ") + key);
  return std::move(*value);
}

std::vector<TokenType> read_types(const GgufFile& gguf, size_t n_tokens) {
  const auto raw = gguf.get_i32_array("tokenizer.ggml.token_type");
  if (!raw) return std::vector<TokenType>(n_tokens, TokenType::NORMAL);
  if (raw->size() != n_tokens) {
    fail(gguf, "tokenizer.ggml.token_type has " + std::to_string(raw->size()) +
                   " entries for " + std::to_string(n_tokens) + " tokens");
  }
  std::vector<TokenType> types(n_tokens);
  for (size_t i = 0; i < n_tokens; ++i) {
    if ((*raw)[i] < 0 || (*raw)[i] > kMaxTokenType) {
      fail(gguf, "tokenizer.ggml.token_type[" + std::to_string(i) + "] = " +
                     std::to_string((*raw)[i]) + " is not a known token type");
    }
    types[i] = static_cast<TokenType>((*raw)[i]);
  }
  return types;
}

// llama.cpp's defaults where the file says nothing: SentencePiece models get BOS (1),
// EOS (2), <unk> (0) and a leading space; byte-level BPE ("gpt2") models BOS = EOS = 11
// (GPT-2's default ids in llama.cpp), no space prefix, and BOS added only for the
// pre-tokenizers llama.cpp adds it for (Llama 3); other models none of these.
void apply_model_defaults(Vocab& v) {
  const bool spm = v.model == "llama";
  const bool bpe = v.model == "gpt2";
  v.add_bos = spm || (bpe && bpe_pre_adds_bos(v.pre));
  v.add_eos = false;
  v.add_space_prefix = spm;
  if (spm) {
    v.bos_id = 1;
    v.eos_id = 2;
    v.unk_id = 0;
  }
  // A smaller vocabulary has no token 11: leave the ids unset rather than out of range.
  if (bpe && v.tokens.size() > 11) {
    v.bos_id = 11;
    v.eos_id = 11;
  }
}

// The id under `key`, or `fallback` when absent; -1 means "no such token".
int32_t read_id(const GgufFile& gguf, const char* key, int32_t fallback, size_t n_tokens) {
  const std::optional<int64_t> raw = gguf.get_int(key);
  const int64_t id = raw.value_or(fallback);
  if (id < -1 || id >= static_cast<int64_t>(n_tokens)) {
    fail(gguf, std::string(key) + " = " + std::to_string(id) + (raw ? "" : " (default)") +
                   " is outside the vocabulary of " + std::to_string(n_tokens) + " tokens");
  }
  return static_cast<int32_t>(id);
}

void read_special_ids(const GgufFile& gguf, Vocab& v) {
  const size_t n = v.tokens.size();
  v.bos_id = read_id(gguf, "tokenizer.ggml.bos_token_id", v.bos_id, n);
  v.eos_id = read_id(gguf, "tokenizer.ggml.eos_token_id", v.eos_id, n);
  v.unk_id = read_id(gguf, "tokenizer.ggml.unknown_token_id", v.unk_id, n);
  v.pad_id = read_id(gguf, "tokenizer.ggml.padding_token_id", v.pad_id, n);
  const int32_t eot = read_id(gguf, "tokenizer.ggml.eot_token_id", -1, n);
  const int32_t eom = read_id(gguf, "tokenizer.ggml.eom_token_id", -1, n);
  // BOS is not among them: models such as stories260K emit it between stories.
  for (int32_t id : {v.eos_id, eot, eom}) {
    const bool listed = std::find(v.eog_ids.begin(), v.eog_ids.end(), id) != v.eog_ids.end();
    if (id >= 0 && !listed) v.eog_ids.push_back(id);
  }
}

void read_flags(const GgufFile& gguf, Vocab& v) {
  v.add_bos = gguf.get_bool("tokenizer.ggml.add_bos_token").value_or(v.add_bos);
  v.add_eos = gguf.get_bool("tokenizer.ggml.add_eos_token").value_or(v.add_eos);
  v.add_space_prefix =
      gguf.get_bool("tokenizer.ggml.add_space_prefix").value_or(v.add_space_prefix);
  if (v.add_bos && v.bos_id < 0) fail(gguf, "BOS is to be added but there is no BOS token");
  if (v.add_eos && v.eos_id < 0) fail(gguf, "EOS is to be added but there is no EOS token");
}

}  // namespace

void vocab_add_eog_texts(Vocab& v) {
  static constexpr std::string_view kTexts[] = {
      "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>", "<|end|>",
      "<|return|>", "<|call|>",   "<end_of_turn>",   "<EOT>",      "<｜end▁of▁sentence｜>"};
  const auto listed = [&](int32_t id) { return std::find(v.eog_ids.begin(), v.eog_ids.end(), id) != v.eog_ids.end(); };
  int32_t ret = -1, call = -1, end = -1;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& t = v.tokens[i];
    if (t.size() > 32 || std::find(std::begin(kTexts), std::end(kTexts), t) == std::end(kTexts)) continue;
    const auto id = static_cast<int32_t>(i);
    if (!listed(id)) v.eog_ids.push_back(id);
    if (t == "<|return|>") ret = id;
    if (t == "<|call|>") call = id;
    if (t == "<|end|>") end = id;
  }
  if (ret >= 0 && call >= 0 && end >= 0) std::erase(v.eog_ids, end);
}

Vocab vocab_from_gguf(const GgufFile& gguf) {
  Vocab v;
  v.model = require(gguf, gguf.get_string("tokenizer.ggml.model"), "tokenizer.ggml.model");
  v.pre = gguf.get_string("tokenizer.ggml.pre").value_or("");
  v.tokens = require(gguf, gguf.get_string_array("tokenizer.ggml.tokens"), "tokenizer.ggml.tokens");
  if (v.tokens.empty()) fail(gguf, "tokenizer.ggml.tokens is empty");
  v.scores = gguf.get_f32_array("tokenizer.ggml.scores").value_or(std::vector<float>{});
  if (!v.scores.empty() && v.scores.size() != v.tokens.size()) {
    fail(gguf, "tokenizer.ggml.scores has " + std::to_string(v.scores.size()) +
                   " entries for " + std::to_string(v.tokens.size()) + " tokens");
  }
  v.types = read_types(gguf, v.tokens.size());
  v.merges = gguf.get_string_array("tokenizer.ggml.merges").value_or(std::vector<std::string>{});
  apply_model_defaults(v);
  read_special_ids(gguf, v);
  vocab_add_eog_texts(v);
  read_flags(gguf, v);
  v.chat_template = gguf.get_string("tokenizer.chat_template").value_or("");
  return v;
}

void vocab_write_gguf(const Vocab& v, GgufWriter& w) {
  w.add_string("tokenizer.ggml.model", v.model);
  if (!v.pre.empty()) w.add_string("tokenizer.ggml.pre", v.pre);
  w.add_string_array("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty()) w.add_f32_array("tokenizer.ggml.scores", v.scores);
  std::vector<int32_t> types(v.types.size());
  std::transform(v.types.begin(), v.types.end(), types.begin(), [](TokenType t) { return static_cast<int32_t>(t); });
  w.add_i32_array("tokenizer.ggml.token_type", types);
  if (!v.merges.empty()) w.add_string_array("tokenizer.ggml.merges", v.merges);
  const auto id = [&](const char* key, int32_t value) {
    if (value >= 0) w.add_u32(key, static_cast<uint32_t>(value));
  };
  id("tokenizer.ggml.bos_token_id", v.bos_id);
  id("tokenizer.ggml.eos_token_id", v.eos_id);
  id("tokenizer.ggml.unknown_token_id", v.unk_id);
  id("tokenizer.ggml.padding_token_id", v.pad_id);
  for (const int32_t eog : v.eog_ids) {
    if (eog == v.eos_id) continue;
    id("tokenizer.ggml.eot_token_id", eog);
    break;
  }
  w.add_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.add_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  w.add_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  if (!v.chat_template.empty()) w.add_string("tokenizer.chat_template", v.chat_template);
}

}  // namespace tsr
