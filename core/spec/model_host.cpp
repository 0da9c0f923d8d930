#include "core/spec/model_host.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>

#include "base/error.h"
#include "core/kv/kv_memory.h"
#include "core/model/gguf.h"
#include "core/runner/model_runner.h"
#include "core/plugin_host/host_services.h"
#include "core/tokenizer/vocab.h"

struct tsr_model {
  int64_t* passes;  // the host's count
  std::shared_ptr<const tsr::GgufFile> gguf;
  std::unique_ptr<tsr::LlamaModel> model;
  std::vector<std::string> token_texts;
  std::unique_ptr<tsr::ModelRunner> runner;
  tsr::SeqId next_seq = 1;
  std::vector<float> logits;
  std::vector<float> features, states;  // a feature model's rows, gathered for one pass
  float sharpness = 1.0f;               // [speculative] draft_sharpness
};

struct tsr_model_seq {
  tsr::SeqId id;
  std::vector<int32_t> tokens;  // KV exists for all of them
};

namespace tsr {

struct ModelHostAccess {
  static ModelHost& host(void* context) { return *static_cast<ModelHost*>(context); }
  static Backend& backend(ModelHost& h) { return h.backend_; }
  static const Config& config(ModelHost& h) { return h.config_; }
  static const LlamaModel& target(ModelHost& h) { return h.target_; }
  static int64_t* passes(ModelHost& h) { return &h.passes_; }
  static const BackendBuffer* states_buffer(ModelHost& h) { return h.states_buffer_ ? h.states_buffer_() : nullptr; }
};

namespace {

tsr_status model_open(void* context, const char* path, tsr_model** out, tsr_error** error) {
  return guarded(error, [&] {
    if (path == nullptr || out == nullptr) throw Error("model_open: NULL argument");
    ModelHost& host = ModelHostAccess::host(context);
    Backend& backend = ModelHostAccess::backend(host);
    const Config& config = ModelHostAccess::config(host);
    auto m = std::make_unique<tsr_model>();
    m->passes = ModelHostAccess::passes(host);
    m->sharpness = config.speculative.draft_sharpness;
    m->gguf = GgufFile::open(path);
    m->model = LlamaModel::load(m->gguf, backend, {}, nullptr, true, &ModelHostAccess::target(host));
    // A head has no vocabulary of its own: its ids are the target's (through d2t).
    if (!m->model->hparams().eagle3()) m->token_texts = vocab_from_gguf(*m->gguf).tokens;
    const LlamaHParams& hp = m->model->hparams();
    ModelRunnerOptions ro;
    KvCacheShape shape = ModelRunner::cache_shape(*m->model, config.cache);
    shape.format = kv_format_for_backend(backend, shape.format, config.cache.dtype_is_default());
    ro.block_size = shape.block_size;
    ro.kv = shape.format;
    const uint64_t kv_memory = kv_memory_budget(config.cache.memory_bytes, backend.props(), m->model->weight_bytes());
    ro.num_blocks = kv_cache_num_blocks(shape, kv_memory, hp.n_ctx_train, config.scheduler.max_seqs);
    m->runner = std::make_unique<ModelRunner>(*m->model, backend, ro);
    *out = m.release();
  });
}

void model_close(tsr_model* m) { delete m; }

int32_t model_n_vocab(const tsr_model* m) { return m->model->hparams().n_vocab; }

const char* model_token_text(const tsr_model* m, int32_t id) {
  return id >= 0 && size_t(id) < m->token_texts.size() ? m->token_texts[id].c_str() : nullptr;
}

uint64_t model_n_params(const tsr_model* m) { return m->model->n_params(); }

tsr_status seq_create(tsr_model* m, tsr_model_seq** out, tsr_error** error) {
  return guarded(error, [&] {
    if (out == nullptr) throw Error("seq_create: out is NULL");
    *out = new tsr_model_seq{m->next_seq++, {}};
  });
}

void seq_destroy(tsr_model* m, tsr_model_seq* seq) {
  if (seq == nullptr) return;
  m->runner->kv().free(seq->id);
  delete seq;
}

// Checks one sequence's new tokens and gives their positions blocks. Blocks past the
// sequence's tokens are harmless if a later check fails: the next decode overwrites them.
SequencePart prepare(tsr_model* m, tsr_model_seq* s, const int32_t* tokens, size_t n, const char* what) {
  if (s == nullptr || tokens == nullptr || n == 0) throw Error(std::string(what) + ": NULL argument or no tokens");
  // Tokens index the embeddings: a head's are the target's, of the target's vocabulary.
  const auto n_vocab = static_cast<int32_t>(m->model->tok_embd().shape[0]);
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) throw Error(std::string(what) + ": token id out of range");
  }
  if (s->tokens.size() + n > size_t(m->model->hparams().n_ctx_train)) {
    throw Error(std::string(what) + ": the draft model's context is full");
  }
  const auto start = static_cast<int32_t>(s->tokens.size());
  if (!m->runner->kv().allocate(s->id, start + static_cast<int32_t>(n), start)) {
    throw Error(std::string(what) + ": the draft model's KV cache is full", TSR_STATUS_OUT_OF_MEMORY);
  }
  return {s->id, start, std::span(tokens, n)};
}

// The pass's logits to the draft, times [speculative] draft_sharpness.
void copy_logits(const tsr_model& m, float* out) {
  if (m.sharpness == 1.0f) {
    std::copy(m.logits.begin(), m.logits.end(), out);
    return;
  }
  std::transform(m.logits.begin(), m.logits.end(), out, [k = m.sharpness](float v) { return v * k; });
}

void check_plain(const tsr_model* m, const char* what) {
  if (m->model->hparams().eagle3()) throw Error(std::string(what) + ": an EAGLE-3 head decodes through seqs_decode_features");
}

tsr_status seq_decode(tsr_model* m, tsr_model_seq* s, const int32_t* tokens, size_t n,
                      float* logits, tsr_error** error) {
  return guarded(error, [&] {
    if (logits == nullptr) throw Error("seq_decode: logits is NULL");
    check_plain(m, "seq_decode");
    const SequencePart part = prepare(m, s, tokens, n, "seq_decode");
    m->runner->run_sequence(part.seq, part.start, part.tokens, false, m->logits);
    ++*m->passes;
    s->tokens.insert(s->tokens.end(), tokens, tokens + n);
    copy_logits(*m, logits);
  });
}

// Each sequence's new tokens checked and given blocks; no sequence twice.
std::vector<SequencePart> prepare_all(tsr_model* m, tsr_model_seq* const* seqs, const int32_t* const* tokens,
                                      const size_t* n, size_t n_seqs, const char* what) {
  std::vector<SequencePart> parts;
  for (size_t i = 0; i < n_seqs; ++i) {
    if (seqs[i] != nullptr && std::ranges::any_of(parts, [&](const SequencePart& p) { return p.seq == seqs[i]->id; })) {
      throw Error(std::string(what) + ": a sequence appears twice");
    }
    parts.push_back(prepare(m, seqs[i], tokens[i], n[i], what));
  }
  return parts;
}

tsr_status seqs_decode(tsr_model* m, tsr_model_seq* const* seqs, const int32_t* const* tokens, const size_t* n,
                       size_t n_seqs, float* logits, tsr_error** error) {
  return guarded(error, [&] {
    if (n_seqs == 0) return;
    if (seqs == nullptr || tokens == nullptr || n == nullptr || logits == nullptr) {
      throw Error("seqs_decode: NULL argument");
    }
    check_plain(m, "seqs_decode");
    const std::vector<SequencePart> parts = prepare_all(m, seqs, tokens, n, n_seqs, "seqs_decode");
    m->runner->run_sequences(parts, m->logits);
    ++*m->passes;
    for (size_t i = 0; i < n_seqs; ++i) seqs[i]->tokens.insert(seqs[i]->tokens.end(), tokens[i], tokens[i] + n[i]);
    copy_logits(*m, logits);
  });
}

tsr_status seq_truncate(tsr_model*, tsr_model_seq* s, size_t n, tsr_error** error) {
  return guarded(error, [&] {
    if (s == nullptr) throw Error("seq_truncate: seq is NULL");
    // Positions past n keep stale KV that the next decode overwrites before reading.
    if (n < s->tokens.size()) s->tokens.resize(n);
  });
}

tsr_status seq_fork(tsr_model* m, tsr_model_seq* s, size_t n, tsr_model_seq** out, tsr_error** error) {
  return guarded(error, [&] {
    if (s == nullptr || out == nullptr) throw Error("seq_fork: NULL argument");
    if (n > s->tokens.size()) {
      throw Error("seq_fork: n (" + std::to_string(n) + ") is beyond the sequence's " +
                  std::to_string(s->tokens.size()) + " tokens");
    }
    auto child = std::make_unique<tsr_model_seq>(
        tsr_model_seq{m->next_seq++, std::vector<int32_t>(s->tokens.begin(), s->tokens.begin() + std::ptrdiff_t(n))});
    // The blocks holding the first n positions are shared; a write to a shared block
    // copies it first (KvCacheManager::allocate), so neither sees the other's later tokens.
    if (n > 0) {
      m->runner->kv().fork(s->id, child->id);
      m->runner->kv().truncate(child->id, static_cast<int32_t>(n));
    }
    *out = child.release();
  });
}

int32_t model_n_features(const tsr_model* m) { return m->model->hparams().eagle3_features; }

int32_t model_n_embd(const tsr_model* m) { return m->model->hparams().n_embd; }

int32_t model_feature_layers(const tsr_model* m, int32_t* layers, int32_t capacity) {
  const std::vector<int32_t>& ours = m->model->hparams().eagle3_layers;
  for (int32_t i = 0; layers != nullptr && i < capacity && size_t(i) < ours.size(); ++i) layers[i] = ours[size_t(i)];
  return static_cast<int32_t>(ours.size());
}

const int32_t* model_target_tokens(const tsr_model* m) {
  const std::vector<int32_t>& ids = m->model->target_tokens();
  return ids.empty() ? nullptr : ids.data();
}

tsr_status seqs_decode_features(tsr_model* m, tsr_model_seq* const* seqs, const int32_t* const* tokens, const size_t* n,
                                const float* const* features, int32_t width, size_t n_seqs, float* logits,
                                float* states, tsr_error** error) {
  return guarded(error, [&] {
    if (n_seqs == 0) return;
    if (seqs == nullptr || tokens == nullptr || n == nullptr || features == nullptr || logits == nullptr) {
      throw Error("seqs_decode_features: NULL argument");
    }
    const LlamaHParams& hp = m->model->hparams();
    if (!hp.eagle3()) throw Error("seqs_decode_features: not a feature model (an EAGLE-3 head)");
    if (width != hp.eagle3_features && width != hp.n_embd) {
      throw Error("seqs_decode_features: feature_width " + std::to_string(width) + " is neither model_n_features (" +
                  std::to_string(hp.eagle3_features) + ") nor model_n_embd (" + std::to_string(hp.n_embd) + ")");
    }
    const std::vector<SequencePart> parts = prepare_all(m, seqs, tokens, n, n_seqs, "seqs_decode_features");
    m->features.clear();
    for (size_t i = 0; i < n_seqs; ++i) {
      if (features[i] == nullptr) throw Error("seqs_decode_features: NULL feature rows");
      m->features.insert(m->features.end(), features[i], features[i] + n[i] * size_t(width));
    }
    m->runner->run_head_sequences(parts, m->features.data(), width, m->logits, m->states);
    ++*m->passes;
    for (size_t i = 0; i < n_seqs; ++i) seqs[i]->tokens.insert(seqs[i]->tokens.end(), tokens[i], tokens[i] + n[i]);
    copy_logits(*m, logits);
    if (states != nullptr) std::copy(m->states.begin(), m->states.end(), states);
  });
}

// The engine's states to host memory (a row is n_embd contiguous floats): through the
// buffer they lie in where the engine named it, which is how a device
// backend's states come back (its buffer_read, then a synchronize); otherwise read in
// place, which only host-visible memory allows.
tsr_status states_read(void* context, const tsr_tensor* states, float* out, tsr_error** error) {
  return guarded(error, [&] {
    if (states == nullptr || out == nullptr || states->ndim != 3 || states->dtype != TSR_DTYPE_F32) {
      throw Error("states_read: NULL argument or not f32 [layers, rows, n_embd] states");
    }
    ModelHost& host = ModelHostAccess::host(context);
    Backend& backend = ModelHostAccess::backend(host);
    const BackendBuffer* buffer = ModelHostAccess::states_buffer(host);
    const auto* base = static_cast<const uint8_t*>(states->data);
    const int64_t layers = states->shape[0], rows = states->shape[1], n_embd = states->shape[2];
    const uint64_t row_bytes = uint64_t(n_embd) * sizeof(float);
    if (buffer == nullptr && backend.props().host_visible == 0) {
      throw Error("states_read: backend '" + backend.name() + "' keeps states in device memory and the engine "
                  "named no buffer to read them through", TSR_STATUS_UNSUPPORTED);
    }
    if (layers == 0 || rows == 0) return;
    // A layer's rows in one piece where they are contiguous (the engine's always are).
    const bool packed = states->strides[1] == int64_t(row_bytes);
    const int64_t pieces = packed ? 1 : rows;
    const uint64_t piece_bytes = packed ? row_bytes * uint64_t(rows) : row_bytes;
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t r = 0; r < pieces; ++r) {
        const uint8_t* from = base + l * states->strides[0] + r * states->strides[1];
        float* dst = out + (l * rows + r) * n_embd;
        if (buffer == nullptr) {
          std::memcpy(dst, from, piece_bytes);
          continue;
        }
        const auto at = reinterpret_cast<uintptr_t>(from), begin = reinterpret_cast<uintptr_t>(buffer->base());
        if (at < begin || at - begin + piece_bytes > buffer->size()) {
          throw Error("states_read: the states are not the engine's hidden states of this step");
        }
        backend.read(*buffer, at - begin, dst, piece_bytes);
      }
    }
    if (buffer != nullptr) backend.synchronize();
  });
}

}  // namespace

ModelHost::ModelHost(Backend& backend, const Config& config, const LlamaModel& target)
    : backend_(backend),
      config_(config),
      target_(target),
      table_{sizeof(tsr_model_host), this, model_open, model_close, model_n_vocab, model_token_text,
             model_n_params, seq_create, seq_destroy, seq_decode, seq_truncate, seqs_decode,
             model_n_features, model_n_embd, model_feature_layers, model_target_tokens, seqs_decode_features,
             states_read, seq_fork} {}

}  // namespace tsr
