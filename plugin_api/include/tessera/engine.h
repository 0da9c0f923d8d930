/* The embedding API of the Tessera core: what applications, bindings and servers call.
 *
 * Ownership: objects returned through an out-parameter belong to the caller, who frees
 * them with the matching *_destroy / *_free function. Strings passed in are borrowed for
 * the duration of the call unless stated otherwise.
 *
 * Errors: every fallible call returns tsr_status; when `error` is not NULL and the call
 * fails, *error receives an error object (free it with tsr_error_free).
 *
 * Thread-safety: a tsr_engine is externally synchronized in this version: one call at a
 * time per engine. tsr_error_* functions are thread-safe on distinct errors.
 */
#ifndef TESSERA_ENGINE_H
#define TESSERA_ENGINE_H

#include "tessera/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_engine tsr_engine;

/* ---- errors ---- */
tsr_status tsr_error_status(const tsr_error* error);
/* NUL-terminated message, valid until tsr_error_free. */
const char* tsr_error_message(const tsr_error* error);
void tsr_error_free(tsr_error* error); /* NULL is ignored */

/* ---- engine ---- */
typedef struct tsr_engine_params {
  size_t struct_size;
  const char* config_path; /* TOML file; can be NULL */
  const char* config_toml; /* TOML text, used when config_path is NULL; can be NULL */
  const char* model_path;  /* overrides [model] path; can be NULL */
  const char* plugin_dir;  /* overrides plugin_dir; can be NULL */
  int32_t n_threads;       /* overrides [backend] threads when > 0 */
  int32_t reserved;
} tsr_engine_params;
TSR_ABI_PIN_SIZE(tsr_engine_params, 48);

tsr_engine_params tsr_engine_default_params(void);

/* Loads the configuration, the backend plugin, the model and its tokenizer. On success
 * *out owns the engine; free it with tsr_engine_destroy. */
tsr_status tsr_engine_create(const tsr_engine_params* params, tsr_engine** out,
                             tsr_error** error);
void tsr_engine_destroy(tsr_engine* engine); /* NULL is ignored */

/* ---- tokenization ---- */
/* Writes up to `capacity` ids to `ids` and the full count to *n_ids (call with
 * capacity 0 to size the array). add_special adds BOS as the model prescribes. */
tsr_status tsr_engine_tokenize(tsr_engine* engine, const char* text, size_t text_len,
                               int32_t add_special, int32_t* ids, size_t capacity,
                               size_t* n_ids, tsr_error** error);

/* ---- generation ---- */
typedef enum tsr_finish_reason {
  TSR_FINISH_NONE = 0,
  TSR_FINISH_STOP = 1,   /* an end-of-generation token */
  TSR_FINISH_LENGTH = 2, /* max_tokens or the context length */
  TSR_FINISH_ABORT = 3,  /* the callback asked to stop */
  TSR_FINISH_ERROR = 4
} tsr_finish_reason;

typedef struct tsr_generate_params {
  size_t struct_size;
  int32_t max_tokens;  /* default 128 */
  float temperature;   /* 0 = greedy; default 0.8 */
  uint64_t seed;       /* used when has_seed */
  int32_t has_seed;    /* 0: a random seed (logged) */
  int32_t ignore_eos;  /* nonzero: end-of-generation tokens do not stop */
} tsr_generate_params;
TSR_ABI_PIN_SIZE(tsr_generate_params, 32);

tsr_generate_params tsr_generate_default_params(void);

/* Called once per generated token with the bytes it adds to the text (possibly an
 * incomplete UTF-8 sequence, possibly empty). Return nonzero to stop generating. */
typedef int32_t (*tsr_token_callback)(void* user_data, int32_t token, const char* piece,
                                      size_t piece_len);

typedef struct tsr_generate_result {
  size_t struct_size;
  int32_t prompt_tokens;
  int32_t completion_tokens;
  tsr_finish_reason finish_reason;
  int32_t reserved;
  double prompt_ms; /* time to process the prompt (first token) */
  double decode_ms; /* time for the remaining tokens */
} tsr_generate_result;
TSR_ABI_PIN_SIZE(tsr_generate_result, 40);

/* Generates a continuation of `prompt` (BOS added as the model prescribes).
 * `callback` can be NULL; `result` can be NULL, otherwise its struct_size must be set. */
tsr_status tsr_engine_generate(tsr_engine* engine, const char* prompt, size_t prompt_len,
                               const tsr_generate_params* params, tsr_token_callback callback,
                               void* user_data, tsr_generate_result* result,
                               tsr_error** error);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_ENGINE_H */
