/* A plain C program driving the engine through engine.h: create, tokenize, generate
 * greedily with a streaming callback, check against the reference, destroy. */
#include <stdio.h>
#include <string.h>

#include "tessera/engine.h"

#define SKIP 77

typedef struct {
  char text[4096];
  size_t len;
  int calls;
} collected;

static int32_t on_token(void* user, int32_t token, const char* piece, size_t len) {
  collected* c = (collected*)user;
  (void)token;
  if (c->len + len < sizeof c->text) {
    memcpy(c->text + c->len, piece, len);
    c->len += len;
  }
  c->calls++;
  return 0;
}

static int fail(const char* what, tsr_error* error) {
  fprintf(stderr, "FAIL %s: %s\n", what, error ? tsr_error_message(error) : "");
  tsr_error_free(error);
  return 1;
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
  params.plugin_dir = TESSERA_PLUGIN_DIR;
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

  tsr_generate_params gen = tsr_generate_default_params();
  gen.max_tokens = 10;
  gen.temperature = 0.0f;
  gen.ignore_eos = 1;
  collected out = {{0}, 0, 0};
  tsr_generate_result result;
  memset(&result, 0, sizeof result);
  result.struct_size = sizeof result;
  if (tsr_engine_generate(engine, prompt, strlen(prompt), &gen, on_token, &out, &result, &error) !=
      TSR_STATUS_OK) {
    return fail("generate", error);
  }
  const char* expected = ", there was a little girl named Lily";
  if (out.calls != 10 || result.completion_tokens != 10 || result.prompt_tokens != 5 ||
      result.finish_reason != TSR_FINISH_LENGTH || out.len != strlen(expected) ||
      memcmp(out.text, expected, out.len) != 0) {
    fprintf(stderr, "got %d calls, text '%.*s'\n", out.calls, (int)out.len, out.text);
    return fail("generated text", NULL);
  }

  /* Bad input returns an error, never aborts. */
  if (tsr_engine_generate(engine, NULL, 5, &gen, NULL, NULL, NULL, &error) != TSR_STATUS_INVALID_ARGUMENT) {
    return fail("NULL prompt accepted", error);
  }
  tsr_error_free(error);
  tsr_engine_destroy(engine);
  printf("1 passed, 0 failed\n");
  return 0;
}
