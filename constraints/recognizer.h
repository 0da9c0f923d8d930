// The byte-level recognizer behind every matcher: a pushdown automaton whose
// configuration is a set of stacks of NFA states (each stack a path of pending rule
// returns). Stacks are hash-consed into a shared pool and whole configurations are
// interned as numbered states, so that
//   - a state's successor on a byte is computed once and then read from a 256-entry table
//     (a lazily built DFA over configurations), and
//   - a state's token mask is computed once, by walking the vocabulary trie through that
//     table and dropping a whole subtree at its first dead byte, then reused.
// Not thread-safe; CompiledGrammar serializes access.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "constraints/grammar.h"
#include "constraints/vocabulary.h"

namespace tsr::constraints {

class Recognizer {
 public:
  static constexpr int32_t kDead = -1;

  Recognizer(const Grammar& grammar, const Vocabulary& vocab, const TokenTrie& trie);

  int32_t initial() const { return initial_; }
  int32_t step(int32_t state, uint8_t byte) {
    int32_t* next = states_[state].next.get();
    if (next && next[byte] != kUnknown) return next[byte];
    return compute_step(state, byte);
  }
  bool can_terminate(int32_t state) const { return states_[state].can_terminate; }
  // The mask of `state` (vocab.mask_words() words): normal tokens whose bytes can follow,
  // plus the EOS tokens when the grammar can end here.
  const uint32_t* mask(int32_t state);

  size_t n_states() const { return states_.size(); }

 private:
  static constexpr int32_t kUnknown = -2;
  // Masks are 16 KiB for a 128k vocabulary; beyond this many the cache starts over.
  static constexpr size_t kMaxCachedMasks = 4096;

  struct StackNode {
    uint32_t nfa_state;
    uint32_t parent;  // 0: the empty stack
  };
  struct State {
    std::vector<uint32_t> stacks;  // sorted stack-node ids whose top has a byte edge
    bool can_terminate = false;    // the root rule can be complete here
    std::unique_ptr<int32_t[]> next;
    int32_t mask = -1;             // index into masks_
  };

  uint32_t node(uint32_t nfa_state, uint32_t parent);
  int32_t close_and_intern(std::vector<uint32_t>& seeds);
  int32_t compute_step(int32_t state, uint8_t byte);
  void compute_mask(int32_t state, uint32_t* words);

  const Grammar& grammar_;
  const Vocabulary& vocab_;
  const TokenTrie& trie_;
  std::vector<StackNode> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<uint32_t> visit_mark_;
  uint32_t epoch_ = 0;
  std::vector<State> states_;
  std::unordered_map<std::string, int32_t> state_ids_;
  std::vector<std::vector<uint32_t>> masks_;
  std::vector<int32_t> walk_states_;
  int32_t initial_ = kDead;
};

}  // namespace tsr::constraints
