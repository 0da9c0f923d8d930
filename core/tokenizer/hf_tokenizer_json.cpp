#include "core/tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "base/error.h"

namespace tsr {
namespace {

using nlohmann::json;

// The Split regexes of the pre-tokenizers bpe_tokenizer.cpp implements, spelled as
// tokenizer.json files spell them, with the tokenizer.ggml.pre name llama.cpp gives each.
struct KnownRegex {
  std::string_view regex;
  std::string_view pre;
};
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr KnownRegex kKnownRegexes[] = {
    {kGpt2Regex, "gpt-2"},
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "llama-bpe"},
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "qwen2"},
    {R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
     R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
     R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "gpt-4o"},
};


struct PreTokenizer {
  std::string pre;
  bool add_prefix_space = false;
};

class Reader {
 public:
  Reader(const json& tokenizer, const json& config, std::string name)
      : tok_(tokenizer), config_(config), name_(std::move(name)) {}

  Vocab read() {
    check_model();
    if (tok_["model"].value("byte_fallback", false)) return read_sentencepiece();
    check_normalizer();
    const PreTokenizer pt = read_pre_tokenizer();
    v_.model = "gpt2";
    v_.pre = pt.pre;
    v_.add_space_prefix = pt.add_prefix_space;
    read_tokens();
    read_merges();
    read_special_tokens();
    return std::move(v_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(name_ + ": " + what, TSR_STATUS_UNSUPPORTED);
  }

  void check_model() const {
    if (!tok_.contains("model") || !tok_["model"].is_object()) fail("no \"model\" object");
    const std::string type = tok_["model"].value("type", "(none)");
    if (type != "BPE") {
      fail("tokenizer model type '" + type + "' is not supported; only byte-level BPE is");
    }
  }

  // A SentencePiece BPE model as Hugging Face converts one (Gemma, Llama 2: byte fallback,
  // spaces replaced by U+2581, optionally one prepended), read as llama.cpp's converter
  // reads its tokenizer.model: tokenizer.ggml.model "llama", <0xXX> tokens as BYTE, the
  // unknown token as UNKNOWN, and scores that rank every merged piece as its merge ranks
  // it. Hugging Face's converter lists every split of each piece as a merge, ordered by the
  // piece's SentencePiece score; a piece's first merge gives its score back (-rank), and
  // llama.cpp's merging of the highest-scored vocabulary pair then takes the merges in
  // Hugging Face's order.
  Vocab read_sentencepiece() {
    v_.model = "llama";
    v_.add_space_prefix = sentencepiece_normalizer();
    const json& pt = tok_.value("pre_tokenizer", json());
    const bool split_on_space = pt.is_object() && pt.value("type", "") == "Split" &&
                                pt.value("pattern", json::object()).value("String", "") == " ";
    if (!pt.is_null() && !split_on_space) fail("pre-tokenizer '" + pt.value("type", "(none)") + "' is not supported with byte fallback");
    read_tokens();
    for (size_t i = 0; i < v_.tokens.size(); ++i) {
      const std::string& t = v_.tokens[i];
      const bool byte = t.size() == 6 && t.starts_with("<0x") && t.back() == '>' && std::isxdigit(uint8_t(t[3])) &&
                        std::isxdigit(uint8_t(t[4]));
      if (byte && v_.types[i] == TokenType::NORMAL) v_.types[i] = TokenType::BYTE;
    }
    read_merges();
    v_.scores.assign(v_.tokens.size(), 0.0f);
    for (size_t rank = v_.merges.size(); rank-- > 0;) {  // the first merge of a piece wins
      const std::string& m = v_.merges[rank];
      const size_t space = m.find(' ');
      const auto it = ids_.find(m.substr(0, space) + m.substr(space + 1));
      if (it != ids_.end()) v_.scores[size_t(it->second)] = -float(rank + 1);
    }
    v_.merges.clear();
    read_special_tokens();
    if (v_.unk_id >= 0) v_.types[size_t(v_.unk_id)] = TokenType::UNKNOWN;
    return std::move(v_);
  }

  // Replace " " with U+2581, alone or after a Prepend of U+2581 (whether a space is
  // prefixed); anything else is refused.
  bool sentencepiece_normalizer() const {
    const json& n = tok_.value("normalizer", json());
    if (!n.is_object()) fail("a byte-fallback BPE without the SentencePiece space replacement is not supported");
    const json steps = n.value("type", "") == "Sequence" ? n.at("normalizers") : json::array({n});
    bool replace = false, prepend = false;
    for (const json& step : steps) {
      const std::string type = step.value("type", "(none)");
      if (type == "Prepend" && step.value("prepend", "") == "\u2581") {
        prepend = true;
      } else if (type == "Replace" && step.value("pattern", json::object()).value("String", "") == " " &&
                 step.value("content", "") == "\u2581") {
        replace = true;
      } else {
        fail("normalizer '" + type + "' is not supported with byte fallback");
      }
    }
    if (!replace) fail("a byte-fallback BPE without the SentencePiece space replacement is not supported");
    return prepend;
  }

  // llama.cpp applies no normalizer either; NFC (Qwen2) leaves NFC text unchanged.
  void check_normalizer() const {
    const json& n = tok_.value("normalizer", json());
    if (n.is_null()) return;
    const std::string type = n.value("type", "(none)");
    if (type != "NFC") fail("normalizer '" + type + "' is not supported");
  }

  PreTokenizer read_pre_tokenizer() const {
    const json& pt = tok_.value("pre_tokenizer", json());
    if (!pt.is_object()) fail("no pre-tokenizer; only byte-level BPE is supported");
    const json steps =
        pt.value("type", "") == "Sequence" ? pt.at("pretokenizers") : json::array({pt});
    PreTokenizer out;
    std::string regex;
    bool byte_level = false;
    for (const json& step : steps) {
      const std::string type = step.value("type", "(none)");
      if (type == "ByteLevel") {
        byte_level = true;
        out.add_prefix_space = step.value("add_prefix_space", false);
        if (step.value("use_regex", true)) set_regex(regex, std::string(kGpt2Regex));
      } else if (type == "Split" && step.at("pattern").contains("Regex")) {
        set_regex(regex, step["pattern"]["Regex"].get<std::string>());
      } else {
        fail("pre-tokenizer '" + type + "' is not supported");
      }
    }
    if (!byte_level) fail("the pre-tokenizer is not byte-level; only byte-level BPE is supported");
    out.pre = pre_of_regex(regex);
    return out;
  }

  void set_regex(std::string& regex, std::string value) const {
    if (!regex.empty()) fail("more than one pre-tokenizer regex is not supported");
    regex = std::move(value);
  }

  std::string pre_of_regex(const std::string& regex) const {
    for (const KnownRegex& known : kKnownRegexes) {
      if (known.regex == regex) return std::string(known.pre);
    }
    fail("pre-tokenizer regex '" + regex + "' is not one of GPT-2's, Llama 3's, Qwen2's or o200k's");
  }

  void read_tokens() {
    const json& vocab = tok_["model"].at("vocab");
    const json& added = tok_.value("added_tokens", json::array());
    int64_t max_id = -1;
    for (const auto& [text, id] : vocab.items()) max_id = std::max(max_id, id.get<int64_t>());
    for (const json& a : added) max_id = std::max(max_id, a.at("id").get<int64_t>());
    if (max_id < 0) fail("the vocabulary is empty");
    v_.tokens.resize(static_cast<size_t>(max_id) + 1);
    // Ids no entry names stay empty and unused, as llama.cpp's converter pads them.
    v_.types.assign(v_.tokens.size(), TokenType::UNUSED);
    for (const auto& [text, id] : vocab.items()) {
      set_token(id.get<int64_t>(), text, TokenType::NORMAL);
    }
    for (const json& a : added) {
      const TokenType type =
          a.value("special", false) ? TokenType::CONTROL : TokenType::USER_DEFINED;
      set_token(a["id"].get<int64_t>(), a.at("content").get<std::string>(), type);
    }
  }

  void set_token(int64_t id, const std::string& text, TokenType type) {
    if (id < 0) fail("token '" + text + "' has the negative id " + std::to_string(id));
    v_.tokens[id] = text;
    v_.types[id] = type;
    ids_[text] = static_cast<int32_t>(id);
  }

  // Merges are "a b" strings, or [a, b] pairs in files written by tokenizers >= 0.20.
  void read_merges() {
    for (const json& m : tok_["model"].value("merges", json::array())) {
      if (m.is_string()) {
        v_.merges.push_back(m.get<std::string>());
      } else {
        v_.merges.push_back(m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
      }
    }
  }

  void read_special_tokens() {
    const auto [template_first, template_last] = template_specials();
    v_.bos_id = id_of(config_text("bos_token").value_or(template_first), "BOS");
    v_.eos_id = id_of(config_text("eos_token").value_or(template_last), "EOS");
    v_.pad_id = id_of(config_text("pad_token").value_or(""), "padding");
    v_.unk_id = id_of(text_or_null(tok_["model"].value("unk_token", json())), "unknown");
    v_.add_bos = config_.value("add_bos_token", !template_first.empty());
    v_.add_eos = config_.value("add_eos_token", !template_last.empty());
    read_eog_ids();
    read_chat_template();
  }

  void read_eog_ids() {
    if (v_.eos_id >= 0) v_.eog_ids.push_back(v_.eos_id);
    vocab_add_eog_texts(v_);
  }

  // tokenizer_config.json's template, or the "default" of a list of named templates.
  void read_chat_template() {
    const json& t = config_.value("chat_template", json());
    if (t.is_string()) v_.chat_template = t.get<std::string>();
    if (!t.is_array()) return;
    for (const json& named : t) {
      if (named.value("name", "") == "default") v_.chat_template = named.value("template", "");
    }
  }

  // The special tokens the post-processor puts before and after a single text
  // ("" where none): the BOS and EOS Hugging Face adds.
  std::pair<std::string, std::string> template_specials() const {
    const json& pp = tok_.value("post_processor", json());
    if (!pp.is_object()) return {};
    const json steps =
        pp.value("type", "") == "Sequence" ? pp.at("processors") : json::array({pp});
    for (const json& step : steps) {
      if (step.value("type", "") != "TemplateProcessing") continue;
      const json& single = step.at("single");
      if (single.empty()) return {};
      const auto special = [](const json& item) {
        return item.contains("SpecialToken") ? item["SpecialToken"].at("id").get<std::string>()
                                             : std::string();
      };
      return {special(single.front()), special(single.back())};
    }
    return {};
  }

  // tokenizer_config.json spells a token as its text or as an AddedToken object.
  std::optional<std::string> config_text(const char* key) const {
    if (!config_.contains(key)) return std::nullopt;
    return text_or_null(config_[key]);
  }

  static std::string text_or_null(const json& value) {
    if (value.is_string()) return value.get<std::string>();
    if (value.is_object()) return value.value("content", "");
    return "";
  }

  int32_t id_of(const std::string& text, const char* what) const {
    if (text.empty()) return -1;
    const auto it = ids_.find(text);
    if (it == ids_.end()) {
      fail(std::string(what) + " token '" + text + "' is not in the vocabulary");
    }
    return it->second;
  }

  const json& tok_;
  const json& config_;
  std::string name_;
  Vocab v_;
  std::unordered_map<std::string, int32_t> ids_;
};

json parse_json(std::string_view text, const std::string& name) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(name + ": not valid JSON: " + e.what());
  }
}

Vocab read_vocab(std::string_view tokenizer_json, std::string_view config_json,
                 const std::string& name) {
  const json tok = parse_json(tokenizer_json, name);
  const json config = config_json.empty() ? json::object() : parse_json(config_json, name);
  try {
    return Reader(tok, config, name).read();
  } catch (const json::exception& e) {
    // A field of an unexpected JSON type or a missing required one.
    throw Error(name + ": malformed tokenizer: " + e.what());
  }
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

}  // namespace

Vocab vocab_from_hf_tokenizer_json(const std::string& path) {
  const std::filesystem::path config = std::filesystem::path(path).parent_path() /
                                       "tokenizer_config.json";
  const std::string config_text = std::filesystem::exists(config) ? read_file(config) : "";
  return read_vocab(read_file(path), config_text, path);
}

Vocab vocab_from_hf_tokenizer_json_string(std::string_view tokenizer_json,
                                          std::string_view tokenizer_config_json) {
  return read_vocab(tokenizer_json, tokenizer_config_json, "tokenizer.json");
}

}  // namespace tsr
