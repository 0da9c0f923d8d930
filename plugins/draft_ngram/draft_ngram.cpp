// Prompt-lookup drafting: the longest suffix of the history (ngram_max down to ngram_min
// tokens) that occurred before proposes the tokens that followed its latest earlier
// occurrence. Free to compute and exact to verify; strong on repetitive text and code.
#include <algorithm>
#include <cstring>
#include <string>

#include "tessera/draft.h"
#include "tessera/sdk/plugin.hpp"
#include "tessera/sdk/status.hpp"

using tsr::sdk::require;

namespace {

// Set by tsr::sdk::query when the host loads the plugin.
using tsr::sdk::g_host;

}  // namespace

struct tsr_draft {
  int32_t ngram_min;
  int32_t ngram_max;
  int32_t max_draft_tokens;
};

struct tsr_draft_seq {};  // prompt lookup reads the history it is given; no state

namespace {

// Start of the latest earlier occurrence of the last n tokens, or -1.
int64_t find_earlier(const int32_t* h, int64_t size, int32_t n) {
  const int32_t* suffix = h + size - n;
  for (int64_t start = size - n - 1; start >= 0; --start) {
    if (std::equal(suffix, suffix + n, h + start)) return start;
  }
  return -1;
}

tsr_status draft_create(const tsr_draft_params* p, tsr_draft** out, tsr_error** error) {
  return tsr::sdk::guard(g_host, error, [&] {
    require(p != nullptr && p->struct_size >= sizeof(tsr_draft_params), "ngram: params too small");
    require(out != nullptr, "ngram: out is NULL");
    require(p->ngram_min >= 1 && p->ngram_max >= p->ngram_min,
            "ngram: need 1 <= ngram_min <= ngram_max (got " + std::to_string(p->ngram_min) +
                ", " + std::to_string(p->ngram_max) + ")");
    require(p->max_draft_tokens >= 1, "ngram: max_draft_tokens must be >= 1");
    *out = new tsr_draft{p->ngram_min, p->ngram_max, p->max_draft_tokens};
  });
}

void draft_destroy(tsr_draft* d) { delete d; }

tsr_status seq_create(tsr_draft*, const int32_t*, size_t, tsr_draft_seq** out, tsr_error** error) {
  return tsr::sdk::guard(g_host, error, [&] {
    require(out != nullptr, "ngram: out is NULL");
    *out = new tsr_draft_seq();
  });
}

void seq_destroy(tsr_draft*, tsr_draft_seq* seq) { delete seq; }

tsr_status propose(tsr_draft* d, tsr_draft_seq*, const int32_t* history, size_t n_history,
                   tsr_draft_proposal* p, tsr_error** error) {
  return tsr::sdk::guard(g_host, error, [&] {
    require(d != nullptr && p != nullptr && p->struct_size >= sizeof(tsr_draft_proposal),
            "ngram: bad proposal");
    require(history != nullptr || n_history == 0, "ngram: history is NULL");
    require(p->tokens != nullptr || p->capacity == 0, "ngram: proposal buffer is NULL");
    p->n_tokens = 0;
    const int64_t size = static_cast<int64_t>(n_history);
    const int32_t k = std::min(p->capacity, d->max_draft_tokens);
    for (int32_t n = std::min<int64_t>(d->ngram_max, size - 1); n >= d->ngram_min; --n) {
      const int64_t start = find_earlier(history, size, n);
      if (start < 0) continue;
      const int64_t from = start + n;  // the tokens that followed the match
      const int32_t count = static_cast<int32_t>(std::min<int64_t>(k, size - from));
      std::copy_n(history + from, count, p->tokens);
      if (p->probs) std::fill_n(p->probs, count, 1.0f);
      p->n_tokens = count;
      return;
    }
  });
}

tsr_status on_verified(tsr_draft*, tsr_draft_seq*, int32_t, int32_t, tsr_error**) {
  return TSR_STATUS_OK;
}

const tsr_draft_iface kIface = {
    sizeof(tsr_draft_iface), TSR_DRAFT_NEEDS_TOKENS, 0, draft_create, draft_destroy,
    seq_create, seq_destroy, propose, on_verified,
};

const tsr_plugin_desc kDesc = {
    sizeof(tsr_plugin_desc), TSR_ABI_MAJOR, TSR_ABI_MINOR, TSR_PLUGIN_DRAFT, "ngram", "0.1.0", &kIface,
};

}  // namespace

extern "C" TSR_EXPORT const tsr_plugin_desc* tsr_plugin_query(const tsr_host_api* host,
                                                               uint32_t host_abi_major,
                                                               uint32_t host_abi_minor) {
  (void)host_abi_minor;  // built for 1.0: any 1.x host reads our 1.0 tables
  return tsr::sdk::query(host, host_abi_major, kDesc);
}
