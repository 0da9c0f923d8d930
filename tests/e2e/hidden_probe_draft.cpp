// A draft plugin for tests that takes the target's hidden states (TSR_DRAFT_NEEDS_HIDDEN)
// and records them: the layers it asks for come from $TSR_HIDDEN_PROBE_LAYERS ("0,2,4"),
// or else the embeddings, the middle layer's input and the last layer's output. It proposes by prompt lookup (what followed
// the last two tokens' latest earlier occurrence), so that verifications accept some drafts
// and reject others. When a request ends it writes the states it received, by position, to
// $TSR_HIDDEN_PROBE_DIR/<FNV-1a of the prompt, hex>-<the sequence's number>.bin: int64
// layers, int64 n_embd, int64 positions received again (a recomputation), then per
// position an int64 position and layers × n_embd floats, in position order.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/sdk/draft.hpp"

namespace {

using tsr::sdk::require;

uint64_t fnv1a(std::span<const int32_t> tokens) {
  uint64_t h = 1469598103934665603ull;
  for (const int32_t t : tokens) {
    for (int b = 0; b < 4; ++b) h = (h ^ ((uint32_t(t) >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

class HiddenProbe {
 public:
  static constexpr uint32_t kNeeds = TSR_DRAFT_NEEDS_TOKENS | TSR_DRAFT_NEEDS_HIDDEN;

  struct Seq {
    uint64_t key = 0;
    int number = 0;  // sequences this draft created before it
    std::map<int64_t, std::vector<float>> states;  // position -> layers × n_embd
    int64_t next = 0;                               // the position after the last received
    int64_t again = 0;                              // positions received a second time
  };

  explicit HiddenProbe(const tsr_draft_params& p) {
    require(TSR_STRUCT_HAS(&p, tsr_draft_params, target_n_embd) && p.target_n_layer > 0 && p.target_n_embd > 0,
            "hidden probe: the host gave no target shape");
    n_embd_ = p.target_n_embd;
    max_draft_tokens_ = p.max_draft_tokens;
    if (const char* env = std::getenv("TSR_HIDDEN_PROBE_LAYERS")) {
      std::stringstream list(env);
      for (std::string item; std::getline(list, item, ',');) layers_.push_back(std::stoi(item));
    } else {
      layers_ = {0, p.target_n_layer / 2, p.target_n_layer};
    }
    const char* dir = std::getenv("TSR_HIDDEN_PROBE_DIR");
    require(dir != nullptr, "hidden probe: set TSR_HIDDEN_PROBE_DIR");
    dir_ = dir;
  }

  std::vector<int32_t> hidden_layers() { return layers_; }

  std::unique_ptr<Seq> seq_create(std::span<const int32_t> prompt) {
    auto s = std::make_unique<Seq>();
    s->key = fnv1a(prompt);
    s->number = created_++;
    return s;
  }

  // Copies each row's layers out of the strided tensor (host memory on the CPU backend).
  void on_hidden(Seq& s, const tsr_tensor& states, int64_t first) {
    require(states.shape[0] == int64_t(layers_.size()) && states.shape[2] == n_embd_, "hidden probe: wrong shape");
    const auto* base = static_cast<const uint8_t*>(states.data);
    for (int64_t j = 0; j < states.shape[1]; ++j) {
      std::vector<float> row(layers_.size() * size_t(n_embd_));
      for (size_t l = 0; l < layers_.size(); ++l) {
        std::memcpy(&row[l * size_t(n_embd_)], base + int64_t(l) * states.strides[0] + j * states.strides[1],
                    size_t(n_embd_) * sizeof(float));
      }
      if (s.states.contains(first + j)) ++s.again;
      s.states[first + j] = std::move(row);
    }
    s.next = first + states.shape[1];
  }

  int32_t propose(Seq&, std::span<const int32_t> history, std::span<int32_t> tokens, std::span<float> probs) {
    const size_t n = history.size();
    if (n < 3) return 0;
    for (size_t i = n - 2; i-- > 0;) {
      if (history[i] != history[n - 2] || history[i + 1] != history[n - 1]) continue;
      int32_t k = 0;
      const size_t cap = std::min(tokens.size(), size_t(max_draft_tokens_));
      for (size_t j = i + 2; j < n && size_t(k) < cap; ++j) {
        tokens[size_t(k)] = history[j];
        if (!probs.empty()) probs[size_t(k)] = 1.0f;
        ++k;
      }
      return k;
    }
    return 0;
  }

  void on_verified(Seq&, int32_t, int32_t) {}

  void seq_destroy(Seq& s) {
    char name[48];
    std::snprintf(name, sizeof name, "%016llx-%d.bin", static_cast<unsigned long long>(s.key), s.number);
    std::ofstream out(dir_ + "/" + name, std::ios::binary);
    const int64_t header[3] = {int64_t(layers_.size()), n_embd_, s.again};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    for (const auto& [pos, row] : s.states) {
      out.write(reinterpret_cast<const char*>(&pos), sizeof pos);
      out.write(reinterpret_cast<const char*>(row.data()), std::streamsize(row.size() * sizeof(float)));
    }
  }

 private:
  std::vector<int32_t> layers_;
  int64_t n_embd_ = 0;
  int32_t max_draft_tokens_ = 0;
  int created_ = 0;
  std::string dir_;
};

}  // namespace

TSR_SDK_DRAFT_PLUGIN(HiddenProbe, "hidden_probe", "0.1.0")
