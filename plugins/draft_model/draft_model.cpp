// Drafting with a second, smaller model of the same vocabulary (e.g. a Q4_0 copy of the
// target as a self-draft). The host runs the model (tsr_model_host); this plugin is the
// strategy: keep the draft model's sequence in step with the request's history, then
// propose its greedy continuation, which verification treats as a point mass (exact).
#include <algorithm>
#include <memory>
#include <cmath>
#include <string>
#include <vector>

#include "tessera/draft.h"
#include "tessera/sdk/plugin.hpp"
#include "tessera/sdk/status.hpp"

using tsr::sdk::Failure;
using tsr::sdk::require;

namespace {

// Set by tsr::sdk::query when the host loads the plugin.
using tsr::sdk::g_host;

// Calls a host entry `call(tsr_error**)`; a failure becomes a Failure carrying its message.
// (The status is taken before the error is read: argument order is unspecified.)
template <class Call>
void call_host(const std::string& what, Call&& call) {
  tsr_error* error = nullptr;
  const tsr_status status = call(&error);
  if (status == TSR_STATUS_OK) return;
  std::string message = what + ": " + (error ? g_host->error_message(error) : "failed");
  g_host->error_free(error);
  throw Failure(status, message);
}

}  // namespace

struct tsr_draft {
  const tsr_model_host* host;
  tsr_model* model;
  int32_t n_vocab;
  int32_t max_draft_tokens;
};

struct tsr_draft_seq {
  tsr_model_seq* seq;
  std::vector<int32_t> known;  // tokens the draft model has computed
  std::vector<float> logits;   // after the last of them
};

namespace {

// A draft must share the target's vocabulary token for token, and be smaller.
void check_compatible(const tsr_draft& d, const tsr_draft_params& p) {
  if (d.n_vocab != p.n_vocab) {
    throw Failure(TSR_STATUS_UNSUPPORTED, "draft model vocabulary has " + std::to_string(d.n_vocab) +
                                              " tokens, the target " + std::to_string(p.n_vocab));
  }
  for (int32_t i = 0; p.vocab != nullptr && i < p.n_vocab; ++i) {
    const char* ours = d.host->model_token_text(d.model, i);
    if (ours == nullptr || std::string(ours) != p.vocab[i]) {
      throw Failure(TSR_STATUS_UNSUPPORTED, "draft model vocabulary differs from the target's at token " +
                                                std::to_string(i) + " ('" + (ours ? ours : "") + "' vs '" +
                                                p.vocab[i] + "')");
    }
  }
  const uint64_t ours = d.host->model_n_params(d.model);
  if (p.target_n_params != 0 && ours > p.target_n_params) {
    throw Failure(TSR_STATUS_UNSUPPORTED, "draft model has " + std::to_string(ours) +
                                              " parameters, more than the target's " +
                                              std::to_string(p.target_n_params));
  }
}

tsr_status draft_create(const tsr_draft_params* p, tsr_draft** out, tsr_error** error) {
  return tsr::sdk::guard(g_host, error, [&] {
    require(p != nullptr && p->struct_size >= sizeof(tsr_draft_params), "draft model: params too small");
    require(out != nullptr, "draft model: out is NULL");
    require(p->model_host != nullptr, "draft model: the host offers no model services");
    require(p->model_path != nullptr && p->model_path[0] != '\0',
            "draft model: no model given ([speculative] draft_model = \"path.gguf\")");
    auto d = std::make_unique<tsr_draft>(tsr_draft{p->model_host, nullptr, 0, p->max_draft_tokens});
    call_host(std::string("draft model ") + p->model_path, [&](tsr_error** e) {
      return d->host->model_open(d->host->context, p->model_path, &d->model, e);
    });
    d->n_vocab = d->host->model_n_vocab(d->model);
    try {
      check_compatible(*d, *p);
    } catch (...) {
      d->host->model_close(d->model);
      throw;
    }
    *out = d.release();
  });
}

void draft_destroy(tsr_draft* d) {
  if (d == nullptr) return;
  d->host->model_close(d->model);
  delete d;
}

tsr_status seq_create(tsr_draft* d, const int32_t*, size_t, tsr_draft_seq** out, tsr_error** error) {
  return tsr::sdk::guard(g_host, error, [&] {
    require(out != nullptr, "draft model: out is NULL");
    auto s = std::make_unique<tsr_draft_seq>();
    call_host("draft model seq_create", [&](tsr_error** e) { return d->host->seq_create(d->model, &s->seq, e); });
    s->logits.resize(static_cast<size_t>(d->n_vocab));
    *out = s.release();
  });
}

void seq_destroy(tsr_draft* d, tsr_draft_seq* s) {
  if (s == nullptr) return;
  d->host->seq_destroy(d->model, s->seq);
  delete s;
}

void decode(tsr_draft& d, tsr_draft_seq& s, const int32_t* tokens, size_t n) {
  call_host("draft model decode",
            [&](tsr_error** e) { return d.host->seq_decode(d.model, s.seq, tokens, n, s.logits.data(), e); });
  s.known.insert(s.known.end(), tokens, tokens + n);
}

// Rolls the draft sequence back to the longest common prefix with `history` and computes
// the rest, leaving the logits of history's last token.
void sync(tsr_draft& d, tsr_draft_seq& s, const int32_t* history, size_t n) {
  size_t common = 0;
  while (common < s.known.size() && common < n && s.known[common] == history[common]) ++common;
  if (common == n && common == s.known.size()) return;
  if (common == n) --common;  // recompute the last token to get its logits back
  call_host("draft model truncate", [&](tsr_error** e) { return d.host->seq_truncate(d.model, s.seq, common, e); });
  s.known.resize(common);
  decode(d, s, history + common, n - common);
}

int32_t argmax(const std::vector<float>& logits, float* prob) {
  const auto best = std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (float l : logits) total += std::exp(double(l - *best));
  *prob = static_cast<float>(1.0 / total);
  return static_cast<int32_t>(best - logits.begin());
}

tsr_status propose(tsr_draft* d, tsr_draft_seq* s, const int32_t* history, size_t n_history,
                   tsr_draft_proposal* p, tsr_error** error) {
  return tsr::sdk::guard(g_host, error, [&] {
    require(d != nullptr && s != nullptr && p != nullptr && p->struct_size >= sizeof(tsr_draft_proposal),
            "draft model: bad proposal");
    require(history != nullptr && n_history > 0, "draft model: empty history");
    p->n_tokens = 0;
    sync(*d, *s, history, n_history);
    const int32_t k = std::min(p->capacity, d->max_draft_tokens);
    for (int32_t i = 0; i < k; ++i) {
      float prob = 0;
      const int32_t token = argmax(s->logits, &prob);
      p->tokens[i] = token;
      if (p->probs) p->probs[i] = prob;
      p->n_tokens = i + 1;
      if (i + 1 < k) decode(*d, *s, &token, 1);  // the last proposal needs no logits
    }
  });
}

// Nothing to do: the next propose() rolls back to the verified history.
tsr_status on_verified(tsr_draft*, tsr_draft_seq*, int32_t, int32_t, tsr_error**) { return TSR_STATUS_OK; }

const tsr_draft_iface kIface = {
    sizeof(tsr_draft_iface), TSR_DRAFT_NEEDS_TOKENS | TSR_DRAFT_NEEDS_MODEL, 0, draft_create,
    draft_destroy, seq_create, seq_destroy, propose, on_verified,
};

const tsr_plugin_desc kDesc = {
    sizeof(tsr_plugin_desc), TSR_ABI_MAJOR, TSR_ABI_MINOR, TSR_PLUGIN_DRAFT, "model", "0.1.0", &kIface,
};

}  // namespace

extern "C" TSR_EXPORT const tsr_plugin_desc* tsr_plugin_query(const tsr_host_api* host,
                                                               uint32_t host_abi_major,
                                                               uint32_t host_abi_minor) {
  (void)host_abi_minor;  // built for 1.0: any 1.x host reads our 1.0 tables
  return tsr::sdk::query(host, host_abi_major, kDesc);
}
