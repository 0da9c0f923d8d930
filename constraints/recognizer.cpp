#include "constraints/recognizer.h"

#include <algorithm>
#include <cstring>

#include "constraints/compile_budget.h"
#include "constraints/footprint.h"

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

// A call whose return state only ends its rule returns straight to the caller's caller.
bool Recognizer::is_tail(uint32_t nfa_state) const {
  const NfaState& q = grammar_.state(nfa_state);
  return q.accepting && q.edges.empty();
}

// Expands seed stacks through empty edges, calls (push) and rule ends (pop) until every
// stack's top waits for a byte; interns the resulting configuration.
int32_t Recognizer::close_and_intern(std::vector<uint32_t>& work) {
  if (++epoch_ == 0) {
    std::fill(visit_mark_.begin(), visit_mark_.end(), 0);
    epoch_ = 1;
  }
  State st;
  size_t expanded = 0;
  while (!work.empty()) {
    ++expanded;
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
        uint32_t ret = is_tail(e.target) ? sn.parent : node(e.target, sn.parent);
        work.push_back(node(grammar_.rule(e.rule).start, ret));
      }
    }
  }
  CompileBudget::charge(expanded);
  if (st.stacks.empty() && !st.can_terminate) return kDead;
  std::sort(st.stacks.begin(), st.stacks.end());
  std::string key(reinterpret_cast<const char*>(st.stacks.data()), st.stacks.size() * 4);
  key += st.can_terminate ? 'T' : 'F';
  auto [it, inserted] = state_ids_.emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (inserted) states_.push_back(std::move(st));
  return it->second;
}

int32_t Recognizer::compute_step(int32_t state, uint8_t byte) {
  CompileBudget::charge(states_[state].stacks.size());
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
    if (portions_.size() >= kMaxCachedPortions) {
      first_byte_walks_.clear();
      first_byte_ids_ = 0;
      portions_.clear();
      portion_frames_.clear();
      resume_.clear();
    }
    std::vector<uint32_t> words(vocab_.mask_words(), 0);
    compute_mask(state, words.data());
    states_[state].mask = static_cast<int32_t>(masks_.size());
    masks_.push_back(std::move(words));
  }
  return masks_[states_[state].mask].data();
}

void Recognizer::compute_mask(int32_t state, uint32_t* words) {
  if (states_[state].can_terminate) {
    for (int32_t id : vocab_.eos_ids) words[id >> 5] |= 1u << (id & 31);
  }
  const std::vector<uint32_t> stacks = states_[state].stacks;  // walks may grow states_
  for (uint32_t n : stacks) add_stack_tokens(n, words);
}

// The stack's top `frames` frames as a stack of their own (returning from it ends it).
Recognizer::Top Recognizer::top_portion(uint32_t stack, uint32_t frames) {
  if (stack == 0 || frames == 0) return {0, 0, trie_.max_depth};
  StackNode sn = nodes_[stack];
  Top below = top_portion(sn.parent, frames - 1);
  Grammar::Equivalent eq = grammar_.horizon_equivalent(sn.nfa_state, trie_.max_depth);
  return {node(sn.nfa_state, below.self), node(eq.state, below.shared), std::min(eq.horizon, below.horizon)};
}

bool Recognizer::too_small(const Portion& p) const {
  if (p.exits.size() <= kMaxExits) return false;
  size_t span = 0;
  for (uint32_t i : p.exits) span += trie_.skip[i] - i;
  return span * kExitSpanShare > trie_.byte.size();
}

void Recognizer::add_stack_tokens(uint32_t stack, uint32_t* words) {
  auto [it, fresh] = portion_frames_.emplace(stack, 1);
  uint32_t frames = it->second;
  uint32_t rest = stack;
  for (uint32_t i = 0; i < frames; ++i) rest = nodes_[rest].parent;
  while (fresh && rest != 0 && too_small(portion(top_portion(stack, frames)))) {
    ++frames;
    rest = nodes_[rest].parent;
  }
  portion_frames_[stack] = frames;
  const Portion& p = portion(top_portion(stack, frames));
  if (p.words.empty()) {
    for (uint32_t id : p.ids) words[id >> 5] |= 1u << (id & 31);
  } else {
    for (size_t w = 0; w < p.words.size(); ++w) words[w] |= p.words[w];
  }
  if (p.exits.empty()) return;
  const int32_t resume = resume_state(rest);
  if (resume == kDead) return;
  for (uint32_t i : p.exits) {
    for (uint32_t k = trie_.tokens_begin[i]; k < trie_.tokens_begin[i + 1]; ++k) {
      words[trie_.ids[k] >> 5] |= 1u << (trie_.ids[k] & 31);
    }
    walk_subtrie(resume, i, words);
  }
}

int32_t Recognizer::resume_state(uint32_t stack) {
  auto it = resume_.find(stack);
  if (it != resume_.end()) return it->second;
  std::vector<uint32_t> seeds{stack};
  int32_t state = close_and_intern(seeds);
  resume_.emplace(stack, state);
  return state;
}

// The tokens below trie node `root` whose bytes after root's can follow state `from`.
void Recognizer::walk_subtrie(int32_t from, uint32_t root, uint32_t* words) {
  CompileBudget::charge(trie_.skip[root] - root);  // at most: dead bytes skip their subtrees
  walk_states_[trie_.depth[root]] = from;
  for (uint32_t i = root + 1; i < trie_.skip[root];) {
    int32_t next = step(walk_states_[trie_.depth[i] - 1], trie_.byte[i]);
    if (next == kDead) {
      i = trie_.skip[i];
      continue;
    }
    walk_states_[trie_.depth[i]] = next;
    for (uint32_t k = trie_.tokens_begin[i]; k < trie_.tokens_begin[i + 1]; ++k) {
      words[trie_.ids[k] >> 5] |= 1u << (trie_.ids[k] & 31);
    }
    ++i;
  }
}

// What a top portion accepts by itself, shared where it can be.
const Portion& Recognizer::portion(const Top& top) {
  if (top.horizon >= trie_.max_depth) return full_portion(top.shared);
  auto it = portions_.find(top.self);
  if (it != portions_.end()) return it->second;
  return portions_.emplace(top.self, near_end_portion(top)).first->second;
}

const Portion& Recognizer::full_portion(uint32_t top) {
  auto it = portions_.find(top);
  if (it != portions_.end()) return it->second;
  const std::optional<std::string> key = structure_key(top);
  if (key) {
    if (std::optional<Portion> shared = trie_.shared_portions.find(*key)) {
      return portions_.emplace(top, std::move(*shared)).first->second;
    }
  }
  Portion p;
  walk_portion(top, 0, p);
  if (p.ids.size() > vocab_.mask_words()) {
    p.words.assign(vocab_.mask_words(), 0);
    for (uint32_t id : p.ids) p.words[id >> 5] |= 1u << (id & 31);
    p.ids.clear();
    p.ids.shrink_to_fit();
  }
  if (key) trie_.shared_portions.insert(*key, p);
  return portions_.emplace(top, std::move(p)).first->second;
}

// The portion's frames and every NFA state reachable from them (through calls too),
// numbered in discovery order: equal keys, in any grammar, accept alike. Nothing for
// portions that reach too much of their grammar to recur elsewhere.
std::optional<std::string> Recognizer::structure_key(uint32_t top) const {
  std::unordered_map<uint32_t, uint32_t> ids;
  std::vector<uint32_t> order;
  std::string key;
  auto put = [&key](uint32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  auto id = [&](uint32_t q) {
    auto [it, fresh] = ids.emplace(q, static_cast<uint32_t>(order.size()));
    if (fresh) order.push_back(q);
    return it->second;
  };
  for (uint32_t n = top; n != 0; n = nodes_[n].parent) put(id(nodes_[n].nfa_state));
  key += '/';
  for (size_t k = 0; k < order.size(); ++k) {
    if (order.size() > kMaxSharedStates) return std::nullopt;
    const NfaState& q = grammar_.state(order[k]);
    key += q.accepting ? 'A' : 'N';
    for (const Edge& e : q.edges) {
      key += static_cast<char>(e.kind);
      key += static_cast<char>(e.lo);
      key += static_cast<char>(e.hi);
      put(id(e.target));
      if (e.kind == EdgeKind::call) put(id(grammar_.rule(e.rule).start));
    }
    key += '|';
  }
  return key;
}

// A portion near the end of a repetition: the shared portion's tokens of up to
// `horizon` bytes, and its own walk for the longer ones.
Portion Recognizer::near_end_portion(const Top& top) {
  const Portion& shared = full_portion(top.shared);
  Portion p;
  if (!shared.words.empty()) {
    const std::vector<uint32_t>& short_tokens = trie_.tokens_up_to[top.horizon];
    p.words.resize(shared.words.size());
    for (size_t w = 0; w < p.words.size(); ++w) p.words[w] = shared.words[w] & short_tokens[w];
  } else {
    for (uint32_t id : shared.ids) {
      if (vocab_.bytes[id].size() <= top.horizon) p.ids.push_back(id);
    }
  }
  for (uint32_t i : shared.exits) {
    if (trie_.depth[i] <= top.horizon) p.exits.push_back(i);
  }
  Portion longer;
  walk_portion(top.self, top.horizon, longer);
  for (uint32_t id : longer.ids) {
    if (p.words.empty()) {
      p.ids.push_back(id);
    } else {
      p.words[id >> 5] |= 1u << (id & 31);
    }
  }
  p.exits.insert(p.exits.end(), longer.exits.begin(), longer.exits.end());
  std::sort(p.exits.begin(), p.exits.end());
  return p;
}

// One walk of the trie from the portion alone, over tokens longer than `longer_than`
// bytes: those it accepts while some frame of it is still open, and the nodes where it
// has returned.
void Recognizer::walk_portion(uint32_t top, size_t longer_than, Portion& out) {
  std::vector<uint32_t> seeds{top};
  const int32_t start = close_and_intern(seeds);
  for (uint32_t i = 1; i < trie_.byte.size(); i = trie_.skip[i]) {
    if (trie_.deepest[i] <= longer_than) continue;
    const int32_t next = step(start, trie_.byte[i]);
    if (next == kDead) continue;
    if (longer_than > 0) {
      walk_below(next, i, longer_than, out);
      continue;
    }
    const Portion& sub = first_byte_walk(next, i);
    out.ids.insert(out.ids.end(), sub.ids.begin(), sub.ids.end());
    out.exits.insert(out.exits.end(), sub.exits.begin(), sub.exits.end());
  }
}

const Portion& Recognizer::first_byte_walk(int32_t state, uint32_t root) {
  const uint64_t key = (static_cast<uint64_t>(state) << 32) | root;
  auto it = first_byte_walks_.find(key);
  if (it != first_byte_walks_.end()) return it->second;
  if (first_byte_ids_ > kMaxFirstByteIds) {
    first_byte_walks_.clear();
    first_byte_ids_ = 0;
  }
  Portion sub;
  walk_below(state, root, 0, sub);
  first_byte_ids_ += sub.ids.size() + sub.exits.size();
  return first_byte_walks_.emplace(key, std::move(sub)).first->second;
}

// Trie node `root` and its subtree, `state` being where root's bytes lead.
void Recognizer::walk_below(int32_t state, uint32_t root, size_t longer_than, Portion& out) {
  CompileBudget::charge(trie_.skip[root] - root);
  auto record = [&](uint32_t i, int32_t s) {
    if (trie_.depth[i] <= longer_than) return;
    if (!states_[s].stacks.empty()) {
      for (uint32_t k = trie_.tokens_begin[i]; k < trie_.tokens_begin[i + 1]; ++k) out.ids.push_back(trie_.ids[k]);
    }
    if (states_[s].can_terminate) out.exits.push_back(i);
  };
  walk_states_[trie_.depth[root]] = state;
  record(root, state);
  for (uint32_t i = root + 1; i < trie_.skip[root];) {
    if (trie_.deepest[i] <= longer_than) {
      i = trie_.skip[i];
      continue;
    }
    int32_t next = step(walk_states_[trie_.depth[i] - 1], trie_.byte[i]);
    if (next == kDead) {
      i = trie_.skip[i];
      continue;
    }
    walk_states_[trie_.depth[i]] = next;
    record(i, next);
    ++i;
  }
}

size_t Recognizer::bytes() const {
  size_t n = heap_bytes(nodes_) + heap_bytes(node_ids_) + heap_bytes(visit_mark_) + heap_bytes(states_) +
             heap_bytes(state_ids_) + heap_bytes(masks_) + heap_bytes(portions_) + heap_bytes(portion_frames_) +
             heap_bytes(resume_) + heap_bytes(first_byte_walks_) + heap_bytes(walk_states_);
  for (const State& st : states_) n += heap_bytes(st.stacks) + (st.next ? 256 * sizeof(int32_t) : 0);
  for (const auto& [key, id] : state_ids_) n += heap_bytes(key);
  for (const std::vector<uint32_t>& m : masks_) n += heap_bytes(m);
  for (const auto& [top, p] : portions_) n += portion_bytes(p);
  for (const auto& [key, p] : first_byte_walks_) n += portion_bytes(p);
  return n;
}

size_t Recognizer::portion_bytes(const Portion& p) {
  return heap_bytes(p.words) + heap_bytes(p.ids) + heap_bytes(p.exits);
}

}  // namespace tsr::constraints
