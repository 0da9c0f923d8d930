// DraftPlugin<Impl>: fills a tsr_draft_iface from a C++ class (see sdk/templates/draft).
//
// Impl provides:
//   static constexpr uint32_t kNeeds = TSR_DRAFT_NEEDS_TOKENS;   // | NEEDS_MODEL, ...
//   struct Seq;                      // per-request state; its destructor releases it
//   explicit Impl(const tsr_draft_params&);                      // throw to refuse
//   std::unique_ptr<Seq> seq_create(std::span<const int32_t> prompt);
//   // Writes up to tokens.size() ids (probs is empty when the host wants none, else as
//   // long as tokens) and returns how many it wrote. Not needed with propose_batch (below)
//   // against ABI 2.8 headers or later: a lone sequence then proposes through it too.
//   int32_t propose(Seq&, std::span<const int32_t> history, std::span<int32_t> tokens,
//                   std::span<float> probs);
//   void on_verified(Seq&, int32_t n_accepted, int32_t next_token);
// and optionally
//   void seq_destroy(Seq&);          // before the Seq is deleted (a request ends), e.g. to
//                                    // keep its output in state shared across requests
//   // ABI 2.6: proposals for several sequences at once (propose_batch); each Batch entry is
//   // what propose() gets for one sequence. Without it, the table's propose_batch is NULL
//   // and the host asks each sequence alone.
//   void propose_batch(std::span<const BatchEntry<Seq>> batch);
//   // ABI 2.6, with TSR_DRAFT_NEEDS_HIDDEN in kNeeds: the target layers whose states it
//   // takes (hidden_layers), and those states for positions of a request (on_hidden).
//   std::vector<int32_t> hidden_layers();
//   void on_hidden(Seq&, const tsr_tensor& states, int64_t first_position);
//   // ABI 2.8, with propose_batch: trees of tokens. With this constant an entry whose host
//   // verifies trees has `parents` as long as `tokens` (preset to a chain), room for the
//   // tree in `tokens` and `depth`, the most tokens on a path (draft.h); else `parents` is
//   // empty and `tokens` holds `depth` tokens, a chain.
//   static constexpr bool kProposesTrees = true;
//   // ABI 2.9: BatchEntry::sampling, how the target draws a sampled request's positions
//   // (tessera/sdk/draft_sampling.hpp runs that draw over a draft's logits).
//
// The generated entries check handles, params and proposal buffers, keep the proposal's
// n_tokens within its capacity, and turn every exception into a status and error object.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/draft.h"
#include "tessera/sdk/plugin.hpp"

namespace tsr::sdk {

// Calls a host entry `call(tsr_error**)` (the model services of a model-running draft); a
// failure becomes a Failure carrying the host's message after `what`. (The status is
// taken before the error is read: argument order is unspecified.)
template <class Call>
void call_host(const std::string& what, Call&& call) {
  tsr_error* error = nullptr;
  const tsr_status status = call(&error);
  if (status == TSR_STATUS_OK) return;
  std::string message = what + ": " + (error ? g_host->error_message(error) : "failed");
  g_host->error_free(error);
  throw Failure(status, message);
}

// The greedy id of a row of logits, and its softmax probability in `prob`.
inline int32_t greedy_token(std::span<const float> logits, float* prob) {
  const auto best = std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (const float l : logits) total += std::exp(double(l - *best));
  *prob = static_cast<float>(1.0 / total);
  return static_cast<int32_t>(best - logits.begin());
}

// One sequence of a propose_batch call: propose()'s arguments, and its result in n_tokens.
template <class Seq>
struct BatchEntry {
  Seq* seq;
  std::span<const int32_t> history;
  std::span<int32_t> tokens;
  std::span<float> probs;
  int32_t* n_tokens;  // out: how many of tokens were written
  std::span<int32_t> parents = {};  // a tree's (kProposesTrees); empty: a chain
  int32_t depth = 0;                // the most tokens on a path
#if TSR_SDK_ABI_AT_LEAST(2, 9)
  // How the target draws the positions (ABI 2.9; sdk/draft_sampling.hpp draws the same way
  // over a draft's logits); NULL for greedy requests and older hosts.
  const tsr_draft_sampling* sampling = nullptr;
#endif
};

template <class Impl>
class DraftPlugin {
  using Seq = typename Impl::Seq;

 public:
  static const tsr_plugin_desc& desc(const char* name, const char* version) {
    static const tsr_plugin_desc d = describe(TSR_PLUGIN_DRAFT, name, version, &iface());
    return d;
  }

  static const tsr_draft_iface& iface() {
    static const tsr_draft_iface t = {
        sizeof(tsr_draft_iface), Impl::kNeeds, 0, draft_create, draft_destroy,
        seq_create, seq_destroy, propose, on_verified,
#if TSR_SDK_ABI_AT_LEAST(2, 6)
        batch_entry(), hidden_layers_entry(), on_hidden_entry(),
#endif
    };
    return t;
  }

 private:
  static tsr_status draft_create(const tsr_draft_params* params, tsr_draft** out,
                                 tsr_error** error) {
    return boundary(error, [&] {
      const tsr_draft_params& p = checked(params, "draft_create");
      require(out != nullptr, "draft_create: out is NULL");
      require(p.n_vocab > 0, "draft_create: n_vocab must be positive");
      require(p.max_draft_tokens >= 1, "draft_create: max_draft_tokens must be >= 1");
      *out = to_handle<tsr_draft>(new Impl(p));
    });
  }

  static void draft_destroy(tsr_draft* d) { delete from_handle<Impl>(d); }

  static tsr_status seq_create(tsr_draft* d, const int32_t* prompt, size_t n_prompt,
                               tsr_draft_seq** out, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = object<Impl>(d, "draft");
      require(out != nullptr, "seq_create: out is NULL");
      require(prompt != nullptr || n_prompt == 0, "seq_create: prompt is NULL");
      *out = to_handle<tsr_draft_seq>(impl.seq_create(std::span(prompt, n_prompt)).release());
    });
  }

  static void seq_destroy(tsr_draft* d, tsr_draft_seq* s) {
    if (s == nullptr) return;
    std::unique_ptr<Seq> seq(from_handle<Seq>(s));
    if constexpr (requires(Impl& impl, Seq& q) { impl.seq_destroy(q); }) {
      if (d != nullptr) {
        try {
          from_handle<Impl>(d)->seq_destroy(*seq);
        } catch (...) {  // nothing may escape a void C entry; a failed hook loses only what it kept
        }
      }
    }
  }

  static tsr_status propose(tsr_draft* d, tsr_draft_seq* s, const int32_t* history,
                            size_t n_history, tsr_draft_proposal* proposal, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = object<Impl>(d, "draft");
      Seq& seq = object<Seq>(s, "propose: seq");
      const tsr_draft_proposal& p = checked(proposal, "propose");
      require(history != nullptr || n_history == 0, "propose: history is NULL");
      require(p.capacity >= 0, "propose: negative capacity");
      require(p.tokens != nullptr || p.capacity == 0, "propose: tokens is NULL");
      proposal->n_tokens = 0;
#if TSR_SDK_ABI_AT_LEAST(2, 8)
      // A batching draft proposes through propose_batch, whose entry carries a tree's room
      // and (ABI 2.9) the request's draws.
      if constexpr (kBatches) {
        const BatchEntry<Seq> e = entry(seq, std::span(history, n_history), *proposal);
        impl.propose_batch(std::span(&e, 1));
        if (proposal->n_tokens < 0 || proposal->n_tokens > static_cast<int32_t>(e.tokens.size())) {
          throw Failure(TSR_STATUS_INTERNAL, "propose wrote " + std::to_string(proposal->n_tokens) +
                                                 " tokens for a capacity of " + std::to_string(e.tokens.size()));
        }
      } else
#endif
      {
        const auto capacity = static_cast<size_t>(p.capacity);
        const int32_t n = impl.propose(seq, std::span(history, n_history), std::span(p.tokens, capacity),
                                       std::span(p.probs, p.probs != nullptr ? capacity : 0));
        if (n < 0 || n > p.capacity) {
          throw Failure(TSR_STATUS_INTERNAL, "propose returned " + std::to_string(n) +
                                                 " tokens for a capacity of " + std::to_string(p.capacity));
        }
        proposal->n_tokens = n;
      }
    });
  }

#if TSR_SDK_ABI_AT_LEAST(2, 6)
  static constexpr bool kBatches = requires(Impl& impl, std::span<const BatchEntry<Seq>> b) { impl.propose_batch(b); };

  static constexpr auto batch_entry() -> decltype(tsr_draft_iface::propose_batch) {
    if constexpr (kBatches) {
      return propose_batch;
    } else {
      return nullptr;
    }
  }

  static constexpr bool kTakesHidden = requires(Impl& impl, Seq& q, const tsr_tensor& t) {
    { impl.hidden_layers() } -> std::convertible_to<std::vector<int32_t>>;
    impl.on_hidden(q, t, int64_t{0});
  };
  static_assert(kTakesHidden || (Impl::kNeeds & TSR_DRAFT_NEEDS_HIDDEN) == 0,
                "a draft needing hidden states defines hidden_layers() and on_hidden(Seq&, const tsr_tensor&, int64_t)");

  static constexpr auto hidden_layers_entry() -> decltype(tsr_draft_iface::hidden_layers) {
    if constexpr (kTakesHidden) {
      return hidden_layers;
    } else {
      return nullptr;
    }
  }
  static constexpr auto on_hidden_entry() -> decltype(tsr_draft_iface::on_hidden) {
    if constexpr (kTakesHidden) {
      return on_hidden;
    } else {
      return nullptr;
    }
  }

  static int32_t hidden_layers(tsr_draft* d, int32_t* layers, tsr_error** error) {
    int32_t n = -1;
    boundary(error, [&] {
      require(layers != nullptr, "hidden_layers: layers is NULL");
      const std::vector<int32_t> want = object<Impl>(d, "draft").hidden_layers();
      require(!want.empty() && want.size() <= TSR_DRAFT_MAX_HIDDEN_LAYERS,
              "hidden_layers: 1 to TSR_DRAFT_MAX_HIDDEN_LAYERS layers");
      std::copy(want.begin(), want.end(), layers);
      n = static_cast<int32_t>(want.size());
    });
    return n;
  }

  static tsr_status on_hidden(tsr_draft* d, tsr_draft_seq* s, const tsr_draft_hidden* hidden, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = object<Impl>(d, "draft");
      Seq& seq = object<Seq>(s, "on_hidden: seq");
      const tsr_draft_hidden& h = checked(hidden, "on_hidden");
      require(h.states != nullptr && h.states->ndim == 3 && h.states->dtype == TSR_DTYPE_F32,
              "on_hidden: states must be f32 [layers, rows, n_embd]");
      require(h.first_position >= 0, "on_hidden: negative first_position");
      impl.on_hidden(seq, *h.states, h.first_position);
    });
  }

  static constexpr bool kTrees = [] {
    if constexpr (requires { Impl::kProposesTrees; }) return Impl::kProposesTrees;
    return false;
  }();
  static_assert(!kTrees || kBatches, "a draft proposing trees defines propose_batch");

  // A proposal's entry: a tree's room where the host verifies trees and the Impl proposes them.
  static BatchEntry<Seq> entry(Seq& seq, std::span<const int32_t> history, tsr_draft_proposal& p) {
    const auto capacity = static_cast<size_t>(p.capacity);
    BatchEntry<Seq> e{&seq, history, std::span(p.tokens, capacity), std::span(p.probs, p.probs != nullptr ? capacity : 0),
                      &p.n_tokens, {}, p.capacity};
#if TSR_SDK_ABI_AT_LEAST(2, 8)
    if (kTrees && TSR_STRUCT_HAS(&p, tsr_draft_proposal, tree_capacity) && p.parents != nullptr &&
        p.tree_capacity > p.capacity) {
      const auto room = static_cast<size_t>(p.tree_capacity);
      e.tokens = std::span(p.tokens, room);
      e.probs = std::span(p.probs, p.probs != nullptr ? room : 0);
      e.parents = std::span(p.parents, room);
    }
#endif
#if TSR_SDK_ABI_AT_LEAST(2, 9)
    if (TSR_STRUCT_HAS(&p, tsr_draft_proposal, sampling) && p.sampling != nullptr &&
        p.sampling->struct_size >= sizeof(tsr_draft_sampling) && p.sampling->uniforms != nullptr &&
        p.sampling->depth >= e.depth) {
      e.sampling = p.sampling;
    }
#endif
    return e;
  }

  // Each proposal is checked as propose() checks it, before the Impl sees any.
  static tsr_status propose_batch(tsr_draft* d, tsr_draft_seq* const* seqs, const int32_t* const* histories,
                                  const size_t* n_histories, tsr_draft_proposal* const* proposals, size_t n,
                                  tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = object<Impl>(d, "draft");
      require(n == 0 || (seqs != nullptr && histories != nullptr && n_histories != nullptr && proposals != nullptr),
              "propose_batch: NULL array");
      std::vector<BatchEntry<Seq>> batch;
      batch.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        const tsr_draft_proposal& p = checked(proposals[i], "propose_batch");
        require(histories[i] != nullptr || n_histories[i] == 0, "propose_batch: history is NULL");
        require(p.capacity >= 0, "propose_batch: negative capacity");
        require(p.tokens != nullptr || p.capacity == 0, "propose_batch: tokens is NULL");
        proposals[i]->n_tokens = 0;
        batch.push_back(entry(object<Seq>(seqs[i], "propose_batch: seq"), std::span(histories[i], n_histories[i]),
                              *proposals[i]));
      }
      impl.propose_batch(std::span<const BatchEntry<Seq>>(batch));
      for (size_t i = 0; i < n; ++i) {
        const int32_t room = static_cast<int32_t>(batch[i].tokens.size());
        if (proposals[i]->n_tokens < 0 || proposals[i]->n_tokens > room) {
          throw Failure(TSR_STATUS_INTERNAL, "propose_batch wrote " + std::to_string(proposals[i]->n_tokens) +
                                                 " tokens for a capacity of " + std::to_string(room));
        }
      }
    });
  }
#endif

  static tsr_status on_verified(tsr_draft* d, tsr_draft_seq* s, int32_t n_accepted,
                                int32_t next_token, tsr_error** error) {
    return boundary(error, [&] {
      Impl& impl = object<Impl>(d, "draft");
      Seq& seq = object<Seq>(s, "on_verified: seq");
      require(n_accepted >= 0, "on_verified: negative n_accepted");
      impl.on_verified(seq, n_accepted, next_token);
    });
  }
};

}  // namespace tsr::sdk

// Defines tsr_plugin_query for draft class `Impl` named `name` (the file is
// libtessera_draft_<name>.so).
#define TSR_SDK_DRAFT_PLUGIN(Impl, name, version) \
  TSR_SDK_DEFINE_QUERY(::tsr::sdk::DraftPlugin<Impl>, name, version)
