/* Draft plugins for speculative decoding: each step a draft proposes up to k tokens per
 * request; the core verifies them against the target model in one forward pass with
 * exact rejection sampling, so speculation never changes what the target would say.
 *
 * A draft plugin's tsr_plugin_desc has kind TSR_PLUGIN_DRAFT and its `iface` points at a
 * static tsr_draft_iface.
 *
 * Verification (Leviathan et al. 2023) treats every proposal as deterministic: q is the
 * point mass on the proposed token, so token i is accepted with probability p_i(token)
 * under the target's final sampling distribution p_i (for greedy requests: iff it is the
 * argmax), a rejection samples from p_i with the proposed token's mass removed, and when
 * all k are accepted a bonus token is sampled from p_k. This is exact for any draft, since
 * the draft's choice is a function of its state. Drafts report the probability they gave
 * each proposal (`probs`, optional) for statistics; ABI 1.0 does not verify against a
 * full draft distribution. A tree of proposals (ABI 2.8, tsr_draft_proposal.parents) is
 * verified the same way over siblings (SpecInfer's recursive rejection with point
 * masses): from the root, the host draws the target's token at the current node as it
 * would without drafts and moves to the child that proposed it, if any; the first draw
 * no child proposed ends the walk, and a leaf's draw is the bonus token.
 *
 * Thread-safety: draft_create / draft_destroy are externally synchronized; a tsr_draft
 * and its sequences are used by one thread at a time (the engine's step thread).
 */
#ifndef TESSERA_DRAFT_H
#define TESSERA_DRAFT_H

#include <math.h>

#include "tessera/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_draft tsr_draft;         /* one per engine, plugin-owned */
typedef struct tsr_draft_seq tsr_draft_seq; /* one per request, plugin-owned */

/* What a draft needs from the core, declared in tsr_draft_iface.needs. */
#define TSR_DRAFT_NEEDS_TOKENS 1u /* the request's token history (all drafts get it) */
#define TSR_DRAFT_NEEDS_HIDDEN 2u /* the target's hidden states at chosen layers (EAGLE-style
                                     heads; ABI 2.6: hidden_layers and on_hidden) */
#define TSR_DRAFT_NEEDS_MODEL 4u  /* a model of its own, through the host (draft models) */

/* Models run by the host for drafts that need one (TSR_DRAFT_NEEDS_MODEL): the host
 * loads the file on the engine's backend and gives each sequence a paged KV cache of its
 * own, so a draft plugin stays a strategy and needs no inference code. All entries are
 * for the engine's step thread. */
typedef struct tsr_model tsr_model;
typedef struct tsr_model_seq tsr_model_seq;

typedef struct tsr_model_host {
  size_t struct_size;
  void* context; /* the host's; passed back to model_open */
  tsr_status (*model_open)(void* context, const char* path, tsr_model** out, tsr_error** error);
  void (*model_close)(tsr_model* model); /* NULL is ignored */
  int32_t (*model_n_vocab)(const tsr_model* model);
  /* Token text (NUL-terminated, valid while the model lives), for vocabulary checks. */
  const char* (*model_token_text)(const tsr_model* model, int32_t id);
  uint64_t (*model_n_params)(const tsr_model* model);
  tsr_status (*seq_create)(tsr_model* model, tsr_model_seq** out, tsr_error** error);
  void (*seq_destroy)(tsr_model* model, tsr_model_seq* seq);
  /* Appends and computes n tokens; writes the last one's n_vocab logits to `logits`. */
  tsr_status (*seq_decode)(tsr_model* model, tsr_model_seq* seq, const int32_t* tokens,
                           size_t n, float* logits, tsr_error** error);
  /* Keeps the first n tokens of the sequence (rollback of rejected drafts). */
  tsr_status (*seq_truncate)(tsr_model* model, tsr_model_seq* seq, size_t n, tsr_error** error);
  /* ABI 2.6. seq_decode for several sequences in one forward pass: sequence seqs[i]
   * appends and computes n[i] >= 1 tokens from tokens[i], and row i of `logits` (n_seqs
   * rows of model_n_vocab floats) gets the logits after its last token. The sequences
   * are distinct. A failure leaves every sequence as it was. A row's logits do not depend
   * on the other sequences of the call. */
  tsr_status (*seqs_decode)(tsr_model* model, tsr_model_seq* const* seqs, const int32_t* const* tokens,
                            const size_t* n, size_t n_seqs, float* logits, tsr_error** error);

  /* ABI 2.7: feature models, which take a feature row beside each token: EAGLE-3 heads
   * (GGUF general.architecture "eagle3", as llama.cpp's converter writes them). model_open
   * opens one against the engine's target, whose token embeddings it reads (and whose
   * output matrix, where the head has neither its own nor token_embd). Tokens passed to
   * it are target ids; its logits rows are over its own vocabulary (model_n_vocab), whose
   * ids model_target_tokens maps to the target's. */
  /* The width of a target feature row: the states of model_feature_layers' layers, one
   * after the other (layers x the target's n_embd); 0 for a plain model. */
  int32_t (*model_n_features)(const tsr_model* model);
  /* The width of the model's own output states (its n_embd). */
  int32_t (*model_n_embd)(const tsr_model* model);
  /* The target layers (tsr_draft_hidden's numbering) whose states make a feature row, in
   * the row's order: writes min(count, capacity) of them to `layers` and returns count
   * (0 for a plain model). */
  int32_t (*model_feature_layers)(const tsr_model* model, int32_t* layers, int32_t capacity);
  /* The target id of each of the model's model_n_vocab output ids (EAGLE-3's d2t, for a
   * head over a reduced vocabulary), or NULL when they are the target's ids. Valid while
   * the model lives. */
  const int32_t* (*model_target_tokens)(const tsr_model* model);
  /* seqs_decode for a feature model: row r of sequence i takes token tokens[i][r] and the
   * feature row features[i] + r * feature_width (host memory). feature_width is either
   * model_n_features (target features, which the model projects: EAGLE-3's fc) or
   * model_n_embd (states the model output itself, as `states` returned them: a head's
   * autoregressive steps). `states` (can be NULL) gets n_seqs rows of model_n_embd: each
   * sequence's last row's output state, before the output norm. */
  tsr_status (*seqs_decode_features)(tsr_model* model, tsr_model_seq* const* seqs, const int32_t* const* tokens,
                                     const size_t* n, const float* const* features, int32_t feature_width,
                                     size_t n_seqs, float* logits, float* states, tsr_error** error);
  /* Copies the states of a tsr_draft_hidden (the engine backend's memory: device memory on
   * a GPU) to host memory: `out` gets layers x rows x n_embd floats, contiguous, in the
   * tensor's order. What a draft keeping target features between steps reads them with. */
  tsr_status (*states_read)(void* context, const tsr_tensor* states, float* out, tsr_error** error);
  /* ABI 2.9. A new sequence (written to *out; free it with seq_destroy) holding the first n
   * tokens of `seq` (n <= its tokens), their KV shared with `seq` until either writes to a
   * shared block (copy on write), so a draft can try several continuations of one context
   * without recomputing it (EAGLE-2's tree expansion). Both sequences stay usable and
   * independent; forks may be decoded in one seqs_decode/seqs_decode_features call with
   * their origin. */
  tsr_status (*seq_fork)(tsr_model* model, tsr_model_seq* seq, size_t n, tsr_model_seq** out, tsr_error** error);
} tsr_model_host;
TSR_ABI_PIN_SIZE(tsr_model_host, 152);
/* The table through ABI 2.8 (no seq_fork). */
#define TSR_MODEL_HOST_SIZE_V2_8 TSR_SIZE_THROUGH(tsr_model_host, states_read)
/* The table through ABI 2.6 (no feature models). */
#define TSR_MODEL_HOST_SIZE_V2_6 TSR_SIZE_THROUGH(tsr_model_host, seqs_decode)
/* The table through ABI 2.5 (no seqs_decode). */
#define TSR_MODEL_HOST_SIZE_V2_5 TSR_SIZE_THROUGH(tsr_model_host, seq_truncate)

/* Engine-level configuration of a draft. */
typedef struct tsr_draft_params {
  size_t struct_size;
  int32_t n_vocab;            /* the target's vocabulary size */
  int32_t max_draft_tokens;   /* k never exceeds this */
  int32_t ngram_min;          /* prompt lookup: shortest suffix to match */
  int32_t ngram_max;          /* prompt lookup: longest suffix to match */
  const char* model_path;     /* draft model file (TSR_DRAFT_NEEDS_MODEL); can be NULL */
  const char* const* vocab;   /* the target's token texts, n_vocab entries (borrowed for
                                 draft_create, like every pointer here but model_host) */
  int32_t n_threads;
  int32_t reserved;
  uint64_t target_n_params;   /* parameters of the target model */
  const tsr_model_host* model_host; /* models for TSR_DRAFT_NEEDS_MODEL drafts; outlives
                                       the tsr_draft */
  const tsr_ext_header* next; /* can be NULL */
  /* ABI 2.6: the target's shape, for TSR_DRAFT_NEEDS_HIDDEN drafts. */
  int32_t target_n_layer;     /* its layers: hidden_layers picks among 0 .. n_layer */
  int32_t target_n_embd;      /* the width of its hidden states */
} tsr_draft_params;
TSR_ABI_PIN_SIZE(tsr_draft_params, 80);
/* The params through ABI 2.5 (no target shape). */
#define TSR_DRAFT_PARAMS_SIZE_V2_5 TSR_SIZE_THROUGH(tsr_draft_params, next)

/* ABI 2.6. Hidden states of the target for a TSR_DRAFT_NEEDS_HIDDEN draft: the residual
 * stream entering each of the layers hidden_layers chose, for consecutive positions of one
 * request. Layer i's state is its input, before its input norm: the token embeddings
 * (scaled as the model scales them) for i = 0, the output of layer i - 1 otherwise, and
 * for i = n_layer the last layer's output, before the output norm. These are Hugging
 * Face's hidden_states[i] up to n_layer - 1, and what EAGLE-3's extract_layers (llama.cpp's
 * eagle3 GGUF key, e.g. 2, n/2 and n - 3) index. */
typedef struct tsr_draft_hidden {
  size_t struct_size;
  /* f32 [n_layers, n_rows, n_embd] in the engine backend's memory, strided as it says:
   * layer i is hidden_layers' i-th layer, row j the state at history position
   * first_position + j. On the CPU backend `data` is the forward pass's own buffer (no
   * copy is made); on a GPU backend it is device memory, never copied to the host. The
   * step that computed them has finished (the host synchronized its backend), so any
   * stream of the device may read them. Valid for the call only. */
  const tsr_tensor* states;
  int64_t first_position;
} tsr_draft_hidden;
TSR_ABI_PIN_SIZE(tsr_draft_hidden, 24);

/* The most layers a draft may ask for. */
#define TSR_DRAFT_MAX_HIDDEN_LAYERS 8

/* ABI 2.9: a sampled request's draws at the positions a proposal covers. The host draws
 * the token at a request's output position t from its final distribution p by an
 * exponential race keyed by a uniform u_t that depends on (seed, t) alone: every token x
 * with p(x) > 0 gets the exponential E_t(x) = tsr_draft_race_exponential(u_t, x), and the
 * token drawn is the one with the least E_t(x) / p(x) (ties to the lower id; computed as
 * tsr_draft_race_time says). That is an
 * exact draw from p (the Gumbel-max trick in its exponential form). Verification accepts a
 * proposed token iff that draw picks it, so a draft that runs the same race over its own
 * distribution q, with the same exponentials, proposes the target's token whenever the two
 * races have the same winner (common random numbers, Gumbel coupling): acceptance is at
 * least (1 - TV(p, q)) / (1 + TV(p, q)), where a draft's argmax is accepted with
 * p(argmax). Outputs do not depend on what a draft proposes.
 * p is the logits through top_k, top_p and min_p (each off at its neutral value), then
 * divided by temperature and soft-maxed (llama.cpp's default order; logit biases,
 * penalties and other orders the host applies too, but does not describe here).
 * Changed within 2.9 (CHANGELOG): the draw was an inverse CDF over ascending ids at u_t; a
 * draft that still draws that way stays correct and is accepted less often. */
typedef struct tsr_draft_sampling {
  size_t struct_size;
  const double* uniforms; /* [depth]: uniforms[d] draws the token at depth d + 1 of any path
                             (the proposal's capacity entries) */
  int32_t depth;          /* how many uniforms */
  float temperature;      /* > 0 */
  int32_t top_k;          /* 0: off */
  float top_p;            /* 1: off */
  float min_p;            /* 0: off */
  int32_t reserved;
} tsr_draft_sampling;
TSR_ABI_PIN_SIZE(tsr_draft_sampling, 40);

/* The race's uniform of token `token` at uniform u (tsr_draft_sampling), in (0, 1]:
 * element `token` of the SplitMix64 stream seeded with u's 53 bits. */
static inline double tsr_draft_race_uniform(double u, int32_t token) {
  const uint64_t gamma = 0x9E3779B97F4A7C15ull;
  uint64_t z = (uint64_t)(u * 9007199254740992.0); /* u = key * 2^-53 */
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = (z ^ (z >> 31)) + ((uint64_t)(uint32_t)token + 1u) * gamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)((z >> 11) + 1u) * (1.0 / 9007199254740992.0);
}

/* The exponential of token `token` in the race at u: -log of its uniform. */
static inline double tsr_draft_race_exponential(double u, int32_t token) {
  return -log(tsr_draft_race_uniform(u, token));
}

/* One entrant of the race: the time E / p of `token`, whose probability is p > 0, or
 * INFINITY where it cannot beat `best`, the least time of the tokens before it (INFINITY
 * for the first). E >= 1 - U, so most tokens are ruled out without a logarithm (a race
 * over 152k tokens takes about a dozen). A race runs the tokens in ascending id, keeping
 * the first least time: host and drafts call this one definition, so their races agree
 * to the bit. */
static inline double tsr_draft_race_time(double u, int32_t token, double p, double best) {
  const double uniform = tsr_draft_race_uniform(u, token);
  if (1.0 - uniform >= best * p) return INFINITY;
  return -log(uniform) / p;
}

/* A proposal: up to `capacity` tokens written by propose(). */
typedef struct tsr_draft_proposal {
  size_t struct_size;
  int32_t* tokens;            /* out: proposed ids */
  float* probs;               /* out, can be NULL: the draft's probability of each id */
  int32_t capacity;           /* in: k, the most tokens to propose */
  int32_t n_tokens;           /* out: how many were proposed (0 is fine) */
  /* ABI 2.8: token trees. NULL when the host verifies chains only. Else the host can
   * verify a tree of up to tree_capacity tokens (>= capacity; tokens and probs have room
   * for that many) in one pass, and has set parents[i] = i - 1 for each of them, a chain.
   * A draft may write a tree instead: parents[i] is -1 (token i follows the history) or
   * the index of an earlier token that token i follows, and no path from the history is
   * longer than capacity tokens. Siblings (tokens of one parent) are distinct. A draft that
   * writes no parents proposes a chain of at most capacity tokens, as before 2.8. The
   * first child of each token should be the likeliest: the host keeps the KV of the
   * accepted tokens that lie on the chain of first proposals (indices 0, 1, 2, ...) and
   * recomputes the others in its next pass. */
  int32_t* parents;
  int32_t tree_capacity;      /* in: the most tokens of a tree (with parents) */
  int32_t reserved;
  /* ABI 2.9, can be NULL (greedy requests): how the target will draw the proposed
   * positions, so that a draft with a distribution of its own can propose the token the
   * target's draw is likely to pick. Valid for the call. */
  const tsr_draft_sampling* sampling;
} tsr_draft_proposal;
TSR_ABI_PIN_SIZE(tsr_draft_proposal, 56);
/* The proposal through ABI 2.7 (chains only) and 2.8 (trees). */
#define TSR_DRAFT_PROPOSAL_SIZE_V2_7 TSR_SIZE_THROUGH(tsr_draft_proposal, n_tokens)
#define TSR_DRAFT_PROPOSAL_SIZE_V2_8 TSR_SIZE_THROUGH(tsr_draft_proposal, reserved)


typedef struct tsr_draft_iface {
  size_t struct_size;
  uint32_t needs; /* TSR_DRAFT_NEEDS_* */
  uint32_t reserved;

  tsr_status (*draft_create)(const tsr_draft_params* params, tsr_draft** out, tsr_error** error);
  void (*draft_destroy)(tsr_draft* draft); /* NULL is ignored */

  /* Per-request state; `prompt` (borrowed for the call) starts the history. */
  tsr_status (*seq_create)(tsr_draft* draft, const int32_t* prompt, size_t n_prompt,
                           tsr_draft_seq** out, tsr_error** error);
  void (*seq_destroy)(tsr_draft* draft, tsr_draft_seq* seq); /* NULL is ignored */

  /* Proposes up to proposal->capacity tokens to follow `history` (the request's full
   * token history, prompt and accepted outputs, borrowed for the call). */
  tsr_status (*propose)(tsr_draft* draft, tsr_draft_seq* seq, const int32_t* history,
                        size_t n_history, tsr_draft_proposal* proposal, tsr_error** error);

  /* After verification: n_accepted of the last proposal's tokens were accepted and
   * `next_token` follows them (the target's correction or bonus token). Called only for
   * a proposal that reached verification with at least one token: a step whose drafts the
   * scheduler cut to none (the end of max_tokens or of the context, a preemption) is not
   * reported, so propose's `history` is the authority. A draft with state of its own (a
   * KV cache) reconciles it with `history` at each propose (plugins/draft_model rolls
   * back to the longest common prefix); on_verified is an early hint. */
  tsr_status (*on_verified)(tsr_draft* draft, tsr_draft_seq* seq, int32_t n_accepted,
                            int32_t next_token, tsr_error** error);

  /* ABI 2.6, can be NULL. propose() for n sequences of this draft at once, so that a
   * draft running a model computes them in shared forward passes (seqs_decode) rather
   * than one pass per request: proposals[i] follows histories[i] (n_histories[i] tokens)
   * for seqs[i], each as propose() would fill it. The sequences are distinct. On failure
   * the host uses none of the proposals and asks each sequence alone through propose(),
   * so one sequence's fault costs only its own speculation. */
  tsr_status (*propose_batch)(tsr_draft* draft, tsr_draft_seq* const* seqs, const int32_t* const* histories,
                              const size_t* n_histories, tsr_draft_proposal* const* proposals, size_t n,
                              tsr_error** error);

  /* ABI 2.6, for drafts declaring TSR_DRAFT_NEEDS_HIDDEN (NULL otherwise; such a draft
   * without both entries is refused at start). hidden_layers is called once, after
   * draft_create: it writes the target layers whose states the draft wants to `layers`
   * (room for TSR_DRAFT_MAX_HIDDEN_LAYERS), strictly increasing, each at most
   * target_n_layer (tsr_draft_hidden says what i means), and returns how many (1 or more);
   * -1 with *error set refuses. */
  int32_t (*hidden_layers)(tsr_draft* draft, int32_t* layers, tsr_error** error);
  /* After a step that computed positions of this request which are now part of its
   * history (prompt chunks; the last token and the accepted drafts of a verification),
   * before on_verified and the next propose: their states, in position order. Positions
   * the engine did not compute have none: a prefix found in the prefix cache (the first
   * call's first_position says where a request's states start). The choices of one call
   * share their prompt's computation: each gets the states of the chunk that completed it
   * (the whole prompt when it ran in one chunk, as short prompts do). A request preempted and recomputed gets its positions
   * again, from a first_position below the previous call's end: they replace the states
   * from there on. A failure turns speculation off for this request. */
  tsr_status (*on_hidden)(tsr_draft* draft, tsr_draft_seq* seq, const tsr_draft_hidden* hidden,
                          tsr_error** error);
} tsr_draft_iface;
TSR_ABI_PIN_SIZE(tsr_draft_iface, 88);
/* The table through ABI 2.5 (no propose_batch): the host reads propose_batch only from
 * longer tables. */
#define TSR_DRAFT_IFACE_SIZE_V2_5 TSR_SIZE_THROUGH(tsr_draft_iface, on_verified)

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_DRAFT_H */
