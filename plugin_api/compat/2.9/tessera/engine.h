/* The embedding API of the Tessera core: what applications, bindings and servers call.
 *
 * Ownership: objects returned through an out-parameter belong to the caller, who frees
 * them with the matching *_destroy / *_free function. Strings passed in are borrowed for
 * the duration of the call unless stated otherwise.
 *
 * Errors: every fallible call returns tsr_status; when `error` is not NULL and the call
 * fails, *error receives an error object (free it with tsr_error_free).
 *
 * Thread-safety: submit, cancel, poll, get_stats and generate are thread-safe; step is
 * for one thread at a time and not while the background thread runs; create, destroy,
 * start and stop are externally synchronized. tsr_error_* are thread-safe on distinct
 * errors. Callbacks run on the stepping thread and must not call step.
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

/* ---- requests ---- */
typedef uint64_t tsr_request_id;

typedef enum tsr_finish_reason {
  TSR_FINISH_NONE = 0,
  TSR_FINISH_STOP = 1,   /* an end-of-generation token or a stop string */
  TSR_FINISH_LENGTH = 2, /* max_tokens, the context length or the request's deadline */
  TSR_FINISH_ABORT = 3,  /* cancelled, or the callback asked to stop */
  TSR_FINISH_ERROR = 4
} tsr_finish_reason;

typedef struct tsr_request_stats {
  size_t struct_size;
  double queue_ms;          /* arrival -> first scheduled */
  double ttft_ms;           /* arrival -> first token */
  double tpot_ms;           /* mean time per output token after the first */
  double e2e_ms;            /* arrival -> finished */
  int32_t prompt_tokens;
  int32_t cached_tokens;    /* prompt tokens served from the prefix cache */
  int32_t completion_tokens;
  int32_t preemptions;
} tsr_request_stats;
TSR_ABI_PIN_SIZE(tsr_request_stats, 56);

/* One increment of a request's output. Pointers are valid during the callback only. */
typedef struct tsr_output {
  size_t struct_size;
  tsr_request_id id;
  const int32_t* tokens;    /* new token ids */
  size_t n_tokens;
  const char* text;         /* new text: whole UTF-8 characters, stop strings removed */
  size_t text_len;
  int32_t finished;
  tsr_finish_reason finish_reason;
  const char* error;        /* with TSR_FINISH_ERROR, else "" */
  tsr_request_stats stats;  /* final when finished */
} tsr_output;
TSR_ABI_PIN_SIZE(tsr_output, 120);

/* Runs on the thread that steps the engine. Return nonzero to cancel the request. */
typedef int32_t (*tsr_output_callback)(void* user_data, const tsr_output* output);

typedef struct tsr_request_params {
  size_t struct_size;
  const char* prompt;           /* UTF-8 text (BOS added as the model wants); or NULL */
  size_t prompt_len;
  const int32_t* prompt_ids;    /* token ids used as given, when prompt is NULL */
  size_t n_prompt_ids;
  int32_t max_tokens;           /* default 128 */
  float temperature;            /* 0 = greedy; default 0.8 */
  int32_t top_k;                /* 0 = off; default 40 */
  float top_p;                  /* 1 = off; default 0.95 */
  float min_p;                  /* 0 = off; default 0.05 */
  float typical_p;              /* 1 = off; default 1 */
  float repeat_penalty;         /* llama.cpp's, over the last repeat_last_n tokens; 1 = off */
  int32_t repeat_last_n;        /* default 64; -1 = whole history */
  float frequency_penalty;      /* OpenAI's, over generated tokens; default 0 */
  float presence_penalty;       /* OpenAI's, over generated tokens; default 0 */
  const int32_t* logit_bias_ids; /* n_logit_bias token ids; can be NULL */
  const float* logit_bias_values; /* added to those logits; -INFINITY bans */
  size_t n_logit_bias;
  const char* samplers;         /* stage order, e.g. "penalties;top_k;top_p;min_p;temperature";
                                   NULL = the default order */
  uint64_t seed;                /* used when has_seed */
  int32_t has_seed;             /* 0: a random seed */
  int32_t ignore_eos;
  const char* const* stop;      /* n_stop NUL-terminated stop strings; can be NULL */
  size_t n_stop;
  int32_t priority;             /* policy "priority": lower runs first */
  int32_t reserved;
  double timeout_ms;            /* deadline from submission; 0 = none */
  const char* cache_salt;       /* prefix-cache isolation key; can be NULL */
  tsr_output_callback callback; /* can be NULL: outputs are then collected for polling */
  void* user_data;
  /* 1.1: structured output. constraint_kind names a kind a loaded constraint plugin
   * compiles ("json_schema", "json_object", "regex", "gbnf", or a third-party plugin's);
   * NULL = unconstrained. A constraint that does not compile fails the request with the
   * plugin's reason; a kind no plugin serves fails tsr_engine_submit. */
  const char* constraint_kind;
  const char* constraint_text;  /* constraint_text_len bytes; can be NULL for json_object */
  size_t constraint_text_len;
} tsr_request_params;
TSR_ABI_PIN_SIZE(tsr_request_params, 208);

/* The built-in defaults (max_tokens 128, temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * repeat_last_n 64; the rest off). A request through this API carries every value
 * explicitly: the config's [sampling] table supplies the defaults of `tessera run` and of
 * the HTTP server, not of tsr_request_params. */
tsr_request_params tsr_request_default_params(void);

/* Queues a request. Thread-safe. */
tsr_status tsr_engine_submit(tsr_engine* engine, const tsr_request_params* params,
                             tsr_request_id* out_id, tsr_error** error);

/* Finishes a request as "abort" at the next step. Thread-safe; unknown ids are ignored. */
tsr_status tsr_engine_cancel(tsr_engine* engine, tsr_request_id id, tsr_error** error);

/* Drains what a callback-less request produced since the last poll into caller buffers:
 * up to ids_capacity ids and text_capacity bytes (text is cut only between characters).
 * Thread-safe. *finished is set once everything was drained and the request ended, after
 * which the id is forgotten. */
typedef struct tsr_poll_result {
  size_t struct_size;
  int32_t* ids;             /* in: buffer (can be NULL when ids_capacity is 0) */
  size_t ids_capacity;
  size_t n_ids;             /* out */
  char* text;               /* in: buffer (can be NULL when text_capacity is 0) */
  size_t text_capacity;
  size_t text_len;          /* out */
  int32_t finished;         /* out */
  tsr_finish_reason finish_reason; /* out */
  tsr_request_stats stats;  /* out: final when finished */
} tsr_poll_result;
TSR_ABI_PIN_SIZE(tsr_poll_result, 120);

tsr_status tsr_engine_poll(tsr_engine* engine, tsr_request_id id, tsr_poll_result* result,
                           tsr_error** error);

/* Step-driven mode: runs one engine step on this thread. *n_active (can be NULL) gets the
 * number of unfinished requests. Refused while the background thread runs. */
tsr_status tsr_engine_step(tsr_engine* engine, int32_t* n_active, tsr_error** error);

/* Background-thread mode: a thread of the engine steps whenever there is work. */
tsr_status tsr_engine_start(tsr_engine* engine, tsr_error** error);
void tsr_engine_stop(tsr_engine* engine);

typedef struct tsr_engine_stats {
  size_t struct_size;
  int32_t kv_blocks_total;
  int32_t kv_blocks_used;
  int32_t kv_blocks_cached;
  int32_t kv_blocks_free;
  int64_t prompt_tokens;        /* admitted prompt tokens */
  int64_t cached_prompt_tokens; /* of which served from the prefix cache */
  double prefix_hit_rate;
  int32_t num_waiting;
  int32_t num_running;
  int64_t requests_finished;
  int64_t preemptions;
  int64_t steps;
  int64_t generated_tokens;
} tsr_engine_stats;
TSR_ABI_PIN_SIZE(tsr_engine_stats, 88);

/* Thread-safe snapshot, updated after every step. */
tsr_status tsr_engine_get_stats(tsr_engine* engine, tsr_engine_stats* stats, tsr_error** error);

/* ---- one-shot generation ---- */
/* Submits `params` and waits until the request finishes (stepping on this thread unless
 * the background thread runs). The callback, if any, streams as with submit. */
tsr_status tsr_engine_generate(tsr_engine* engine, const tsr_request_params* params,
                               tsr_request_stats* stats, tsr_error** error);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_ENGINE_H */
