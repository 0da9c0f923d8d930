/* A plain C program driving the engine through engine.h: create, tokenize, generate
 * greedily with a streaming callback, run two requests in step mode and poll them,
 * read the statistics, check against the reference, destroy. Built in the tree against
 * the core's static libraries, and by tests/sdk/out_of_tree.sh against an installed
 * libtessera.so with pkg-config (then without TESSERA_PLUGIN_DIR). */
#include <stdio.h>
#include <string.h>

#include "tessera/engine.h"

#define SKIP 77

typedef struct {
  char text[4096];
  size_t len;
  int32_t tokens;
  int finished;
} collected;

static int32_t on_output(void* user, const tsr_output* out) {
  collected* c = (collected*)user;
  if (c->len + out->text_len < sizeof c->text) {
    memcpy(c->text + c->len, out->text, out->text_len);
    c->len += out->text_len;
  }
  c->tokens += (int32_t)out->n_tokens;
  c->finished = out->finished;
  return 0;
}

static int fail(const char* what, tsr_error* error) {
  fprintf(stderr, "FAIL %s: %s\n", what, error ? tsr_error_message(error) : "");
  tsr_error_free(error);
  return 1;
}

/* A poll result that takes up to n_ids ids and text_capacity bytes of text. */
static tsr_poll_result poll_into(int32_t* ids, size_t n_ids, char* text, size_t text_capacity) {
  tsr_poll_result poll;
  memset(&poll, 0, sizeof poll);
  poll.struct_size = sizeof poll;
  poll.ids = ids;
  poll.ids_capacity = n_ids;
  poll.text = text;
  poll.text_capacity = text_capacity;
  return poll;
}

int main(void) {
  const char* model = TESSERA_SHARED_DIR "/models/stories260K.gguf";
  FILE* probe = fopen(model, "rb");
  if (!probe) {
    printf("SKIP: %s is absent\n", model);
    return SKIP;
  }
  fclose(probe);

  tsr_engine_params params = tsr_engine_default_params();
  params.model_path = model;
#ifdef TESSERA_PLUGIN_DIR
  params.plugin_dir = TESSERA_PLUGIN_DIR;
#else
  params.plugin_dir = NULL; /* built against an install: libtessera finds its own plugins */
#endif
  params.n_threads = 1;
  tsr_engine* engine = NULL;
  tsr_error* error = NULL;
  if (tsr_engine_create(&params, &engine, &error) != TSR_STATUS_OK) return fail("create", error);

  const char* prompt = "Once upon a time";
  int32_t ids[16];
  size_t n_ids = 0;
  if (tsr_engine_tokenize(engine, prompt, strlen(prompt), 1, ids, 16, &n_ids, &error) != TSR_STATUS_OK) {
    return fail("tokenize", error);
  }
  /* Reference prompt_ids from stories260K.ref.jsonl. */
  const int32_t expected_ids[] = {1, 403, 407, 261, 378};
  if (n_ids != 5 || memcmp(ids, expected_ids, sizeof expected_ids) != 0) return fail("prompt ids", NULL);

  /* One-shot generation with a streaming callback. */
  tsr_request_params req = tsr_request_default_params();
  req.prompt = prompt;
  req.prompt_len = strlen(prompt);
  req.max_tokens = 10;
  req.temperature = 0.0f;
  req.ignore_eos = 1;
  req.callback = on_output;
  collected out = {{0}, 0, 0, 0};
  req.user_data = &out;
  tsr_request_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  if (tsr_engine_generate(engine, &req, &stats, &error) != TSR_STATUS_OK) return fail("generate", error);
  const char* expected = ", there was a little girl named Lily";
  if (out.tokens != 10 || !out.finished || stats.completion_tokens != 10 || stats.prompt_tokens != 5 ||
      out.len != strlen(expected) || memcmp(out.text, expected, out.len) != 0) {
    fprintf(stderr, "got %d tokens, text '%.*s'\n", out.tokens, (int)out.len, out.text);
    return fail("generated text", NULL);
  }

  /* Step-driven mode with polling: two requests, the second shares the first's prefix. */
  req.callback = NULL;
  req.user_data = NULL;
  req.max_tokens = 12;
  tsr_request_id ids2[2];
  for (int i = 0; i < 2; ++i) {
    if (tsr_engine_submit(engine, &req, &ids2[i], &error) != TSR_STATUS_OK) return fail("submit", error);
  }
  int32_t active = 1;
  while (active > 0) {
    if (tsr_engine_step(engine, &active, &error) != TSR_STATUS_OK) return fail("step", error);
  }
  for (int i = 0; i < 2; ++i) {
    char text[256];
    int32_t got[32];
    tsr_poll_result poll = poll_into(got, 32, text, sizeof text);
    if (tsr_engine_poll(engine, ids2[i], &poll, &error) != TSR_STATUS_OK) return fail("poll", error);
    if (!poll.finished || poll.n_ids != 12 || poll.finish_reason != TSR_FINISH_LENGTH ||
        poll.text_len < strlen(expected) || memcmp(text, expected, strlen(expected)) != 0) {
      return fail("polled output", NULL);
    }
  }
  tsr_engine_stats es;
  memset(&es, 0, sizeof es);
  es.struct_size = sizeof es;
  if (tsr_engine_get_stats(engine, &es, &error) != TSR_STATUS_OK) return fail("stats", error);
  if (es.kv_blocks_used != 0 || es.requests_finished != 3 || es.cached_prompt_tokens != 0) {
    /* Prompts of 5 tokens never fill a 16-token block, so nothing is served from cache. */
    return fail("engine stats", NULL);
  }

  /* Structured output (ABI 1.1): the text is in the regex's language. */
  req.callback = on_output;
  req.user_data = &out;
  memset(&out, 0, sizeof out);
  req.max_tokens = 16;
  req.ignore_eos = 0;
  req.constraint_kind = "regex";
  req.constraint_text = "(yes|no)!";
  req.constraint_text_len = strlen(req.constraint_text);
  if (tsr_engine_generate(engine, &req, NULL, &error) != TSR_STATUS_OK) return fail("constrained generate", error);
  out.text[out.len] = 0;
  if (strcmp(out.text, "yes!") != 0 && strcmp(out.text, "no!") != 0) {
    fprintf(stderr, "got '%s'\n", out.text);
    return fail("constrained text", NULL);
  }
  /* Step-driven: a request waiting for its constraint to compile counts as active. */
  req.callback = NULL;
  req.user_data = NULL;
  req.constraint_text = "(maybe|perhaps)!";
  req.constraint_text_len = strlen(req.constraint_text);
  tsr_request_id constrained_id;
  if (tsr_engine_submit(engine, &req, &constrained_id, &error) != TSR_STATUS_OK) return fail("constrained submit", error);
  active = 1;
  while (active > 0) {
    if (tsr_engine_step(engine, &active, &error) != TSR_STATUS_OK) return fail("step", error);
  }
  {
    char text[64];
    int32_t got[32];
    tsr_poll_result poll = poll_into(got, 32, text, sizeof text - 1);
    if (tsr_engine_poll(engine, constrained_id, &poll, &error) != TSR_STATUS_OK) return fail("poll", error);
    text[poll.text_len] = 0;
    if (!poll.finished || (strcmp(text, "maybe!") != 0 && strcmp(text, "perhaps!") != 0)) {
      fprintf(stderr, "finished %d, text '%s'\n", poll.finished, text);
      return fail("constrained request after the step loop", NULL);
    }
  }
  req.constraint_kind = "xml";
  if (tsr_engine_generate(engine, &req, NULL, &error) != TSR_STATUS_INVALID_ARGUMENT) {
    return fail("unknown constraint kind accepted", error);
  }
  tsr_error_free(error);
  error = NULL;
  req.constraint_kind = NULL;

  /* Bad input returns an error, never aborts. */
  req.prompt = NULL;
  if (tsr_engine_generate(engine, &req, NULL, &error) != TSR_STATUS_INVALID_ARGUMENT) {
    return fail("NULL prompt accepted", error);
  }
  tsr_error_free(error);
  tsr_engine_destroy(engine);
  printf("1 passed, 0 failed\n");
  return 0;
}
