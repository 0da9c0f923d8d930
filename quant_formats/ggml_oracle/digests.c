/* Prints FNV-1a digests of ggml's own quantizers (ggml-quants.c), without and with an
 * importance matrix, on the input that quant_formats_test.cpp's KquantDigests generates, for that test to compare against.
 * Built by run.sh from the llama.cpp sources node-llama-cpp 3.21.1 ships; not part of the
 * build. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void quantize_row_q4_1_ref(const float*, void*, int64_t);
void quantize_row_q5_0_ref(const float*, void*, int64_t);
void quantize_row_q5_1_ref(const float*, void*, int64_t);
void quantize_row_q2_K_ref(const float*, void*, int64_t);
void quantize_row_q3_K_ref(const float*, void*, int64_t);
void quantize_row_q4_K_ref(const float*, void*, int64_t);
void quantize_row_q5_K_ref(const float*, void*, int64_t);
void quantize_row_q6_K_ref(const float*, void*, int64_t);
size_t quantize_iq4_nl(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_iq4_xs(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_q4_0(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_q4_1(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_q5_0(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_q5_1(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_q2_K(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_q3_K(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_q4_K(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_q5_K(const float*, void*, int64_t, int64_t, const float*);
size_t quantize_q6_K(const float*, void*, int64_t, int64_t, const float*);
void quantize_row_mxfp4_ref(const float*, void*, int64_t);
void dequantize_row_mxfp4(const void*, float*, int64_t);
void dequantize_row_q4_K(const void*, float*, int64_t);

/* The stubs ggml-quants.c links against; the quantizers above call none of them. */
void ggml_abort(const char* file, int line, const char* fmt, ...) { fprintf(stderr, "abort %s:%d\n", file, line); abort(); }
void ggml_log_internal(int level, const char* fmt, ...) { (void)level; (void)fmt; }
/* Row sizes of the types quantized with an importance matrix below (ggml type ids). */
size_t ggml_row_size(int type, int64_t ne) {
  switch (type) {
    case 2: return (size_t)ne / 32 * 18;    /* Q4_0 */
    case 3: return (size_t)ne / 32 * 20;    /* Q4_1 */
    case 6: return (size_t)ne / 32 * 22;    /* Q5_0 */
    case 7: return (size_t)ne / 32 * 24;    /* Q5_1 */
    case 10: return (size_t)ne / 256 * 84;  /* Q2_K */
    case 11: return (size_t)ne / 256 * 110; /* Q3_K */
    case 12: return (size_t)ne / 256 * 144; /* Q4_K */
    case 13: return (size_t)ne / 256 * 176; /* Q5_K */
    case 14: return (size_t)ne / 256 * 210; /* Q6_K */
    default: abort();
  }
}
size_t ggml_type_size(int type) { (void)type; abort(); }
const char* ggml_type_name(int type) { (void)type; return "?"; }

#define N (256 * 64)

static uint64_t state;
static uint64_t next(void) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static float unit(void) { return (float)(next() >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }

static void fill(float* x) {
  state = 1234;
  for (int i = 0; i < N; ++i) {
    float v = unit() + unit() + unit() + unit();
    if ((next() & 63) == 0) v *= 8;
    x[i] = v * 0.05f;
  }
  for (int i = 0; i < 256; ++i) x[i] = 0;                 /* an all-zero super-block */
  for (int i = 512; i < 768; ++i) x[i] = fabsf(x[i]);     /* an all-positive one */
}

/* An importance matrix for rows of ROW elements, drawn after fill(): products of two
 * uniforms in [0, 2), every 97th column unused (0) and column 3 fifty times the rest. */
#define ROW 1024
static void fill_imatrix(float* qw) {
  for (int j = 0; j < ROW; ++j) qw[j] = (unit() + 1.0f) * (unit() + 1.0f);
  for (int j = 0; j < ROW; j += 97) qw[j] = 0;
  qw[3] *= 50;
}

static uint64_t fnv1a(const void* p, size_t n) {
  const unsigned char* b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

int main(void) {
  static float x[N], y[N];
  static unsigned char q[N * 2];
  fill(x);
  quantize_row_q4_1_ref(x, q, N);  printf("q4_1 %016llx\n", (unsigned long long)fnv1a(q, N / 32 * 20));
  quantize_row_q5_0_ref(x, q, N);  printf("q5_0 %016llx\n", (unsigned long long)fnv1a(q, N / 32 * 22));
  quantize_row_q5_1_ref(x, q, N);  printf("q5_1 %016llx\n", (unsigned long long)fnv1a(q, N / 32 * 24));
  quantize_row_q2_K_ref(x, q, N);  printf("q2_K %016llx\n", (unsigned long long)fnv1a(q, N / 256 * 84));
  quantize_row_q3_K_ref(x, q, N);  printf("q3_K %016llx\n", (unsigned long long)fnv1a(q, N / 256 * 110));
  quantize_row_q4_K_ref(x, q, N);  printf("q4_K %016llx\n", (unsigned long long)fnv1a(q, N / 256 * 144));
  dequantize_row_q4_K(q, y, N);    printf("q4_K-dequant %016llx\n", (unsigned long long)fnv1a(y, sizeof y));
  quantize_row_q5_K_ref(x, q, N);  printf("q5_K %016llx\n", (unsigned long long)fnv1a(q, N / 256 * 176));
  quantize_row_q6_K_ref(x, q, N);  printf("q6_K %016llx\n", (unsigned long long)fnv1a(q, N / 256 * 210));
  quantize_iq4_nl(x, q, 1, N, NULL); printf("iq4_nl %016llx\n", (unsigned long long)fnv1a(q, N / 32 * 18));
  quantize_iq4_xs(x, q, 1, N, NULL); printf("iq4_xs %016llx\n", (unsigned long long)fnv1a(q, N / 256 * 136));
  quantize_row_mxfp4_ref(x, q, N); printf("mxfp4 %016llx\n", (unsigned long long)fnv1a(q, N / 32 * 17));
  dequantize_row_mxfp4(q, y, N);   printf("mxfp4-dequant %016llx\n", (unsigned long long)fnv1a(y, sizeof y));

  static float qw[ROW];
  fill_imatrix(qw);
  const int64_t rows = N / ROW;
#define WEIGHTED(name, fn, bytes) fn(x, q, rows, ROW, qw); printf(name "-imatrix %016llx\n", (unsigned long long)fnv1a(q, bytes))
  WEIGHTED("q4_0", quantize_q4_0, N / 32 * 18);
  WEIGHTED("q4_1", quantize_q4_1, N / 32 * 20);
  WEIGHTED("q5_0", quantize_q5_0, N / 32 * 22);
  WEIGHTED("q5_1", quantize_q5_1, N / 32 * 24);
  WEIGHTED("q2_K", quantize_q2_K, N / 256 * 84);
  WEIGHTED("q3_K", quantize_q3_K, N / 256 * 110);
  WEIGHTED("q4_K", quantize_q4_K, N / 256 * 144);
  WEIGHTED("q5_K", quantize_q5_K, N / 256 * 176);
  WEIGHTED("q6_K", quantize_q6_K, N / 256 * 210);
  WEIGHTED("iq4_nl", quantize_iq4_nl, N / 32 * 18);
  WEIGHTED("iq4_xs", quantize_iq4_xs, N / 256 * 136);
  return 0;
}
