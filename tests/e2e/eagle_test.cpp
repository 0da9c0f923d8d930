// EAGLE-3 heads (arch eagle3) beside stories260K: the host's feature-model entries
// (tsr_model_host, ABI 2.7) compute what a plain C++ transcription of llama.cpp's
// llama_model_eagle3 graph computes, for target-feature rows and for the head's own
// states fed back, batched over sequences, with the head's own output matrix, the
// target's, and a reduced vocabulary (d2t); malformed heads are refused by name; and
// speculation with `method = "eagle"` leaves greedy outputs equal to llama.cpp's
// references, alone and batched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/config/config.h"
#include "core/eagle/eagle3_head.h"
#include "core/engine/engine.h"
#include "core/model/gguf.h"
#include "core/model/llama_model.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/spec/model_host.h"
#include "tests/common/eagle_heads.h"
#include "tests/common/greedy_references.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/shared_data.h"
#include "tessera/engine.h"

namespace tsr {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";

// ---- a plain transcription of the head's graph ----

std::vector<float> matvec(const std::vector<float>& m, const std::vector<float>& x, size_t rows) {
  const size_t cols = x.size();
  std::vector<float> y(rows);
  for (size_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (size_t c = 0; c < cols; ++c) acc += double(m[r * cols + c]) * x[c];
    y[r] = float(acc);
  }
  return y;
}

std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& w, float eps) {
  double sum = 0;
  for (const float v : x) sum += double(v) * v;
  const float scale = 1.0f / std::sqrt(float(sum / double(x.size())) + eps);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

// RoPE of llama's NORMAL mode: adjacent pairs, pair i turned by pos * base^(-2i / dim).
void rope(std::vector<float>& v, int heads, int dim, int pos, float base) {
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < dim / 2; ++i) {
      const double theta = pos * std::pow(double(base), -2.0 * i / dim);
      float& a = v[size_t(h * dim + 2 * i)];
      float& b = v[size_t(h * dim + 2 * i + 1)];
      const float x0 = a, x1 = b;
      a = float(x0 * std::cos(theta) - x1 * std::sin(theta));
      b = float(x0 * std::sin(theta) + x1 * std::cos(theta));
    }
  }
}

// One sequence of the head, row after row, with its own K and V.
class ReferenceHead {
 public:
  ReferenceHead(const Eagle3Weights& w, const std::vector<float>& embd, const std::vector<float>& target_output)
      : w_(w), embd_(embd), output_(w.output.empty() ? target_output : w.output) {}

  // A row: its token (a target id) and features (n_features or n_embd wide). Returns the
  // logits; state() is its output state.
  std::vector<float> row(int32_t token, const std::vector<float>& features) {
    const Eagle3Shape& s = w_.shape;
    const size_t e = size_t(s.n_embd);
    const int hd = s.head_dim();
    const std::vector<float> embedding(embd_.begin() + std::ptrdiff_t(size_t(token) * e),
                                       embd_.begin() + std::ptrdiff_t(size_t(token + 1) * e));
    const std::vector<float> g = features.size() == e ? features : matvec(w_.fc, features, e);
    const std::vector<float> gn = rms_norm(g, w_.hidden_norm, s.rms_eps);
    std::vector<float> in = rms_norm(embedding, w_.attn_norm, s.rms_eps);
    in.insert(in.end(), gn.begin(), gn.end());
    std::vector<float> q = matvec(w_.wq, in, size_t(s.n_head * hd));
    std::vector<float> k = matvec(w_.wk, in, size_t(s.n_head_kv * hd));
    keys_.push_back(k);
    values_.push_back(matvec(w_.wv, in, size_t(s.n_head_kv * hd)));
    const int pos = int(keys_.size()) - 1;
    rope(q, s.n_head, hd, pos, s.rope_base);
    rope(keys_.back(), s.n_head_kv, hd, pos, s.rope_base);
    std::vector<float> attn(size_t(s.n_head * hd));
    for (int h = 0; h < s.n_head; ++h) {
      const int kvh = h / (s.n_head / s.n_head_kv);
      std::vector<double> score(keys_.size());
      double best = -1e300;
      for (size_t t = 0; t < keys_.size(); ++t) {
        double dot = 0;
        for (int i = 0; i < hd; ++i) dot += double(q[size_t(h * hd + i)]) * keys_[t][size_t(kvh * hd + i)];
        score[t] = dot / std::sqrt(double(hd));
        best = std::max(best, score[t]);
      }
      double total = 0;
      for (double& v : score) total += (v = std::exp(v - best));
      for (size_t t = 0; t < keys_.size(); ++t) {
        for (int i = 0; i < hd; ++i) attn[size_t(h * hd + i)] += float(score[t] / total * values_[t][size_t(kvh * hd + i)]);
      }
    }
    std::vector<float> x = matvec(w_.wo, attn, e);
    const std::vector<float>& residual = s.norm_before_residual ? gn : g;
    for (size_t i = 0; i < e; ++i) x[i] += residual[i];
    const std::vector<float> hn = rms_norm(x, w_.ffn_norm, s.rms_eps);
    std::vector<float> gate = matvec(w_.w_gate, hn, size_t(s.n_ff));
    const std::vector<float> up = matvec(w_.w_up, hn, size_t(s.n_ff));
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    const std::vector<float> down = matvec(w_.w_down, gate, e);
    for (size_t i = 0; i < e; ++i) x[i] += down[i];
    state_ = x;
    return matvec(output_, rms_norm(x, w_.output_norm, s.rms_eps), size_t(s.n_vocab));
  }
  const std::vector<float>& state() const { return state_; }

 private:
  const Eagle3Weights& w_;
  const std::vector<float>& embd_;
  const std::vector<float>& output_;
  std::vector<std::vector<float>> keys_, values_;
  std::vector<float> state_;
};

double worst_relative(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (1.0 + std::fabs(want[i])));
  }
  return worst;
}

class Eagle : public ::testing::Test {
 protected:
  void SetUp() override {
    TSR_REQUIRE_SHARED(kModel);
    gguf_ = GgufFile::open(testing::shared_path(kModel));
    target_hp_ = llama_hparams_from_gguf(*gguf_);
    // A folder per test process: ctest runs this fixture's tests side by side, and one
    // rewriting a file another has mapped kills that one (SIGBUS).
    scratch_ = std::make_unique<testing::ScratchDir>("eagle_test");
    dir_ = scratch_->path();
  }

  // stories260K's shape for a head over its layers 1, 3 and 5 (the last output).
  Eagle3Shape shape() const {
    Eagle3Shape s;
    s.n_embd = target_hp_.n_embd;
    s.n_head = target_hp_.n_head;
    s.n_head_kv = target_hp_.n_head_kv;
    s.n_ff = 96;
    s.n_vocab = target_hp_.n_vocab;
    s.target_n_embd = target_hp_.n_embd;
    s.n_ctx = target_hp_.n_ctx_train;
    s.rms_eps = target_hp_.rms_eps;
    s.rope_base = target_hp_.rope_freq_base;
    s.layers = {1, 3, 5};
    return s;
  }

  std::string write(const Eagle3Weights& w, const std::string& name) const {
    const std::string path = (dir_ / name).string();
    eagle3_write(w, path);
    return path;
  }

  static Config config() {
    Config c;
    c.model.path = testing::shared_path(kModel);
    c.plugin_dir = TESSERA_PLUGIN_DIR;
    c.backend.threads = 1;
    c.cache.dtype = "f32";  // the reference rounds no K or V
    c.cache.memory_bytes = 16 << 20;
    return c;
  }

  // Runs two sequences through the host's entries (5 and 3 target-feature rows in one call,
  // then 2 rounds of a fed-back state each) and compares every call with the reference.
  void expect_host_matches_reference(const Eagle3Weights& w) {
    const std::string path = write(w, "head.gguf");
    auto backend = Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, "cpu", {TESSERA_PLUGIN_DIR}), 0, 1);
    auto target = LlamaModel::load(gguf_, *backend);
    const Config c = config();
    ModelHost host(*backend, c, *target);
    const tsr_model_host& api = *host.table();
    tsr_model* head = nullptr;
    tsr_error* error = nullptr;
    ASSERT_EQ(api.model_open(api.context, path.c_str(), &head, &error), TSR_STATUS_OK);
    const Eagle3Shape& s = w.shape;
    ASSERT_EQ(api.model_n_features(head), s.n_features());
    ASSERT_EQ(api.model_n_embd(head), s.n_embd);
    ASSERT_EQ(api.model_n_vocab(head), s.n_vocab);
    int32_t layers[8];
    ASSERT_EQ(api.model_feature_layers(head, layers, 8), 3);
    EXPECT_EQ(std::vector<int32_t>(layers, layers + 3), s.layers);
    if (w.d2t.empty()) {
      EXPECT_EQ(api.model_target_tokens(head), nullptr);
    } else {
      ASSERT_NE(api.model_target_tokens(head), nullptr);
      EXPECT_EQ(std::vector<int32_t>(api.model_target_tokens(head), api.model_target_tokens(head) + s.n_vocab), w.d2t);
    }

    const std::vector<float> embd = eagle3_target_tensor(*gguf_, "token_embd.weight");
    const std::vector<float> target_output =
        gguf_->find_tensor("output.weight") ? eagle3_target_tensor(*gguf_, "output.weight") : embd;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::vector<size_t> rows = {5, 3};
    std::vector<ReferenceHead> refs;
    std::vector<tsr_model_seq*> seqs(2);
    std::vector<std::vector<int32_t>> tokens(2);
    std::vector<std::vector<float>> features(2);
    std::vector<std::vector<float>> want_logits(2), want_states(2);
    for (size_t i = 0; i < 2; ++i) {
      refs.emplace_back(w, embd, target_output);
      ASSERT_EQ(api.seq_create(head, &seqs[i], &error), TSR_STATUS_OK);
      for (size_t r = 0; r < rows[i]; ++r) {
        tokens[i].push_back(int32_t(rng() % uint32_t(target_hp_.n_vocab)));
        std::vector<float> f(size_t(s.n_features()));
        for (float& v : f) v = normal(rng);
        features[i].insert(features[i].end(), f.begin(), f.end());
        want_logits[i] = refs[i].row(tokens[i].back(), f);
      }
      want_states[i] = refs[i].state();
    }
    for (int round = 0; round < 3; ++round) {
      const int32_t width = round == 0 ? s.n_features() : s.n_embd;
      std::vector<const int32_t*> token_ptrs = {tokens[0].data(), tokens[1].data()};
      std::vector<size_t> counts = {tokens[0].size(), tokens[1].size()};
      std::vector<const float*> feature_ptrs = {features[0].data(), features[1].data()};
      std::vector<float> logits(2 * size_t(s.n_vocab)), states(2 * size_t(s.n_embd));
      ASSERT_EQ(api.seqs_decode_features(head, seqs.data(), token_ptrs.data(), counts.data(), feature_ptrs.data(),
                                         width, 2, logits.data(), states.data(), &error),
                TSR_STATUS_OK);
      for (size_t i = 0; i < 2; ++i) {
        const std::vector<float> got_logits(logits.begin() + std::ptrdiff_t(i * s.n_vocab),
                                            logits.begin() + std::ptrdiff_t((i + 1) * s.n_vocab));
        const std::vector<float> got_state(states.begin() + std::ptrdiff_t(i * s.n_embd),
                                           states.begin() + std::ptrdiff_t((i + 1) * s.n_embd));
        const double logits_error = worst_relative(got_logits, want_logits[i]);
        const double state_error = worst_relative(got_state, want_states[i]);
        std::printf("round %d sequence %zu: relative difference from the reference %.2g (logits), %.2g (state)\n",
                    round, i, logits_error, state_error);
        EXPECT_LT(logits_error, 1e-4) << "round " << round << " sequence " << i;
        EXPECT_LT(state_error, 1e-4) << "round " << round << " sequence " << i;
        // The next round feeds this state back with a token of its own.
        tokens[i] = {int32_t(rng() % uint32_t(target_hp_.n_vocab))};
        features[i] = got_state;
        want_logits[i] = refs[i].row(tokens[i][0], features[i]);
        want_states[i] = refs[i].state();
      }
    }
    for (tsr_model_seq* seq : seqs) api.seq_destroy(head, seq);
    api.model_close(head);
  }

  // The message of the error opening `w` beside stories260K raises.
  std::string open_error(const Eagle3Weights& w) {
    auto backend = Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, "cpu", {TESSERA_PLUGIN_DIR}), 0, 1);
    auto target = LlamaModel::load(gguf_, *backend);
    try {
      LlamaModel::load(GgufFile::open(write(w, "bad.gguf")), *backend, {}, nullptr, true, target.get());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::shared_ptr<const GgufFile> gguf_;
  LlamaHParams target_hp_;
  std::unique_ptr<testing::ScratchDir> scratch_;
  std::filesystem::path dir_;
};

TEST_F(Eagle, HeadWithItsOwnOutputMatchesTheReference) {
  expect_host_matches_reference(eagle3_random(shape(), 1, 1.5f, true));
}

TEST_F(Eagle, HeadReadingTheTargetsOutputMatchesTheReference) {
  Eagle3Shape s = shape();
  s.norm_before_residual = true;
  expect_host_matches_reference(eagle3_random(s, 2, 1.5f, false));
}

TEST_F(Eagle, HeadOverAReducedVocabularyMapsItsIds) {
  Eagle3Shape s = shape();
  s.n_vocab = 300;
  Eagle3Weights w = eagle3_random(s, 3, 1.5f, true);
  for (int32_t i = 0; i < s.n_vocab; ++i) w.d2t.push_back((i * 7 + 11) % target_hp_.n_vocab);
  expect_host_matches_reference(w);
}

// seq_fork (ABI 2.9): a fork holds its origin's first n positions, shared copy-on-write.
// Its rows, and its origin's later rows, equal those of sequences that computed the same
// tokens from scratch, also when origin and fork decode in one call and both write into
// the block they share; a fork past the origin's tokens is refused by name.
TEST_F(Eagle, ForkedSequencesComputeAsFreshOnes) {
  const std::string path = write(eagle3_random(shape(), 8, 1.5f, true), "fork.gguf");
  auto backend = Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, "cpu", {TESSERA_PLUGIN_DIR}), 0, 1);
  auto target = LlamaModel::load(gguf_, *backend);
  ModelHost host(*backend, config(), *target);
  const tsr_model_host& api = *host.table();
  tsr_model* head = nullptr;
  tsr_error* error = nullptr;
  ASSERT_EQ(api.model_open(api.context, path.c_str(), &head, &error), TSR_STATUS_OK);
  const int32_t width = api.model_n_features(head), n_vocab = api.model_n_vocab(head);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<int32_t> tokens(40);
  for (int32_t& t : tokens) t = int32_t(rng() % uint32_t(target_hp_.n_vocab));
  std::vector<float> features(tokens.size() * size_t(width));
  for (float& f : features) f = normal(rng);
  std::vector<tsr_model_seq*> all;
  auto fresh = [&]() {
    tsr_model_seq* s = nullptr;
    EXPECT_EQ(api.seq_create(head, &s, &error), TSR_STATUS_OK);
    all.push_back(s);
    return s;
  };
  // Decodes rows [from, to) of tokens/features on each sequence (one call); their logits.
  auto decode = [&](std::vector<tsr_model_seq*> seqs, std::vector<std::pair<size_t, size_t>> rows) {
    std::vector<const int32_t*> t;
    std::vector<const float*> f;
    std::vector<size_t> n;
    for (const auto& [from, to] : rows) {
      t.push_back(tokens.data() + from), f.push_back(features.data() + from * size_t(width)), n.push_back(to - from);
    }
    std::vector<float> logits(seqs.size() * size_t(n_vocab));
    EXPECT_EQ(api.seqs_decode_features(head, seqs.data(), t.data(), n.data(), f.data(), width, seqs.size(),
                                       logits.data(), nullptr, &error),
              TSR_STATUS_OK);
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < seqs.size(); ++i) {
      out.emplace_back(logits.begin() + std::ptrdiff_t(i * size_t(n_vocab)),
                       logits.begin() + std::ptrdiff_t((i + 1) * size_t(n_vocab)));
    }
    return out;
  };
  tsr_model_seq* origin = fresh();
  decode({origin}, {{0, 20}});  // two blocks of 16, the second partial
  tsr_model_seq* fork = nullptr;
  ASSERT_EQ(api.seq_fork(head, origin, 13, &fork, &error), TSR_STATUS_OK);
  all.push_back(fork);
  // The fork continues with rows 30..33 after the origin's first 13; the origin goes on
  // with rows 20..24, in the same call: both write into shared block 0 or 1.
  const auto got = decode({fork, origin}, {{30, 34}, {20, 25}});
  tsr_model_seq* a = fresh();
  tsr_model_seq* b = fresh();
  decode({a, b}, {{0, 13}, {0, 20}});
  // Rows 30..33 after 13 rows: tokens[30..34) continue a's 13 tokens.
  const auto want = decode({a, b}, {{30, 34}, {20, 25}});
  EXPECT_LT(worst_relative(got[0], want[0]), 1e-5) << "the fork";
  EXPECT_LT(worst_relative(got[1], want[1]), 1e-5) << "the origin after the fork";
  // A fork of a fork, inside the shared block, then the first fork again.
  tsr_model_seq* grandchild = nullptr;
  ASSERT_EQ(api.seq_fork(head, fork, 15, &grandchild, &error), TSR_STATUS_OK);
  all.push_back(grandchild);
  const auto got2 = decode({grandchild, fork}, {{36, 38}, {34, 35}});
  tsr_model_seq* c = fresh();
  decode({c}, {{0, 13}});
  decode({c}, {{30, 32}});
  const auto want_grandchild = decode({c}, {{36, 38}});
  const auto want_fork = decode({a}, {{34, 35}});
  EXPECT_LT(worst_relative(got2[0], want_grandchild[0]), 1e-5) << "the fork of the fork";
  EXPECT_LT(worst_relative(got2[1], want_fork[0]), 1e-5) << "the fork after its own fork";
  // Two forks at the origin's end and the origin itself, one row each in one call: each
  // computes as a fresh sequence of the same tokens.
  tsr_model_seq* f1 = nullptr;
  tsr_model_seq* f2 = nullptr;
  ASSERT_EQ(api.seq_fork(head, origin, 25, &f1, &error), TSR_STATUS_OK);
  ASSERT_EQ(api.seq_fork(head, origin, 25, &f2, &error), TSR_STATUS_OK);
  all.push_back(f1), all.push_back(f2);
  const auto got3 = decode({f1, f2, origin}, {{26, 27}, {27, 28}, {28, 29}});
  for (size_t i = 0; i < 3; ++i) {
    tsr_model_seq* d = fresh();
    decode({d}, {{0, 20}});
    decode({d}, {{20, 25}});
    const auto want3 = decode({d}, {{26 + i, 27 + i}});
    EXPECT_LT(worst_relative(got3[i], want3[0]), 1e-5) << "sibling " << i;
  }
  tsr_model_seq* bad = nullptr;
  EXPECT_NE(api.seq_fork(head, origin, 27, &bad, &error), TSR_STATUS_OK);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(tsr_error_message(error)).find("beyond the sequence's 26 tokens"), std::string::npos)
      << tsr_error_message(error);
  tsr_error_free(error);
  for (tsr_model_seq* s : all) api.seq_destroy(head, s);
  api.model_close(head);
}

TEST_F(Eagle, MalformedHeadsAreRefusedByName) {
  Eagle3Shape s = shape();
  s.layers = {1, 3, 9};  // stories260K has 5 layers
  EXPECT_NE(open_error(eagle3_random(s, 4, 1.0f, true)).find("extract_layers"), std::string::npos);
  s.layers = {3, 1, 5};
  EXPECT_NE(open_error(eagle3_random(s, 4, 1.0f, true)).find("strictly increasing"), std::string::npos);
  s = shape();
  s.target_n_embd = 32;  // features narrower than the target's states
  EXPECT_NE(open_error(eagle3_random(s, 4, 1.0f, true)).find("features are 96 wide"), std::string::npos);
  s = shape();
  s.n_vocab = 10;
  Eagle3Weights w = eagle3_random(s, 4, 1.0f, true);
  w.d2t.assign(10, 0);
  w.d2t[3] = 100000;
  EXPECT_NE(open_error(w).find("outside the target's vocabulary"), std::string::npos);
  // A head alone is not a model.
  auto backend = Backend::create(Plugin::find(TSR_PLUGIN_BACKEND, "cpu", {TESSERA_PLUGIN_DIR}), 0, 1);
  try {
    LlamaModel::load(GgufFile::open(write(eagle3_random(shape(), 5, 1.0f, true), "alone.gguf")), *backend);
    ADD_FAILURE() << "a head loaded without its target";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("EAGLE-3 head"), std::string::npos) << e.what();
  }
}

// Speculation with a head never changes what a greedy request produces: a random head
// (nearly every draft rejected) and one trained briefly (many accepted).
// Returns the tokens each verifying pass emitted, on average.
double expect_greedy_references(Config c, double min_acceptance) {
  c.speculative.method = "eagle";
  c.speculative.adaptive = false;
  auto engine = Engine::create(c);
  const auto refs = testing::load_greedy_references("models/reference/stories260K.ref.jsonl");
  const auto request = [](const std::vector<int32_t>& prompt, size_t n) {
    RequestParams p;
    p.prompt = prompt;
    p.max_tokens = int32_t(n);
    p.sampling.temperature = 0;
    p.ignore_eos = true;
    return p;
  };
  for (const auto& ref : refs) {
    EXPECT_EQ(engine->generate(request(ref.prompt, ref.greedy.size())).tokens, ref.greedy);
  }
  std::vector<std::vector<int32_t>> outputs(refs.size());
  for (size_t i = 0; i < refs.size(); ++i) {
    engine->submit(request(refs[i].prompt, refs[i].greedy.size()), [&outputs, i](const RequestOutput& o) {
      outputs[i].insert(outputs[i].end(), o.tokens.begin(), o.tokens.end());
    });
  }
  while (engine->step()) {
  }
  for (size_t i = 0; i < refs.size(); ++i) EXPECT_EQ(outputs[i], refs[i].greedy) << i;
  const EngineStats stats = engine->stats();
  EXPECT_GT(stats.draft_tokens, 0);
  std::printf("%lld of %lld drafts accepted, %.2f tokens per verifying pass\n", (long long)stats.accepted_tokens,
              (long long)stats.draft_tokens,
              double(stats.accepted_tokens + stats.verifications) / double(std::max<int64_t>(stats.verifications, 1)));
  EXPECT_GE(double(stats.accepted_tokens), min_acceptance * double(stats.draft_tokens));
  return double(stats.accepted_tokens + stats.verifications) / double(std::max<int64_t>(stats.verifications, 1));
}

TEST_F(Eagle, GreedyOutputsEqualTheReferencesWithARandomHead) {
  Config c = config();
  c.speculative.draft_model = write(eagle3_random(shape(), 6, 1.5f, true), "spec.gguf");
  expect_greedy_references(c, 0.0);
}

TEST_F(Eagle, GreedyOutputsEqualTheReferencesWithATrainedHead) {
  Config c = config();
  c.speculative.draft_model = (dir_ / "trained.gguf").string();
  testing::write_trained_head(testing::shared_path(kModel), c.speculative.draft_model);
  expect_greedy_references(c, 0.1);  // a random head: 2 of 7852
}

// Trees of drafts ([speculative] tree_budget): the chain and EAGLE-2's dynamic tree around
// it (candidates expanded on forks of the head's sequence), verified in one pass with tree
// attention. Greedy output stays the references', alone and batched; a tree holds the
// chain, so its passes emit more tokens than the chain's (measured: 1.76 and 2.22; before
// the head skipped the states of positions it had consumed, 1.96).
TEST_F(Eagle, TreeGreedyOutputsEqualTheReferencesAndEmitMorePerPass) {
  Config c = config();
  c.speculative.draft_model = (dir_ / "trained.gguf").string();
  testing::write_trained_head(testing::shared_path(kModel), c.speculative.draft_model);
  const double chain = expect_greedy_references(c, 0.1);
  c.speculative.tree_budget = 12;
  const double tree = expect_greedy_references(c, 0.02);
  std::printf("tokens per verifying pass: chain %.3f, tree of 12 %.3f\n", chain, tree);
  EXPECT_GT(tree, chain);
}

TEST_F(Eagle, MethodsRefuseTheWrongKindOfFile) {
  Config c = config();
  c.speculative.method = "eagle";
  c.speculative.draft_model = testing::shared_path(kModel);
  try {
    Engine::create(c);
    ADD_FAILURE() << "eagle took a plain model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an EAGLE-3 head"), std::string::npos) << e.what();
  }
  c.speculative.method = "draft_model";
  c.speculative.draft_model = write(eagle3_random(shape(), 8, 1.0f, true), "as_model.gguf");
  try {
    Engine::create(c);
    ADD_FAILURE() << "draft_model took a head";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("method = \"eagle\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tsr
