// Draft checks: create errors on bad params, well-formed proposals (0..capacity tokens,
// ids in the vocabulary, probabilities in [0, 1], nothing written past the capacity),
// state kept through on_verified with any number of accepted tokens, and clean failures
// on bad handles. Drafts that declare TSR_DRAFT_NEEDS_MODEL get a fake model host whose
// model is a fixed function of the last token; it checks that the draft uses its
// sequences consistently and releases every one of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "conformance.h"
#include "tessera/draft.h"

struct tsr_model {
  int32_t n_vocab;
  bool features;  // a feature model (an EAGLE-3 head): opened from a path naming a head
  int open_seqs = 0;
};
struct tsr_model_seq {
  std::vector<int32_t> tokens;
};

namespace tsr::conformance {
namespace {

constexpr int32_t kVocab = 48;
constexpr int32_t kMaxDraft = 5;
constexpr int32_t kTargetLayers = 6;  // the target's shape for drafts taking hidden states
constexpr int32_t kTargetEmbd = 16;
int g_open_models = 0;

tsr_status fail(tsr_error** e, tsr_status status, const std::string& msg) {
  if (e != nullptr) *e = host_api()->error_new(status, msg.data(), msg.size());
  return status;
}

// ---- the fake model host ----

tsr_status model_open(void*, const char* path, tsr_model** out, tsr_error** e) {
  if (path == nullptr || out == nullptr) return fail(e, TSR_STATUS_INVALID_ARGUMENT, "model_open: NULL");
  ++g_open_models;
  *out = new tsr_model{kVocab, std::strstr(path, "head") != nullptr};
  return TSR_STATUS_OK;
}
void model_close(tsr_model* m) {
  if (m == nullptr) return;
  EXPECT_EQ(m->open_seqs, 0) << "model closed with live sequences";
  --g_open_models;
  delete m;
}
int32_t model_n_vocab(const tsr_model* m) { return m->n_vocab; }

const std::vector<std::string>& vocab_texts() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> v;
    for (int32_t i = 0; i < kVocab; ++i) v.push_back("tok" + std::to_string(i));
    return v;
  }();
  return texts;
}

const char* model_token_text(const tsr_model*, int32_t id) {
  return id >= 0 && id < kVocab ? vocab_texts()[id].c_str() : nullptr;
}
uint64_t model_n_params(const tsr_model*) { return 1000; }

tsr_status model_seq_create(tsr_model* m, tsr_model_seq** out, tsr_error** e) {
  if (out == nullptr) return fail(e, TSR_STATUS_INVALID_ARGUMENT, "seq_create: out is NULL");
  ++m->open_seqs;
  *out = new tsr_model_seq();
  return TSR_STATUS_OK;
}
void model_seq_destroy(tsr_model* m, tsr_model_seq* s) {
  if (s == nullptr) return;
  --m->open_seqs;
  delete s;
}

// Logits peak at (7 * last + 3) mod n_vocab.
tsr_status model_seq_decode(tsr_model* m, tsr_model_seq* s, const int32_t* tokens, size_t n,
                            float* logits, tsr_error** e) {
  if (m->features) {
    ADD_FAILURE() << "seq_decode called on a feature model";
    return fail(e, TSR_STATUS_INVALID_ARGUMENT, "seq_decode: a feature model");
  }
  if (s == nullptr || tokens == nullptr || n == 0 || logits == nullptr) {
    ADD_FAILURE() << "seq_decode called with a NULL or empty argument";
    return fail(e, TSR_STATUS_INVALID_ARGUMENT, "seq_decode: bad arguments");
  }
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= m->n_vocab) {
      ADD_FAILURE() << "seq_decode given token " << tokens[i] << " outside the vocabulary";
      return fail(e, TSR_STATUS_INVALID_ARGUMENT, "seq_decode: token out of range");
    }
  }
  s->tokens.insert(s->tokens.end(), tokens, tokens + n);
  std::fill_n(logits, m->n_vocab, 0.0f);
  logits[(7 * tokens[n - 1] + 3) % m->n_vocab] = 4.0f;
  return TSR_STATUS_OK;
}

tsr_status model_seq_truncate(tsr_model*, tsr_model_seq* s, size_t n, tsr_error** e) {
  if (s == nullptr || n > s->tokens.size()) {
    ADD_FAILURE() << "seq_truncate past the sequence's length";
    return fail(e, TSR_STATUS_INVALID_ARGUMENT, "seq_truncate: past the end");
  }
  s->tokens.resize(n);
  return TSR_STATUS_OK;
}

tsr_status model_seqs_decode(tsr_model* m, tsr_model_seq* const* seqs, const int32_t* const* tokens, const size_t* n,
                             size_t n_seqs, float* logits, tsr_error** e) {
  for (size_t i = 0; i < n_seqs; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (seqs[j] == seqs[i]) {
        ADD_FAILURE() << "seqs_decode given one sequence twice";
        return fail(e, TSR_STATUS_INVALID_ARGUMENT, "seqs_decode: a sequence appears twice");
      }
    }
  }
  for (size_t i = 0; i < n_seqs; ++i) {
    const tsr_status status = model_seq_decode(m, seqs[i], tokens[i], n[i], logits + i * size_t(m->n_vocab), e);
    if (status != TSR_STATUS_OK) return status;
  }
  return TSR_STATUS_OK;
}

#if TSR_ABI_MINOR >= 7 || TSR_ABI_MAJOR > 2
// The fake head: features of the target's layers 1, 3 and 5 (kTargetEmbd wide each, see
// GoodParams), states kHeadEmbd wide; logits as a plain model's.
constexpr int32_t kHeadEmbd = 12;
constexpr int32_t kFeatureLayers[] = {1, 3, 5};

int32_t model_n_features(const tsr_model* m) { return m->features ? 3 * kTargetEmbd : 0; }
int32_t model_n_embd(const tsr_model*) { return kHeadEmbd; }
int32_t model_feature_layers(const tsr_model* m, int32_t* layers, int32_t capacity) {
  if (!m->features) return 0;
  for (int32_t i = 0; i < capacity && i < 3; ++i) layers[i] = kFeatureLayers[i];
  return 3;
}
const int32_t* model_target_tokens(const tsr_model*) { return nullptr; }

tsr_status model_seqs_decode_features(tsr_model* m, tsr_model_seq* const* seqs, const int32_t* const* tokens,
                                      const size_t* n, const float* const* features, int32_t width, size_t n_seqs,
                                      float* logits, float* states, tsr_error** e) {
  if (!m->features || (width != model_n_features(m) && width != kHeadEmbd) || features == nullptr) {
    ADD_FAILURE() << "seqs_decode_features on a plain model or with feature_width " << width;
    return fail(e, TSR_STATUS_INVALID_ARGUMENT, "seqs_decode_features: bad model or width");
  }
  for (size_t i = 0; i < n_seqs; ++i) {
    for (size_t j = 0; features[i] != nullptr && j < n[i] * size_t(width); ++j) {
      if (!std::isfinite(features[i][j])) {
        ADD_FAILURE() << "seqs_decode_features given a feature that is not finite";
        return fail(e, TSR_STATUS_INVALID_ARGUMENT, "seqs_decode_features: bad feature");
      }
    }
  }
  m->features = false;  // decodes as the plain model does
  const tsr_status status = model_seqs_decode(m, seqs, tokens, n, n_seqs, logits, e);
  m->features = true;
  if (states != nullptr) std::fill_n(states, n_seqs * kHeadEmbd, 0.5f);
  return status;
}

// The conformance host's states are host memory.
tsr_status model_states_read(void*, const tsr_tensor* t, float* out, tsr_error** e) {
  if (t == nullptr || out == nullptr || t->ndim != 3 || t->dtype != TSR_DTYPE_F32) {
    ADD_FAILURE() << "states_read given NULL or not [layers, rows, n_embd] f32 states";
    return fail(e, TSR_STATUS_INVALID_ARGUMENT, "states_read: bad arguments");
  }
  const auto* base = static_cast<const uint8_t*>(t->data);
  for (int64_t l = 0; l < t->shape[0]; ++l) {
    for (int64_t r = 0; r < t->shape[1]; ++r) {
      std::memcpy(out + (l * t->shape[1] + r) * t->shape[2], base + l * t->strides[0] + r * t->strides[1],
                  size_t(t->shape[2]) * sizeof(float));
    }
  }
  return TSR_STATUS_OK;
}
#endif

#if TSR_ABI_MINOR >= 9 || TSR_ABI_MAJOR > 2
tsr_status model_seq_fork(tsr_model* m, tsr_model_seq* s, size_t n, tsr_model_seq** out, tsr_error** e) {
  if (s == nullptr || out == nullptr || n > s->tokens.size()) {
    ADD_FAILURE() << "seq_fork given NULL or a length past the sequence's";
    return fail(e, TSR_STATUS_INVALID_ARGUMENT, "seq_fork: bad arguments");
  }
  ++m->open_seqs;
  *out = new tsr_model_seq();
  (*out)->tokens.assign(s->tokens.begin(), s->tokens.begin() + std::ptrdiff_t(n));
  return TSR_STATUS_OK;
}
#endif

const tsr_model_host kModelHost = {
    sizeof(tsr_model_host), nullptr, model_open, model_close, model_n_vocab, model_token_text,
    model_n_params, model_seq_create, model_seq_destroy, model_seq_decode, model_seq_truncate,
#if TSR_ABI_MINOR >= 6 || TSR_ABI_MAJOR > 2
    model_seqs_decode,
#endif
#if TSR_ABI_MINOR >= 7 || TSR_ABI_MAJOR > 2
    model_n_features, model_n_embd, model_feature_layers, model_target_tokens, model_seqs_decode_features,
    model_states_read,
#endif
#if TSR_ABI_MINOR >= 9 || TSR_ABI_MAJOR > 2
    model_seq_fork,
#endif
};

// ---- the draft under test ----

const tsr_draft_iface& table() { return *static_cast<const tsr_draft_iface*>(plugin().desc->iface); }

std::vector<const char*> vocab_pointers() {
  std::vector<const char*> v;
  for (const std::string& s : vocab_texts()) v.push_back(s.c_str());
  return v;
}

// Parameters any draft kind can work with.

struct GoodParams {
  std::vector<const char*> vocab = vocab_pointers();
  // A draft that takes hidden states gets a head (a feature model), others a plain model.
  tsr_draft_params p{sizeof(tsr_draft_params), kVocab, kMaxDraft, 1, 3,
                     (table().needs & TSR_DRAFT_NEEDS_HIDDEN) != 0 ? "conformance-head.gguf" : "conformance-model.gguf",
                     vocab.data(), 1, 0, 1000000, &kModelHost, nullptr,
#if TSR_ABI_MINOR >= 6 || TSR_ABI_MAJOR > 2
                     kTargetLayers, kTargetEmbd
#endif
  };
};

// Takes the error slot, not its value: the slot is read after the call has filled it
// (the order in which arguments are evaluated is unspecified).
void check(tsr_status status, tsr_error** slot, const std::string& what) {
  tsr_error* error = slot ? *slot : nullptr;
  if (slot) *slot = nullptr;
  if (status != TSR_STATUS_OK) throw std::runtime_error(what + " failed: " + take_error(error));
}

class DraftTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tsr_error* e = nullptr;
    check(table().draft_create(&params_.p, &draft_, &e), &e, "draft_create");
  }
  void TearDown() override {
    table().draft_destroy(draft_);
    EXPECT_EQ(g_open_models, 0) << "draft_destroy left a model open";
    EXPECT_EQ(live_errors(), 0) << "error objects leaked";
  }

  tsr_draft_seq* new_seq(const std::vector<int32_t>& prompt) {
    tsr_draft_seq* seq = nullptr;
    tsr_error* e = nullptr;
    check(table().seq_create(draft_, prompt.data(), prompt.size(), &seq, &e), &e, "seq_create");
    return seq;
  }

  // Proposes with `capacity` and checks the proposal; returns the proposed ids.
  std::vector<int32_t> propose(tsr_draft_seq* seq, const std::vector<int32_t>& history, int32_t capacity) {
    std::vector<int32_t> tokens(static_cast<size_t>(capacity) + 2, -7);  // 2 sentinels
    std::vector<float> probs(tokens.size(), -7.0f);
    tsr_draft_proposal p{sizeof(p), tokens.data(), probs.data(), capacity, 99};
    tsr_error* e = nullptr;
    check(table().propose(draft_, seq, history.data(), history.size(), &p, &e), &e, "propose");
    EXPECT_GE(p.n_tokens, 0);
    EXPECT_LE(p.n_tokens, std::min(capacity, kMaxDraft)) << "more than capacity or max_draft_tokens";
    EXPECT_EQ(tokens[capacity], -7) << "wrote past the capacity";
    EXPECT_EQ(tokens[capacity + 1], -7) << "wrote past the capacity";
    const int32_t n = std::clamp(p.n_tokens, 0, capacity);
    for (int32_t i = 0; i < n; ++i) {
      EXPECT_TRUE(tokens[i] >= 0 && tokens[i] < kVocab) << "token " << tokens[i] << " outside the vocabulary";
      EXPECT_TRUE(probs[i] >= 0 && probs[i] <= 1) << "probability " << probs[i];
    }
    return {tokens.begin(), tokens.begin() + n};
  }

  GoodParams params_;
  tsr_draft* draft_ = nullptr;
  std::mt19937 rng_{7};
};

// Repetitive text (a short cycle with noise) so that lookup drafts find matches.
std::vector<int32_t> repetitive(std::mt19937& rng, size_t n) {
  std::vector<int32_t> v;
  for (size_t i = 0; i < n; ++i) v.push_back(rng() % 5 == 0 ? static_cast<int32_t>(rng() % kVocab) : static_cast<int32_t>(i % 6));
  return v;
}

TEST_F(DraftTest, ProposalsAreWellFormedForEveryCapacity) {
  const std::vector<int32_t> history = repetitive(rng_, 40);
  tsr_draft_seq* seq = new_seq(history);
  for (int32_t capacity = 0; capacity <= kMaxDraft + 2; ++capacity) propose(seq, history, capacity);
  table().seq_destroy(draft_, seq);
}

// ABI 2.8: where the host offers a tree (parents preset to a chain, room for tree_capacity
// tokens), a draft writes a chain or a tree within that room whose paths hold `capacity`
// at most, parents before children, siblings distinct.
TEST_F(DraftTest, TreesAreWellFormedWhereOffered) {
  const std::vector<int32_t> history = repetitive(rng_, 40);
  tsr_draft_seq* seq = new_seq(history);
  for (int32_t capacity = 1; capacity <= kMaxDraft; ++capacity) {
    const int32_t room = 3 * capacity;
    std::vector<int32_t> tokens(static_cast<size_t>(room) + 2, -7), parents(tokens.size(), -7);
    for (int32_t i = 0; i < room; ++i) parents[size_t(i)] = i - 1;
    tsr_draft_proposal p{sizeof(p), tokens.data(), nullptr, capacity, 99, parents.data(), room, 0};
    tsr_error* e = nullptr;
    check(table().propose(draft_, seq, history.data(), history.size(), &p, &e), &e, "propose (tree)");
    ASSERT_GE(p.n_tokens, 0);
    ASSERT_LE(p.n_tokens, room) << "more tokens than tree_capacity";
    EXPECT_EQ(tokens[size_t(room)], -7) << "wrote past tree_capacity";
    EXPECT_EQ(parents[size_t(room)], -7) << "wrote parents past tree_capacity";
    std::vector<int32_t> depth(size_t(p.n_tokens));
    for (int32_t i = 0; i < p.n_tokens; ++i) {
      const int32_t parent = parents[size_t(i)];
      ASSERT_TRUE(parent >= -1 && parent < i) << "token " << i << " follows " << parent << ", not an earlier token";
      depth[size_t(i)] = parent < 0 ? 1 : depth[size_t(parent)] + 1;
      EXPECT_LE(depth[size_t(i)], std::min(capacity, kMaxDraft)) << "a path longer than capacity";
      EXPECT_TRUE(tokens[size_t(i)] >= 0 && tokens[size_t(i)] < kVocab) << "token " << tokens[size_t(i)];
      for (int32_t j = 0; j < i; ++j) {
        EXPECT_FALSE(parents[size_t(j)] == parent && tokens[size_t(j)] == tokens[size_t(i)]) << "siblings " << j << ", " << i;
      }
    }
  }
  table().seq_destroy(draft_, seq);
}

// The engine's loop: propose, accept any prefix, append it and the target's token.
TEST_F(DraftTest, StateFollowsVerifiedHistoryThroughRollbacks) {
  std::vector<int32_t> history = repetitive(rng_, 12);
  tsr_draft_seq* seq = new_seq(history);
  tsr_draft_seq* other = new_seq({1, 2, 3});  // an interleaved second request
  std::vector<int32_t> other_history = {1, 2, 3};
  for (int step = 0; step < 40; ++step) {
    const std::vector<int32_t> proposal = propose(seq, history, 4);
    const auto accepted = static_cast<int32_t>(proposal.empty() ? 0 : rng_() % (proposal.size() + 1));
    history.insert(history.end(), proposal.begin(), proposal.begin() + accepted);
    const auto next = static_cast<int32_t>(rng_() % kVocab);
    history.push_back(next);
    tsr_error* e = nullptr;
    check(table().on_verified(draft_, seq, accepted, next, &e), &e, "on_verified");
    propose(other, other_history, 3);
    other_history.push_back(static_cast<int32_t>(step % 6));
    check(table().on_verified(draft_, other, 0, other_history.back(), &e), &e, "on_verified");
  }
  table().seq_destroy(draft_, seq);
  table().seq_destroy(draft_, other);
}

#if TSR_ABI_MINOR >= 6 || TSR_ABI_MAJOR > 2
// A draft that proposes in batches (ABI 2.6 propose_batch) proposes for each sequence what
// propose() proposes for it alone, and keeps each sequence's state its own.
TEST_F(DraftTest, BatchedProposalsEqualSingleOnes) {
  if (!TSR_STRUCT_HAS(&table(), tsr_draft_iface, propose_batch) || table().propose_batch == nullptr) {
    GTEST_SKIP() << "the draft has no propose_batch";
  }
  std::vector<std::vector<int32_t>> histories = {repetitive(rng_, 30), repetitive(rng_, 7), {3}, repetitive(rng_, 19)};
  std::vector<tsr_draft_seq*> batched, single;
  for (const auto& h : histories) batched.push_back(new_seq(h)), single.push_back(new_seq(h));
  for (int step = 0; step < 6; ++step) {
    std::vector<std::vector<int32_t>> tokens(histories.size());
    std::vector<tsr_draft_proposal> proposals(histories.size());
    std::vector<tsr_draft_proposal*> pointers;
    std::vector<const int32_t*> data;
    std::vector<size_t> lengths;
    for (size_t i = 0; i < histories.size(); ++i) {
      const auto capacity = static_cast<int32_t>((i + step) % (kMaxDraft + 2));
      tokens[i].assign(size_t(capacity) + 1, -7);
      proposals[i] = {sizeof(tsr_draft_proposal), tokens[i].data(), nullptr, capacity, 99};
      pointers.push_back(&proposals[i]), data.push_back(histories[i].data()), lengths.push_back(histories[i].size());
    }
    tsr_error* e = nullptr;
    check(table().propose_batch(draft_, batched.data(), data.data(), lengths.data(), pointers.data(), histories.size(), &e),
          &e, "propose_batch");
    for (size_t i = 0; i < histories.size(); ++i) {
      const std::vector<int32_t> alone = propose(single[i], histories[i], proposals[i].capacity);
      ASSERT_GE(proposals[i].n_tokens, 0);
      ASSERT_LE(proposals[i].n_tokens, proposals[i].capacity);
      EXPECT_EQ(tokens[i].back(), -7) << "wrote past the capacity";
      EXPECT_EQ(std::vector<int32_t>(tokens[i].begin(), tokens[i].begin() + proposals[i].n_tokens), alone)
          << "sequence " << i << ", step " << step;
      // Accept half of the proposal and a target token of our own.
      histories[i].insert(histories[i].end(), alone.begin(), alone.begin() + alone.size() / 2);
      histories[i].push_back(static_cast<int32_t>((step * 5 + i) % kVocab));
    }
  }
  for (size_t i = 0; i < histories.size(); ++i) table().seq_destroy(draft_, batched[i]), table().seq_destroy(draft_, single[i]);
}
#endif

#if TSR_ABI_MINOR >= 6 || TSR_ABI_MAJOR > 2
// A draft that needs hidden states names valid layers and takes states of its request's
// positions, prompt first and then a token at a time, and still proposes well-formed tokens.
TEST_F(DraftTest, HiddenStatesAreTaken) {
  if ((table().needs & TSR_DRAFT_NEEDS_HIDDEN) == 0) GTEST_SKIP() << "the draft needs no hidden states";
  ASSERT_TRUE(TSR_STRUCT_HAS(&table(), tsr_draft_iface, on_hidden) && table().hidden_layers != nullptr &&
              table().on_hidden != nullptr)
      << "TSR_DRAFT_NEEDS_HIDDEN without hidden_layers and on_hidden";
  int32_t layers[TSR_DRAFT_MAX_HIDDEN_LAYERS];
  tsr_error* e = nullptr;
  const int32_t n = table().hidden_layers(draft_, layers, &e);
  if (n < 0) check(TSR_STATUS_INVALID_ARGUMENT, &e, "hidden_layers");
  ASSERT_GE(n, 1);
  ASSERT_LE(n, TSR_DRAFT_MAX_HIDDEN_LAYERS);
  for (int32_t i = 0; i < n; ++i) {
    EXPECT_TRUE(layers[i] >= 0 && layers[i] <= kTargetLayers && (i == 0 || layers[i] > layers[i - 1])) << layers[i];
  }
  std::vector<int32_t> history = repetitive(rng_, 9);
  tsr_draft_seq* seq = new_seq(history);
  std::vector<float> values(size_t(n) * history.size() * kTargetEmbd);
  for (float& v : values) v = static_cast<float>(rng_() % 2001) / 1000.0f - 1.0f;
  const auto give = [&](int64_t first, int64_t rows) {
    tsr_tensor t{};
    t.struct_size = sizeof t;
    t.dtype = TSR_DTYPE_F32;
    t.ndim = 3;
    t.shape[0] = n, t.shape[1] = rows, t.shape[2] = kTargetEmbd;
    t.strides[2] = sizeof(float), t.strides[1] = kTargetEmbd * sizeof(float);
    t.strides[0] = int64_t(history.size()) * kTargetEmbd * sizeof(float);
    t.data = values.data() + first * kTargetEmbd;
    const tsr_draft_hidden h{sizeof(tsr_draft_hidden), &t, first};
    check(table().on_hidden(draft_, seq, &h, &e), &e, "on_hidden");
  };
  give(0, int64_t(history.size()) - 1);  // the prompt less its last token
  propose(seq, history, 4);
  give(int64_t(history.size()) - 1, 1);
  history.push_back(3);
  propose(seq, history, 4);
  table().seq_destroy(draft_, seq);
}
#endif

TEST_F(DraftTest, EmptyPromptAndSingleTokenHistory) {
  tsr_draft_seq* seq = new_seq({});
  propose(seq, {5}, 4);
  table().seq_destroy(draft_, seq);
}

// A failure always comes with an error object. A NULL request handle must not crash; a
// stateless draft may ignore it.
TEST_F(DraftTest, BadCallsFailCleanly) {
  const std::vector<int32_t> history = {1, 2, 1, 2};
  int32_t tokens[4];
  tsr_draft_proposal p{sizeof(p), tokens, nullptr, 4, 0};
  tsr_draft_seq* seq = new_seq(history);
  const auto outcome = [](const char* what, bool must_fail, auto call) {
    tsr_error* e = nullptr;
    const tsr_status status = call(&e);
    if (must_fail) {
      EXPECT_NE(status, TSR_STATUS_OK) << what;
    }
    if (status != TSR_STATUS_OK) {
      EXPECT_NE(e, nullptr) << what << ": no error object";
    }
    take_error(e);
  };
  outcome("NULL proposal", true, [&](tsr_error** e) {
    return table().propose(draft_, seq, history.data(), history.size(), nullptr, e);
  });
  outcome("seq_create NULL out", true, [&](tsr_error** e) {
    return table().seq_create(draft_, history.data(), history.size(), nullptr, e);
  });
  outcome("NULL seq", false, [&](tsr_error** e) {
    return table().propose(draft_, nullptr, history.data(), history.size(), &p, e);
  });
  table().seq_destroy(draft_, seq);
  table().seq_destroy(draft_, nullptr);
  table().draft_destroy(nullptr);
}

TEST(DraftCreate, BadParamsAreRefused) {
  const auto refused = [](const tsr_draft_params* p, tsr_draft** out, const char* what) {
    tsr_error* e = nullptr;
    const tsr_status status = table().draft_create(p, out, &e);
    EXPECT_NE(status, TSR_STATUS_OK) << what;
    EXPECT_NE(e, nullptr) << what << ": no error object";
    take_error(e);
    EXPECT_NE(table().draft_create(p, out, nullptr), TSR_STATUS_OK) << what << " without an error pointer";
  };
  GoodParams good;
  tsr_draft* d = nullptr;
  refused(nullptr, &d, "NULL params");
  refused(&good.p, nullptr, "NULL out");
  GoodParams small;
  small.p.struct_size = 8;
  refused(&small.p, &d, "struct_size 8");
  if (table().needs & TSR_DRAFT_NEEDS_MODEL) {
    GoodParams no_model;
    no_model.p.model_path = nullptr;
    refused(&no_model.p, &d, "a model draft without model_path");
    GoodParams no_host;
    no_host.p.model_host = nullptr;
    refused(&no_host.p, &d, "a model draft without model services");
  }
  EXPECT_EQ(g_open_models, 0) << "a refused draft_create left a model open";
}

}  // namespace
}  // namespace tsr::conformance
