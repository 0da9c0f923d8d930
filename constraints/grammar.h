// A context-free grammar over bytes as a recursive transition network: every rule is a
// byte-level NFA whose edges consume a byte range, call another rule, or are empty.
// Character classes over code points are expanded to UTF-8 byte paths when built, so
// the recognizer never needs to know about characters (tokens may split them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "constraints/codepoint_set.h"

namespace tsr::constraints {

enum class EdgeKind : uint8_t { byte, call, epsilon };

struct Edge {
  EdgeKind kind;
  uint8_t lo = 0, hi = 0;  // byte edges: the accepted range
  uint32_t rule = 0;       // call edges: the callee
  uint32_t target = 0;     // the state after the edge (for calls: the return state)
};

struct NfaState {
  std::vector<Edge> edges;
  bool accepting = false;  // the end of its rule
  bool has_byte_edge = false;
};

// A repetition X{min,max} (max < 0: unbounded) laid out as `blocks` equal runs of
// states from `first`: block i is the state after i+1 items, then the states inside the
// copy of X for item i+1. `entry` is the state before the first item.
struct RepeatChain {
  uint32_t entry = 0, first = 0, block_size = 0, blocks = 0;
  int min = 0, max = 0;
};

struct Rule {
  std::string name;
  uint32_t start = 0;
  bool defined = false;
};

class Grammar {
 public:
  // Grammars larger than this are refused, before the state past it is made: they come
  // from huge repetition counts.
  static constexpr size_t kMaxStates = 4'000'000;

  uint32_t add_state();
  void add_byte_edge(uint32_t from, uint8_t lo, uint8_t hi, uint32_t to);
  void add_call(uint32_t from, uint32_t rule, uint32_t to);
  void add_epsilon(uint32_t from, uint32_t to);
  // A path from `from` to `to` for every code point of `set`.
  void add_codepoints(uint32_t from, const CodepointSet& set, uint32_t to);
  void add_literal(uint32_t from, std::string_view bytes, uint32_t to);

  // The id of the rule with this name, declaring it (undefined) on first use.
  uint32_t rule_id(std::string_view name);
  // Makes `start` the rule's entry; `accept` becomes an accepting state.
  void define_rule(uint32_t rule, uint32_t start, uint32_t accept);
  void set_root(uint32_t rule) { root_ = rule; }
  void add_repeat_chain(const RepeatChain& chain);

  // Throws CompileError for undefined rules and left recursion (which a top-down
  // recognizer cannot run); then drops repeat chains whose items can match nothing.
  void finish();

  // A state that accepts exactly what `q` accepts within the next `horizon` bytes at
  // least (shorter when q is near the ends of its repetition): q's counterpart in the
  // block of its repetition far from both ends, compared by the items still needed and
  // allowed (items take a byte at least). Positions in long repetitions (a string's
  // maxLength) thus share most of their token masks.
  struct Equivalent {
    uint32_t state;
    size_t horizon;
  };
  Equivalent horizon_equivalent(uint32_t q, size_t horizon) const;

  const NfaState& state(uint32_t id) const { return states_[id]; }
  const Rule& rule(uint32_t id) const { return rules_[id]; }
  uint32_t root() const { return root_; }
  size_t n_states() const { return states_.size(); }
  size_t n_rules() const { return rules_.size(); }
  // The heap memory held (an estimate: footprint.h).
  size_t bytes() const;

 private:
  void validate() const;
  std::vector<bool> nullable_rules() const;
  bool item_nullable(const RepeatChain& chain, const std::vector<bool>& nullable) const;
  std::vector<std::vector<uint32_t>> left_calls(const std::vector<bool>& nullable) const;

  std::vector<NfaState> states_;
  std::vector<Rule> rules_;
  std::unordered_map<std::string, uint32_t> rule_ids_;
  std::vector<RepeatChain> chains_;
  std::vector<uint32_t> chain_of_;  // per state: 1 + its innermost chain, 0 for none
  uint32_t root_ = 0;
};

}  // namespace tsr::constraints
