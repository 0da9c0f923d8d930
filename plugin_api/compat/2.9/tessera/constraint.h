/* Constraint plugins for constrained decoding (structured output): a plugin compiles a
 * constraint (a JSON Schema, a regex, a GBNF grammar, ...) for the model's vocabulary,
 * and per request a matcher says which tokens may come next. The core applies the mask
 * before sampling, offers end-of-sequence tokens only where the matcher can terminate,
 * advances the matcher with every token it appends, and checks speculative drafts against
 * it (accept, then roll back). A constraint that fails to compile fails its request with
 * the plugin's message: the core never falls back to unconstrained output.
 *
 * A constraint plugin's tsr_plugin_desc has kind TSR_PLUGIN_CONSTRAINT and its `iface`
 * points at a static tsr_constraint_iface. Added in ABI 1.1: the host refuses constraint
 * plugins that claim ABI 1.0.
 *
 * Objects and ownership (all plugin-owned, freed by the matching *_destroy, which ignores
 * NULL):
 *   tsr_constraint_vocab  the vocabulary, preprocessed once per engine (tries, tables);
 *   tsr_grammar           one compiled constraint, immutable; the host caches it by
 *                         (kind, text) and shares it between requests;
 *   tsr_matcher           one request's position in a grammar.
 * A grammar may be destroyed before the matchers made from it, and a vocab before its
 * grammars: each object keeps what it needs of its parents alive.
 *
 * Thread-safety:
 *   - vocab_create / vocab_destroy are externally synchronized.
 *   - grammar_compile is thread-safe: the host compiles on worker threads, several at once,
 *     for the same vocab, while matchers of other grammars run.
 *   - matcher_create and the matcher entries of *different* matchers may run concurrently,
 *     also for the same grammar (whatever caches a grammar keeps are the plugin's to lock).
 *     One matcher is used by one thread at a time.
 *
 * Errors: every fallible entry returns tsr_status with an error object made through the
 * host services. A constraint using a feature the plugin does not support fails
 * grammar_compile with TSR_STATUS_UNSUPPORTED and a message that names the feature (e.g.
 * "unsupported JSON Schema keyword 'patternProperties' at /properties/a"); a malformed
 * constraint fails with TSR_STATUS_INVALID_ARGUMENT naming the problem.
 */
#ifndef TESSERA_CONSTRAINT_H
#define TESSERA_CONSTRAINT_H

#include "tessera/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_constraint_vocab tsr_constraint_vocab;
typedef struct tsr_grammar tsr_grammar;
typedef struct tsr_matcher tsr_matcher;

/* What a token is, for a constraint. */
typedef enum tsr_token_kind {
  TSR_TOKEN_TEXT = 0,    /* stands for its bytes (possibly part of a UTF-8 character) */
  TSR_TOKEN_SPECIAL = 1, /* control or unused token: never allowed under a constraint */
  TSR_TOKEN_EOS = 2      /* end of generation: allowed exactly where the grammar can end */
} tsr_token_kind;

/* The model's vocabulary as bytes. Every pointer is borrowed for the vocab_create call. */
typedef struct tsr_vocab_desc {
  size_t struct_size;
  int32_t n_tokens;
  int32_t reserved;
  const char* const* token_bytes; /* n_tokens entries; a text token's bytes (not
                                     NUL-terminated); can be NULL for other tokens */
  const uint32_t* token_lens;     /* n_tokens byte counts */
  const uint8_t* token_kinds;     /* n_tokens tsr_token_kind values */
  const tsr_ext_header* next;     /* can be NULL */
} tsr_vocab_desc;
TSR_ABI_PIN_SIZE(tsr_vocab_desc, 48);

/* Token masks are bitmasks of (n_tokens + 31) / 32 words: bit (id % 32) of word id / 32 is
 * set iff token id may come next. */
#define TSR_MASK_WORDS(n_tokens) (((size_t)(n_tokens) + 31u) / 32u)

/* Added in 2.3: the limits of one grammar_compile_limited call. */
typedef struct tsr_compile_limits {
  size_t struct_size;
  /* Nonzero once the compile must stop (its time budget ran out, the host shuts down).
   * Cheap (a clock read); called from the compiling thread only. */
  int32_t (*should_stop)(void* ctx);
  void* ctx;
  const tsr_ext_header* next; /* can be NULL */
} tsr_compile_limits;
TSR_ABI_PIN_SIZE(tsr_compile_limits, 32);

typedef struct tsr_constraint_iface {
  size_t struct_size;
  /* The constraint kinds this plugin compiles, comma-separated (e.g.
   * "json_schema,json_object"). Kinds Tessera's API uses: json_schema (text: a JSON
   * Schema), json_object (any JSON object; text ignored), regex (the whole output matches),
   * gbnf (llama.cpp's grammar format, root rule "root"), tool_call (function calls: a JSON
   * spec of one call's schema and the chat format's text around calls; see the SDK README). */
  const char* kinds;

  tsr_status (*vocab_create)(const tsr_vocab_desc* desc, tsr_constraint_vocab** out,
                             tsr_error** error);
  void (*vocab_destroy)(tsr_constraint_vocab* vocab);

  /* Compiles `text` (text_len bytes, need not be NUL-terminated) as a constraint of
   * `kind` (NUL-terminated, one of `kinds`). Thread-safe. */
  tsr_status (*grammar_compile)(tsr_constraint_vocab* vocab, const char* kind,
                                const char* text, size_t text_len, tsr_grammar** out,
                                tsr_error** error);
  void (*grammar_destroy)(tsr_grammar* grammar);

  /* A matcher at the start of the grammar. */
  tsr_status (*matcher_create)(tsr_grammar* grammar, tsr_matcher** out, tsr_error** error);
  void (*matcher_destroy)(tsr_matcher* matcher);
  /* An independent copy of the matcher's position and history (OpenAI n > 1, beams). */
  tsr_status (*matcher_fork)(const tsr_matcher* matcher, tsr_matcher** out, tsr_error** error);

  /* Writes the mask of tokens allowed next into `bitmask` (n_words words, at least
   * TSR_MASK_WORDS(n_tokens)); EOS tokens are set iff the grammar can end here. A
   * terminated matcher allows nothing. */
  tsr_status (*matcher_fill_mask)(tsr_matcher* matcher, uint32_t* bitmask, size_t n_words,
                                  tsr_error** error);
  /* Advances by one token: returns 1 if the token is allowed (and the matcher moved), 0 if
   * not (and the matcher is unchanged). Accepting an EOS token terminates the matcher. */
  int32_t (*matcher_accept)(tsr_matcher* matcher, int32_t token);
  /* Undoes the last n accepted tokens (speculative drafts the target rejected). Fails with
   * TSR_STATUS_INVALID_ARGUMENT, changing nothing, if fewer than n were accepted. */
  tsr_status (*matcher_rollback)(tsr_matcher* matcher, size_t n, tsr_error** error);
  /* 1 once an EOS token was accepted. */
  int32_t (*matcher_is_terminated)(const tsr_matcher* matcher);
  /* 1 if the output so far is complete (an EOS token would be accepted). */
  int32_t (*matcher_can_terminate)(const tsr_matcher* matcher);

  /* Optional (can be NULL): the bytes that must come next whatever the model says (e.g.
   * the rest of a property name), for jump-forward decoding. Writes up to `capacity` bytes
   * to `buf` and their count to *len (0: nothing forced). Does not advance the matcher. */
  tsr_status (*matcher_forced_bytes)(tsr_matcher* matcher, char* buf, size_t capacity,
                                     size_t* len, tsr_error** error);

  /* Added in 2.3; both optional (NULL, or absent from a shorter table: the host then calls
   * grammar_compile without limits and counts a grammar's bytes as unknown). */

  /* grammar_compile under the host's limits: the plugin polls limits->should_stop from the
   * compiling thread at least every few milliseconds of work, and once it returns nonzero
   * fails the compile with TSR_STATUS_CANCELLED (the host says which limit ran out). */
  tsr_status (*grammar_compile_limited)(tsr_constraint_vocab* vocab, const char* kind,
                                        const char* text, size_t text_len,
                                        const tsr_compile_limits* limits,
                                        tsr_grammar** out, tsr_error** error);
  /* The memory the grammar holds now, in bytes: its automaton and whatever caches it has
   * filled since (they grow as matchers run, within bounds the plugin keeps), but not what
   * it shares with other grammars (the vocab). The host bounds its cache of compiled
   * grammars by these. Thread-safe, also while matchers of the grammar run. */
  size_t (*grammar_bytes)(const tsr_grammar* grammar);
} tsr_constraint_iface;
TSR_ABI_PIN_SIZE(tsr_constraint_iface, 136);
/* The size of a 1.1 ... 2.2 table. */
#define TSR_CONSTRAINT_IFACE_SIZE_V1_1 TSR_SIZE_THROUGH(tsr_constraint_iface, matcher_forced_bytes)

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_CONSTRAINT_H */
