// The byte-level recognizer behind every matcher: a pushdown automaton whose
// configuration is a set of stacks of NFA states (each stack a path of pending rule
// returns). Stacks are hash-consed into a shared pool and whole configurations are
// interned as numbered states, so that
//   - a state's successor on a byte is computed once and then read from a 256-entry table
//     (a lazily built DFA over configurations), and
//   - a state's token mask is computed once, by walking the vocabulary trie through that
//     table and dropping a whole subtree at its first dead byte, then reused.
// A configuration's mask is the union of its stacks' masks, and a stack's mask splits
// into what its top frames accept on their own (context-independent: cached per top
// portion and shared by every stack with that top, e.g. the inside of every JSON string)
// plus, where a token returns below that portion, a walk of the rest of the token from
// the caller. Only the second part is computed per new configuration, and it is small.
// Calls in tail position push no return frame, so right-recursive rules keep stacks
// (and with them the number of configurations) bounded.
// Not thread-safe; CompiledGrammar serializes access.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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
  // The heap memory held: configurations, their step tables and the caches (an estimate:
  // footprint.h). The mask and portion caches start over at their bounds below, about
  // 3 x 4096 masks (192 MiB for a 128k vocabulary) at most; the configurations are not
  // bounded: each new one is kept for the grammar's life.
  size_t bytes() const;

 private:
  static constexpr int32_t kUnknown = -2;
  // Masks are 16 KiB for a 128k vocabulary; beyond this many the cache starts over.
  static constexpr size_t kMaxCachedMasks = 4096;
  // A top portion with more return points than this, below which lies more than
  // 1/kExitSpanShare of the trie, is too small a unit (one JSON string character): the
  // walks after its returns would be most of a full walk, so the portion grows a frame.
  static constexpr size_t kMaxExits = 64;
  static constexpr size_t kExitSpanShare = 16;
  // Cached top portions, as many as masks (their token sets are as large, or sparse).
  static constexpr size_t kMaxCachedPortions = 4096;
  static constexpr size_t kMaxFirstByteIds = size_t{16} << 20;

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

  static constexpr size_t kMaxSharedStates = 1024;  // larger portions are grammar-specific

  bool too_small(const Portion& p) const;
  static size_t portion_bytes(const Portion& p);

  uint32_t node(uint32_t nfa_state, uint32_t parent);
  bool is_tail(uint32_t nfa_state) const;
  int32_t close_and_intern(std::vector<uint32_t>& seeds);
  int32_t compute_step(int32_t state, uint8_t byte);
  void compute_mask(int32_t state, uint32_t* words);
  void add_stack_tokens(uint32_t stack, uint32_t* words);
  // A stack's top portion as itself and as its counterpart that behaves alike for tokens
  // of up to `horizon` bytes (Grammar::horizon_equivalent).
  struct Top {
    uint32_t self = 0, shared = 0;
    size_t horizon = 0;
  };
  Top top_portion(uint32_t stack, uint32_t frames);
  const Portion& portion(const Top& top);
  const Portion& full_portion(uint32_t top);
  Portion near_end_portion(const Top& top);
  std::optional<std::string> structure_key(uint32_t top) const;
  void walk_portion(uint32_t top, size_t longer_than, Portion& out);
  void walk_below(int32_t state, uint32_t root, size_t longer_than, Portion& out);
  const Portion& first_byte_walk(int32_t state, uint32_t root);
  int32_t resume_state(uint32_t stack);
  void walk_subtrie(int32_t from, uint32_t root, uint32_t* words);

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
  std::unordered_map<uint32_t, Portion> portions_;     // by top-portion stack node
  std::unordered_map<uint32_t, uint32_t> portion_frames_;  // stack node → frames in its portion
  std::unordered_map<uint32_t, int32_t> resume_;          // stack node → its closure's state
  // (state, depth-1 trie node) → walk of that node's subtree from the state: portions
  // that enter the same state after their first byte (every position in a property
  // name that may be any other name) share it.
  std::unordered_map<uint64_t, Portion> first_byte_walks_;
  size_t first_byte_ids_ = 0;
  std::vector<int32_t> walk_states_;
  int32_t initial_ = kDead;
};

}  // namespace tsr::constraints
