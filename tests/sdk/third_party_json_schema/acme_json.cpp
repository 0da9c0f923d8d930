// acme_json: a JSON Schema constraint plugin as a third party would write one, against
// the installed SDK only (Tessera's own constraints library is not installed). It serves
// kind "json_schema" for a subset of JSON Schema:
//   type object (properties, required, additionalProperties: false), string (maxLength),
//   integer (up to 15 digits), boolean, and enum of strings;
//   title, description, $schema, $id, $comment, examples and default are annotations.
// Anything else fails with TSR_STATUS_UNSUPPORTED naming the keyword and where it is.
// Output is compact JSON with properties in schema order (each optional one may be left
// out) and no additional properties: a subset of the valid instances, which is all
// constrained decoding needs.
//
// The schema becomes a byte-level NFA, determinized once at compile time; a matcher is
// a DFA state per step, so fork is a copy and rollback a resize.
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/sdk/constraint.hpp"

namespace {

using Json = nlohmann::ordered_json;  // keeps `properties` in the schema's order
using tsr::sdk::Failure;

[[noreturn]] void unsupported(const std::string& what, const std::string& path) {
  throw Failure(TSR_STATUS_UNSUPPORTED, what + " at " + (path.empty() ? "/" : path));
}
[[noreturn]] void malformed(const std::string& what, const std::string& path) {
  throw Failure(TSR_STATUS_INVALID_ARGUMENT, what + " at " + (path.empty() ? "/" : path));
}

// ---- automata ----

struct ByteRange {
  uint8_t lo, hi;
};

// A byte-level NFA built backwards: each piece is compiled knowing the state that follows
// it, so a continuation shared by several paths (optional properties) is built once.
class Nfa {
 public:
  static constexpr int kAccept = 0;

  int state() {
    states_.emplace_back();
    return static_cast<int>(states_.size()) - 1;
  }
  void epsilon(int from, int to) { states_[from].eps.push_back(to); }

  // One byte in `r`, then `next`.
  int byte(ByteRange r, int next) {
    const int s = state();
    states_[s].edges.push_back({r, next});
    return s;
  }
  // Bytes in each range in turn, then `next`.
  int bytes(std::span<const ByteRange> seq, int next) {
    for (size_t i = seq.size(); i-- > 0;) next = byte(seq[i], next);
    return next;
  }
  int literal(std::string_view s, int next) {
    for (size_t i = s.size(); i-- > 0;) {
      const auto c = static_cast<uint8_t>(s[i]);
      next = byte({c, c}, next);
    }
    return next;
  }
  int either(std::initializer_list<int> starts) { return either(std::vector<int>(starts)); }
  int either(const std::vector<int>& starts) {
    const int s = state();
    for (const int t : starts) epsilon(s, t);
    return s;
  }

  struct Edge {
    ByteRange range;
    int to;
  };
  struct State {
    std::vector<Edge> edges;
    std::vector<int> eps;
  };
  const std::vector<State>& states() const { return states_; }

 private:
  std::vector<State> states_{1};  // states_[kAccept]: the end of the whole output
};

// The automaton matchers run: next[state * 256 + byte] is the following state, -1 none.
// Every state can still reach an accepting one (the NFA has no dead ends), so a byte the
// table takes never leads the output into a corner.
struct Dfa {
  std::vector<int32_t> next;
  std::vector<bool> accepting;

  int32_t walk(int32_t state, std::string_view bytes) const {
    for (const char c : bytes) {
      if (state < 0) break;
      state = next[static_cast<size_t>(state) * 256 + static_cast<uint8_t>(c)];
    }
    return state;
  }
};

constexpr size_t kMaxDfaStates = 1 << 15;  // 256 next states each: 32 MiB at most

std::vector<int> closure(const Nfa& nfa, std::vector<int> set) {
  for (size_t i = 0; i < set.size(); ++i) {
    for (const int t : nfa.states()[set[i]].eps) {
      if (std::find(set.begin(), set.end(), t) == set.end()) set.push_back(t);
    }
  }
  std::sort(set.begin(), set.end());
  return set;
}

// Subset construction; DFA state 0 is the start.
Dfa determinize(const Nfa& nfa, int start) {
  Dfa dfa;
  std::map<std::vector<int>, int32_t> ids;
  std::vector<std::vector<int>> sets = {closure(nfa, {start})};
  ids[sets[0]] = 0;
  for (size_t d = 0; d < sets.size(); ++d) {
    if (sets.size() > kMaxDfaStates) unsupported("a schema this large", "");
    dfa.accepting.push_back(std::binary_search(sets[d].begin(), sets[d].end(), Nfa::kAccept));
    for (int b = 0; b < 256; ++b) {
      std::vector<int> moved;
      for (const int s : sets[d]) {
        for (const Nfa::Edge& e : nfa.states()[s].edges) {
          if (b >= e.range.lo && b <= e.range.hi) moved.push_back(e.to);
        }
      }
      int32_t id = -1;
      if (!moved.empty()) {
        const auto next_id = static_cast<int32_t>(sets.size());
        auto [it, added] = ids.emplace(closure(nfa, std::move(moved)), next_id);
        if (added) sets.push_back(it->first);
        id = it->second;
      }
      dfa.next.push_back(id);
    }
  }
  return dfa;
}

// ---- JSON Schema → NFA ----

class SchemaCompiler {
 public:
  explicit SchemaCompiler(Nfa& nfa) : nfa_(nfa) {}

  int value(const Json& s, const std::string& path, int next) {
    if (!s.is_object()) malformed("a schema that is not an object", path);
    if (s.contains("enum")) return enumeration(s, path, next);
    if (!s.contains("type")) unsupported("a schema without 'type' or 'enum'", path);
    if (!s["type"].is_string()) unsupported("'type' other than one name", path);
    const std::string type = s["type"];
    if (type == "object") return object(s, path, next);
    if (type == "string") return string(s, path, next);
    if (type == "integer") {
      only(s, path, {});
      return integer(next);
    }
    if (type == "boolean") {
      only(s, path, {});
      return nfa_.either({nfa_.literal("true", next), nfa_.literal("false", next)});
    }
    if (type == "number" || type == "array" || type == "null") unsupported("type '" + type + "'", path);
    malformed("unknown type '" + type + "'", path);
  }

 private:
  // Refuses keywords other than `allowed` ("type" always is) and annotations.
  static void only(const Json& s, const std::string& path, std::initializer_list<std::string_view> allowed) {
    static constexpr std::array<std::string_view, 8> kAnnotations = {
        "type", "title", "description", "$schema", "$id", "$comment", "examples", "default"};
    for (const auto& [key, _] : s.items()) {
      if (std::find(kAnnotations.begin(), kAnnotations.end(), key) != kAnnotations.end()) continue;
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      unsupported("unsupported JSON Schema keyword '" + key + "'", path);
    }
  }

  // JSON pointer escaping of one path segment.
  static std::string segment(std::string key) {
    for (size_t at = 0; (at = key.find_first_of("~/", at)) != std::string::npos; at += 2) {
      key.replace(at, 1, key[at] == '~' ? "~0" : "~1");
    }
    return "/" + key;
  }

  int enumeration(const Json& s, const std::string& path, int next) {
    only(s, path, {"enum"});
    if (s.contains("type") && s["type"] != "string") unsupported("enum with a type other than string", path);
    const Json& values = s["enum"];
    if (!values.is_array() || values.empty()) malformed("'enum' that is not a non-empty array", path);
    std::vector<int> starts;
    for (const Json& v : values) {
      if (!v.is_string()) unsupported("enum values other than strings", path + "/enum");
      starts.push_back(nfa_.literal(v.dump(), next));
    }
    return nfa_.either(starts);
  }

  // Members in schema order; an optional one may be left out. after[i][first]: the rest
  // from member i on, `first` when no member was written yet (so no comma comes first).
  int object(const Json& s, const std::string& path, int next) {
    only(s, path, {"properties", "required", "additionalProperties"});
    if (s.contains("additionalProperties") && s["additionalProperties"] != false) {
      unsupported("additionalProperties other than false", path);
    }
    const Json properties = s.value("properties", Json::object());
    if (!properties.is_object()) malformed("'properties' that is not an object", path);
    const Json required = s.value("required", Json::array());
    if (!required.is_array()) malformed("'required' that is not an array", path);
    for (const Json& r : required) {
      if (!r.is_string()) malformed("'required' with a non-string entry", path);
      if (!properties.contains(r.get<std::string>())) {
        unsupported("required property '" + r.get<std::string>() + "' missing from properties", path);
      }
    }
    std::vector<std::pair<std::string, Json>> members;
    for (const auto& [key, schema] : properties.items()) members.emplace_back(key, schema);
    std::vector<std::array<int, 2>> after(members.size() + 1);
    after.back().fill(nfa_.literal("}", next));
    for (size_t i = members.size(); i-- > 0;) {
      const auto& [key, schema] = members[i];
      const int v = value(schema, path + "/properties" + segment(key), after[i + 1][0]);
      const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
      for (const int first : {0, 1}) {
        const int member = nfa_.literal((first ? "" : ",") + Json(key).dump() + ":", v);
        after[i][first] = is_required ? member : nfa_.either({member, after[i + 1][first]});
      }
    }
    return nfa_.literal("{", after[0][1]);
  }

  int string(const Json& s, const std::string& path, int next) {
    only(s, path, {"maxLength"});
    const int close = nfa_.literal("\"", next);
    if (!s.contains("maxLength")) {
      const int loop = nfa_.state();  // any number of characters, then the quote
      nfa_.epsilon(loop, close);
      nfa_.epsilon(loop, character(loop));
      return nfa_.literal("\"", loop);
    }
    const Json& max = s["maxLength"];
    if (!max.is_number_unsigned()) malformed("'maxLength' that is not a non-negative integer", path);
    if (max.get<uint64_t>() > 1024) unsupported("maxLength above 1024", path);
    int rest = close;  // up to max characters: each may be the last
    for (uint64_t i = 0; i < max.get<uint64_t>(); ++i) rest = nfa_.either({close, character(rest)});
    return nfa_.literal("\"", rest);
  }

  // One character inside a JSON string: printable ASCII but " and \, an escape, or a
  // well-formed UTF-8 sequence (never a stray or overlong byte).
  int character(int next) {
    static constexpr ByteRange kCont{0x80, 0xBF};
    static const std::vector<std::vector<ByteRange>> kSequences = {
        {{0x20, 0x21}}, {{0x23, 0x5B}}, {{0x5D, 0x7F}},
        {{0xC2, 0xDF}, kCont},
        {{0xE0, 0xE0}, {0xA0, 0xBF}, kCont}, {{0xE1, 0xEC}, kCont, kCont},
        {{0xED, 0xED}, {0x80, 0x9F}, kCont}, {{0xEE, 0xEF}, kCont, kCont},
        {{0xF0, 0xF0}, {0x90, 0xBF}, kCont, kCont}, {{0xF1, 0xF3}, kCont, kCont, kCont},
        {{0xF4, 0xF4}, {0x80, 0x8F}, kCont, kCont}};
    std::vector<int> starts;
    for (const auto& seq : kSequences) starts.push_back(nfa_.bytes(seq, next));
    for (const char c : std::string_view("\"\\/bfnrt")) {
      starts.push_back(nfa_.literal(std::string("\\") + c, next));
    }
    int hex = next;
    for (int i = 0; i < 4; ++i) {
      hex = nfa_.either(
          {nfa_.byte({'0', '9'}, hex), nfa_.byte({'a', 'f'}, hex), nfa_.byte({'A', 'F'}, hex)});
    }
    starts.push_back(nfa_.literal("\\u", hex));
    return nfa_.either(starts);
  }

  // -?(0|[1-9][0-9]{0,14}): at most 15 digits, so that a model cannot run on forever.
  int integer(int next) {
    int more = next;
    for (int i = 0; i < 14; ++i) more = nfa_.either({next, nfa_.byte({'0', '9'}, more)});
    const int magnitude = nfa_.either({nfa_.literal("0", next), nfa_.byte({'1', '9'}, more)});
    return nfa_.either({nfa_.literal("-", magnitude), magnitude});
  }

  Nfa& nfa_;
};

// ---- the plugin ----

class AcmeJson {
 public:
  static constexpr const char* kKinds = "json_schema";

  struct Vocab {
    std::vector<std::string> bytes;
    std::vector<uint8_t> kinds;
  };

  struct Grammar {
    std::shared_ptr<const Vocab> vocab;
    Dfa dfa;
  };

  class Matcher {
   public:
    explicit Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {}

    void fill_mask(std::span<uint32_t> words) {
      for (size_t id = 0; id < g_->vocab->kinds.size(); ++id) {
        if (allowed(id)) words[id / 32] |= 1u << (id % 32);
      }
    }

    bool accept(int32_t token) {
      if (token < 0 || static_cast<size_t>(token) >= g_->vocab->kinds.size()) return false;
      if (!allowed(static_cast<size_t>(token))) return false;
      if (g_->vocab->kinds[token] == TSR_TOKEN_EOS) {
        terminated_ = true;
      } else {
        states_.push_back(g_->dfa.walk(states_.back(), g_->vocab->bytes[token]));
      }
      return true;
    }

    bool rollback(size_t n) {
      if (n > states_.size() - 1 + (terminated_ ? 1 : 0)) return false;
      if (n > 0 && terminated_) {
        terminated_ = false;  // EOS is always the last step
        --n;
      }
      states_.resize(states_.size() - n);
      return true;
    }

    bool is_terminated() const { return terminated_; }
    bool can_terminate() const { return !terminated_ && g_->dfa.accepting[states_.back()]; }

   private:
    bool allowed(size_t id) const {
      if (terminated_) return false;
      const Vocab& v = *g_->vocab;
      if (v.kinds[id] == TSR_TOKEN_EOS) return g_->dfa.accepting[states_.back()];
      if (v.kinds[id] != TSR_TOKEN_TEXT || v.bytes[id].empty()) return false;
      return g_->dfa.walk(states_.back(), v.bytes[id]) >= 0;
    }

    std::shared_ptr<const Grammar> g_;
    std::vector<int32_t> states_{0};  // the DFA state after each step; [0] the start
    bool terminated_ = false;
  };

  static std::shared_ptr<Vocab> vocab_create(const tsr_vocab_desc& d) {
    auto v = std::make_shared<Vocab>();
    v->kinds.assign(d.token_kinds, d.token_kinds + d.n_tokens);
    v->bytes.resize(static_cast<size_t>(d.n_tokens));
    for (int32_t i = 0; i < d.n_tokens; ++i) {
      if (d.token_kinds[i] == TSR_TOKEN_TEXT && d.token_lens[i] > 0) {
        v->bytes[i].assign(d.token_bytes[i], d.token_lens[i]);
      }
    }
    return v;
  }

  static std::shared_ptr<Grammar> compile(const std::shared_ptr<Vocab>& vocab, std::string_view,
                                          std::string_view text) {
    const Json schema = Json::parse(text.begin(), text.end(), nullptr, false);
    if (schema.is_discarded()) {
      throw Failure(TSR_STATUS_INVALID_ARGUMENT, "the JSON Schema is not valid JSON");
    }
    Nfa nfa;
    const int start = SchemaCompiler(nfa).value(schema, "", Nfa::kAccept);
    return std::make_shared<Grammar>(Grammar{vocab, determinize(nfa, start)});
  }

  static Matcher matcher_create(const std::shared_ptr<Grammar>& g) { return Matcher(g); }
};

}  // namespace

TSR_SDK_CONSTRAINT_PLUGIN(AcmeJson, "acme_json", "1.0.0")
