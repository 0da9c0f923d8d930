// ConstraintPlugin<Impl>: fills a tsr_constraint_iface from C++ classes (see
// sdk/templates/constraint). Needs ABI 1.1.
//
// Impl provides:
//   static constexpr const char* kKinds = "json_schema,json_object";  // what it compiles
//   struct Vocab;    // the preprocessed vocabulary
//   struct Grammar;  // one compiled constraint; immutable, shared by matchers
//   struct Matcher;  // copyable (fork copies it); used by one thread at a time
//   static std::shared_ptr<Vocab> vocab_create(const tsr_vocab_desc&);
//   // Throws sdk::Failure(TSR_STATUS_UNSUPPORTED, "... names the feature ...") for what it
//   // cannot compile; must be thread-safe.
//   static std::shared_ptr<Grammar> compile(const std::shared_ptr<Vocab>&,
//                                           std::string_view kind, std::string_view text);
//   static Matcher matcher_create(const std::shared_ptr<Grammar>&);
// and Matcher provides:
//   void fill_mask(std::span<uint32_t> words);   // exactly TSR_MASK_WORDS(n_tokens) words
//   bool accept(int32_t token);                  // false: refused, unchanged
//   bool rollback(size_t n);                     // false: fewer than n accepted
//   bool is_terminated() const;
//   bool can_terminate() const;
//   size_t forced_bytes(std::span<char> buf);    // optional: enables matcher_forced_bytes
// Optional, ABI 2.3:
//   // compile under the host's limits: poll should_stop() in long loops (every millisecond
//   // or so) and throw sdk::Failure(TSR_STATUS_CANCELLED, ...) once it is true; enables
//   // grammar_compile_limited
//   static std::shared_ptr<Grammar> compile(const std::shared_ptr<Vocab>&, std::string_view kind,
//                                           std::string_view text,
//                                           const std::function<bool()>& should_stop);
//   size_t Grammar::bytes() const;  // memory held now, caches included; enables grammar_bytes
//
// The generated entries keep objects alive in the order the ABI promises (a matcher keeps
// its grammar, a grammar its vocab), check handles, sizes and kinds, and turn every
// exception into a status and error object.
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "tessera/constraint.h"
#include "tessera/sdk/plugin.hpp"

namespace tsr::sdk {

// Whether `kind` is one of the comma-separated `kinds`.
inline bool kind_listed(std::string_view kinds, std::string_view kind) {
  while (!kinds.empty()) {
    const size_t comma = kinds.find(',');
    if (kinds.substr(0, comma) == kind) return true;
    kinds = comma == std::string_view::npos ? std::string_view() : kinds.substr(comma + 1);
  }
  return false;
}

template <class Impl>
class ConstraintPlugin {
  using Vocab = typename Impl::Vocab;
  using Grammar = typename Impl::Grammar;
  using Matcher = typename Impl::Matcher;

  // Handles box the C++ objects with what the C entries need to check their arguments.
  struct VocabBox {
    std::shared_ptr<Vocab> vocab;
    size_t mask_words;
  };
  struct GrammarBox {
    std::shared_ptr<Grammar> grammar;
    size_t mask_words;
  };
  struct MatcherBox {
    std::shared_ptr<Grammar> grammar;  // outlives the grammar handle
    Matcher matcher;
    size_t mask_words;
  };

 public:
  static const tsr_plugin_desc& desc(const char* name, const char* version) {
    static const tsr_plugin_desc d = describe(TSR_PLUGIN_CONSTRAINT, name, version, &iface());
    return d;
  }

  static const tsr_constraint_iface& iface() {
    static const tsr_constraint_iface t = {
        sizeof(tsr_constraint_iface), Impl::kKinds, vocab_create, vocab_destroy,
        grammar_compile, grammar_destroy, matcher_create, matcher_destroy, matcher_fork,
        matcher_fill_mask, matcher_accept, matcher_rollback, matcher_is_terminated,
        matcher_can_terminate, forced_bytes_entry(),
#if TSR_SDK_ABI_AT_LEAST(2, 3)
        compile_limited_entry(), grammar_bytes_entry(),
#endif
    };
    return t;
  }

 private:
  static tsr_status vocab_create(const tsr_vocab_desc* desc, tsr_constraint_vocab** out,
                                 tsr_error** error) {
    return boundary(error, [&] {
      const tsr_vocab_desc& d = checked(desc, "vocab_create");
      require(out != nullptr, "vocab_create: out is NULL");
      require(d.n_tokens > 0, "vocab_create: n_tokens must be positive");
      require(d.token_lens != nullptr && d.token_kinds != nullptr,
              "vocab_create: token_lens and token_kinds are required");
      for (int32_t i = 0; i < d.n_tokens; ++i) {
        require(d.token_kinds[i] <= TSR_TOKEN_EOS,
                "vocab_create: token " + std::to_string(i) + " has an unknown kind");
        require(d.token_kinds[i] != TSR_TOKEN_TEXT || d.token_lens[i] == 0 ||
                    (d.token_bytes != nullptr && d.token_bytes[i] != nullptr),
                "vocab_create: text token " + std::to_string(i) + " has no bytes");
      }
      *out = to_handle<tsr_constraint_vocab>(
          new VocabBox{Impl::vocab_create(d), TSR_MASK_WORDS(d.n_tokens)});
    });
  }

  static void vocab_destroy(tsr_constraint_vocab* v) { delete from_handle<VocabBox>(v); }

  static tsr_status grammar_compile(tsr_constraint_vocab* v, const char* kind, const char* text,
                                    size_t text_len, tsr_grammar** out, tsr_error** error) {
    return boundary(error, [&] {
      compile_into(v, kind, text, text_len, out, [](auto& vocab, std::string_view k, std::string_view t) {
        return Impl::compile(vocab, k, t);
      });
    });
  }

  // The checks and the boxing both compile entries share, around `compile`.
  template <class Compile>
  static void compile_into(tsr_constraint_vocab* v, const char* kind, const char* text,
                           size_t text_len, tsr_grammar** out, Compile&& compile) {
    VocabBox& box = object<VocabBox>(v, "grammar_compile: vocab");
    require(out != nullptr, "grammar_compile: out is NULL");
    require(kind != nullptr, "grammar_compile: kind is NULL");
    require(text != nullptr || text_len == 0, "grammar_compile: text is NULL");
    if (!kind_listed(Impl::kKinds, kind)) {
      throw Failure(TSR_STATUS_UNSUPPORTED, std::string("constraint kind '") + kind +
                                                "' is not one this plugin compiles (" +
                                                Impl::kKinds + ")");
    }
    auto grammar = compile(box.vocab, kind, std::string_view(text, text_len));
    *out = to_handle<tsr_grammar>(new GrammarBox{std::move(grammar), box.mask_words});
  }

  static void grammar_destroy(tsr_grammar* g) { delete from_handle<GrammarBox>(g); }

#if TSR_SDK_ABI_AT_LEAST(2, 3)
  static constexpr auto compile_limited_entry() {
    using Entry = decltype(tsr_constraint_iface::grammar_compile_limited);
    if constexpr (requires(const std::shared_ptr<Vocab>& v, const std::function<bool()>& stop) {
                    Impl::compile(v, std::string_view(), std::string_view(), stop);
                  }) {
      return Entry(grammar_compile_limited);
    } else {
      return Entry(nullptr);
    }
  }

  static tsr_status grammar_compile_limited(tsr_constraint_vocab* v, const char* kind,
                                            const char* text, size_t text_len,
                                            const tsr_compile_limits* limits, tsr_grammar** out,
                                            tsr_error** error) {
    return boundary(error, [&] {
      const tsr_compile_limits& l = checked(limits, "grammar_compile_limited");
      require(l.should_stop != nullptr, "grammar_compile_limited: should_stop is NULL");
      const std::function<bool()> stop = [&l] { return l.should_stop(l.ctx) != 0; };
      compile_into(v, kind, text, text_len, out, [&](auto& vocab, std::string_view k, std::string_view t) {
        return Impl::compile(vocab, k, t, stop);
      });
    });
  }

  static constexpr auto grammar_bytes_entry() {
    using Entry = decltype(tsr_constraint_iface::grammar_bytes);
    if constexpr (requires(const Grammar& g) { size_t{g.bytes()}; }) {
      return Entry(grammar_bytes);
    } else {
      return Entry(nullptr);
    }
  }

  static size_t grammar_bytes(const tsr_grammar* g) {
    if (g == nullptr) return 0;
    try {
      return from_handle<const GrammarBox>(g)->grammar->bytes();
    } catch (...) {
      return 0;  // unknown, as for a plugin without the entry
    }
  }
#endif

  static tsr_status matcher_create(tsr_grammar* g, tsr_matcher** out, tsr_error** error) {
    return boundary(error, [&] {
      GrammarBox& box = object<GrammarBox>(g, "matcher_create: grammar");
      require(out != nullptr, "matcher_create: out is NULL");
      *out = to_handle<tsr_matcher>(
          new MatcherBox{box.grammar, Impl::matcher_create(box.grammar), box.mask_words});
    });
  }

  static void matcher_destroy(tsr_matcher* m) { delete from_handle<MatcherBox>(m); }

  static tsr_status matcher_fork(const tsr_matcher* m, tsr_matcher** out, tsr_error** error) {
    return boundary(error, [&] {
      require(m != nullptr && out != nullptr, "matcher_fork: matcher or out is NULL");
      *out = to_handle<tsr_matcher>(new MatcherBox(*from_handle<const MatcherBox>(m)));
    });
  }

  static tsr_status matcher_fill_mask(tsr_matcher* m, uint32_t* bitmask, size_t n_words,
                                      tsr_error** error) {
    return boundary(error, [&] {
      MatcherBox& box = object<MatcherBox>(m, "fill_mask: matcher");
      require(bitmask != nullptr, "fill_mask: bitmask is NULL");
      require(n_words >= box.mask_words, "fill_mask: the bitmask has " + std::to_string(n_words) +
                                             " words, the vocabulary needs " +
                                             std::to_string(box.mask_words));
      std::memset(bitmask, 0, n_words * sizeof(uint32_t));
      box.matcher.fill_mask(std::span(bitmask, box.mask_words));
    });
  }

  static int32_t matcher_accept(tsr_matcher* m, int32_t token) {
    if (m == nullptr) return 0;
    try {
      return from_handle<MatcherBox>(m)->matcher.accept(token) ? 1 : 0;
    } catch (...) {
      return 0;  // refusing is the safe answer: the host then fails the request
    }
  }

  static tsr_status matcher_rollback(tsr_matcher* m, size_t n, tsr_error** error) {
    return boundary(error, [&] {
      MatcherBox& box = object<MatcherBox>(m, "rollback: matcher");
      require(box.matcher.rollback(n),
              "rollback: fewer than " + std::to_string(n) + " tokens were accepted");
    });
  }

  static int32_t matcher_is_terminated(const tsr_matcher* m) {
    return m != nullptr && from_handle<const MatcherBox>(m)->matcher.is_terminated() ? 1 : 0;
  }

  static int32_t matcher_can_terminate(const tsr_matcher* m) {
    return m != nullptr && from_handle<const MatcherBox>(m)->matcher.can_terminate() ? 1 : 0;
  }

  static constexpr auto forced_bytes_entry() {
    using Entry = tsr_status (*)(tsr_matcher*, char*, size_t, size_t*, tsr_error**);
    if constexpr (requires(Matcher& mm, std::span<char> b) { mm.forced_bytes(b); }) {
      return Entry(matcher_forced_bytes);
    } else {
      return Entry(nullptr);
    }
  }

  static tsr_status matcher_forced_bytes(tsr_matcher* m, char* buf, size_t capacity,
                                         size_t* len, tsr_error** error) {
    return boundary(error, [&] {
      MatcherBox& box = object<MatcherBox>(m, "forced_bytes: matcher");
      require(len != nullptr && (buf != nullptr || capacity == 0),
              "forced_bytes: buf or len is NULL");
      *len = box.matcher.forced_bytes(std::span(buf, capacity));
    });
  }
};

}  // namespace tsr::sdk

// Defines tsr_plugin_query for constraint class `Impl` named `name` (the file is
// libtessera_constraint_<name>.so).
#define TSR_SDK_CONSTRAINT_PLUGIN(Impl, name, version) \
  TSR_SDK_DEFINE_QUERY(::tsr::sdk::ConstraintPlugin<Impl>, name, version)
