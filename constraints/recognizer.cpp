#include "constraints/recognizer.h"

#include <algorithm>
#include <cstring>

namespace tsr::constraints {

Recognizer::Recognizer(const Grammar& grammar, const Vocabulary& vocab, const TokenTrie& trie)
    : grammar_(grammar), vocab_(vocab), trie_(trie) {
  nodes_.push_back({0, 0});  // node 0: the empty stack
  std::vector<uint32_t> seeds{node(grammar.rule(grammar.root()).start, 0)};
  initial_ = close_and_intern(seeds);
  walk_states_.resize(trie.max_depth + 1);
}

uint32_t Recognizer::node(uint32_t nfa_state, uint32_t parent) {
  uint64_t key = (static_cast<uint64_t>(nfa_state) << 32) | parent;
  auto [it, inserted] = node_ids_.emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({nfa_state, parent});
  return it->second;
}

// Expands seed stacks through empty edges, calls (push) and rule ends (pop) until every
// stack's top waits for a byte; interns the resulting configuration.
int32_t Recognizer::close_and_intern(std::vector<uint32_t>& work) {
  if (++epoch_ == 0) {
    std::fill(visit_mark_.begin(), visit_mark_.end(), 0);
    epoch_ = 1;
  }
  State st;
  while (!work.empty()) {
    uint32_t n = work.back();
    work.pop_back();
    if (n >= visit_mark_.size()) visit_mark_.resize(nodes_.size() * 2 + 16, 0);
    if (visit_mark_[n] == epoch_) continue;
    visit_mark_[n] = epoch_;
    if (n == 0) {
      st.can_terminate = true;
      continue;
    }
    StackNode sn = nodes_[n];
    const NfaState& q = grammar_.state(sn.nfa_state);
    if (q.has_byte_edge) st.stacks.push_back(n);
    if (q.accepting) work.push_back(sn.parent);
    for (const Edge& e : q.edges) {
      if (e.kind == EdgeKind::epsilon) {
        work.push_back(node(e.target, sn.parent));
      } else if (e.kind == EdgeKind::call) {
        work.push_back(node(grammar_.rule(e.rule).start, node(e.target, sn.parent)));
      }
    }
  }
  if (st.stacks.empty() && !st.can_terminate) return kDead;
  std::sort(st.stacks.begin(), st.stacks.end());
  std::string key(reinterpret_cast<const char*>(st.stacks.data()), st.stacks.size() * 4);
  key += st.can_terminate ? 'T' : 'F';
  auto [it, inserted] = state_ids_.emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (inserted) states_.push_back(std::move(st));
  return it->second;
}

int32_t Recognizer::compute_step(int32_t state, uint8_t byte) {
  std::vector<uint32_t> seeds;
  for (uint32_t n : states_[state].stacks) {
    StackNode sn = nodes_[n];
    for (const Edge& e : grammar_.state(sn.nfa_state).edges) {
      if (e.kind == EdgeKind::byte && e.lo <= byte && byte <= e.hi) {
        seeds.push_back(node(e.target, sn.parent));
      }
    }
  }
  int32_t next = seeds.empty() ? kDead : close_and_intern(seeds);
  State& st = states_[state];  // interning may have moved the vector
  if (!st.next) {
    st.next.reset(new int32_t[256]);
    std::fill_n(st.next.get(), 256, kUnknown);
  }
  st.next[byte] = next;
  return next;
}

const uint32_t* Recognizer::mask(int32_t state) {
  if (states_[state].mask < 0) {
    if (masks_.size() >= kMaxCachedMasks) {
      masks_.clear();
      for (State& s : states_) s.mask = -1;
    }
    std::vector<uint32_t> words(vocab_.mask_words(), 0);
    compute_mask(state, words.data());
    states_[state].mask = static_cast<int32_t>(masks_.size());
    masks_.push_back(std::move(words));
  }
  return masks_[states_[state].mask].data();
}

void Recognizer::compute_mask(int32_t state, uint32_t* words) {
  auto set = [words](uint32_t id) { words[id >> 5] |= 1u << (id & 31); };
  if (states_[state].can_terminate) {
    for (int32_t id : vocab_.eos_ids) set(static_cast<uint32_t>(id));
  }
  const size_t n = trie_.byte.size();
  walk_states_[0] = state;
  for (size_t i = 1; i < n;) {
    int32_t next = step(walk_states_[trie_.depth[i] - 1], trie_.byte[i]);
    if (next == kDead) {
      i = trie_.skip[i];
      continue;
    }
    walk_states_[trie_.depth[i]] = next;
    for (uint32_t k = trie_.tokens_begin[i]; k < trie_.tokens_begin[i + 1]; ++k) set(trie_.ids[k]);
    ++i;
  }
}

}  // namespace tsr::constraints
