#include "constraints/grammar.h"

#include <algorithm>

#include "constraints/compile_budget.h"
#include "constraints/errors.h"
#include "constraints/footprint.h"

namespace tsr::constraints {

uint32_t Grammar::add_state() {
  if (states_.size() >= kMaxStates) {
    throw CompileError("grammar too large (over " + std::to_string(kMaxStates) +
                       " automaton states; reduce repetition bounds)");
  }
  CompileBudget::charge(1);
  states_.emplace_back();
  return static_cast<uint32_t>(states_.size() - 1);
}

size_t Grammar::bytes() const {
  size_t n = heap_bytes(states_) + heap_bytes(rules_) + heap_bytes(chains_) + heap_bytes(chain_of_) +
             heap_bytes(rule_ids_);
  for (const NfaState& q : states_) n += heap_bytes(q.edges);
  for (const Rule& r : rules_) n += 2 * heap_bytes(r.name);  // and its copy in rule_ids_
  return n;
}

void Grammar::add_byte_edge(uint32_t from, uint8_t lo, uint8_t hi, uint32_t to) {
  states_[from].edges.push_back({EdgeKind::byte, lo, hi, 0, to});
  states_[from].has_byte_edge = true;
}

void Grammar::add_call(uint32_t from, uint32_t rule, uint32_t to) {
  states_[from].edges.push_back({EdgeKind::call, 0, 0, rule, to});
}

void Grammar::add_epsilon(uint32_t from, uint32_t to) {
  states_[from].edges.push_back({EdgeKind::epsilon, 0, 0, 0, to});
}

void Grammar::add_codepoints(uint32_t from, const CodepointSet& set, uint32_t to) {
  for (const CodepointRange& r : set.ranges()) {
    for (const ByteRangeSeq& seq : utf8_sequences(r.lo, r.hi)) {
      uint32_t cur = from;
      for (size_t k = 0; k < seq.size(); ++k) {
        uint32_t next = k + 1 == seq.size() ? to : add_state();
        add_byte_edge(cur, seq[k].first, seq[k].second, next);
        cur = next;
      }
    }
  }
}

void Grammar::add_literal(uint32_t from, std::string_view bytes, uint32_t to) {
  if (bytes.empty()) {
    add_epsilon(from, to);
    return;
  }
  uint32_t cur = from;
  for (size_t k = 0; k < bytes.size(); ++k) {
    uint32_t next = k + 1 == bytes.size() ? to : add_state();
    auto b = static_cast<uint8_t>(bytes[k]);
    add_byte_edge(cur, b, b, next);
    cur = next;
  }
}

uint32_t Grammar::rule_id(std::string_view name) {
  auto [it, inserted] = rule_ids_.emplace(std::string(name), static_cast<uint32_t>(rules_.size()));
  if (inserted) rules_.push_back({std::string(name), 0, false});
  return it->second;
}

void Grammar::define_rule(uint32_t rule, uint32_t start, uint32_t accept) {
  if (rules_[rule].defined) throw CompileError("rule '" + rules_[rule].name + "' defined twice");
  rules_[rule].start = start;
  rules_[rule].defined = true;
  states_[accept].accepting = true;
}

std::vector<bool> Grammar::nullable_rules() const {
  std::vector<bool> nullable(rules_.size(), false);
  // One mark per state, stamped per walk: a fresh vector per rule and pass cost
  // rules x states (a 100,000-character property name: 100,000 rules and states).
  std::vector<uint64_t> seen(states_.size(), 0);
  uint64_t walk = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r] || !rules_[r].defined) continue;
      std::vector<uint32_t> work{rules_[r].start};
      ++walk;
      while (!work.empty() && !nullable[r]) {
        uint32_t q = work.back();
        work.pop_back();
        if (seen[q] == walk) continue;
        seen[q] = walk;
        CompileBudget::charge(1);
        if (states_[q].accepting) nullable[r] = true;
        for (const Edge& e : states_[q].edges) {
          if (e.kind == EdgeKind::epsilon || (e.kind == EdgeKind::call && nullable[e.rule])) {
            work.push_back(e.target);
          }
        }
      }
      changed |= nullable[r];
    }
  }
  return nullable;
}

// For each rule, the rules it may call before consuming any byte.
std::vector<std::vector<uint32_t>> Grammar::left_calls(const std::vector<bool>& nullable) const {
  std::vector<std::vector<uint32_t>> calls(rules_.size());
  std::vector<uint32_t> seen(states_.size(), UINT32_MAX);
  for (uint32_t r = 0; r < rules_.size(); ++r) {
    if (!rules_[r].defined) continue;
    std::vector<uint32_t> work{rules_[r].start};
    while (!work.empty()) {
      uint32_t q = work.back();
      work.pop_back();
      if (seen[q] == r) continue;
      seen[q] = r;
      for (const Edge& e : states_[q].edges) {
        if (e.kind == EdgeKind::call) calls[r].push_back(e.rule);
        if (e.kind == EdgeKind::epsilon || (e.kind == EdgeKind::call && nullable[e.rule])) {
          work.push_back(e.target);
        }
      }
    }
  }
  return calls;
}

void Grammar::validate() const {
  for (const Rule& r : rules_) {
    if (!r.defined) throw CompileError("undefined rule '" + r.name + "'");
  }
  std::vector<std::vector<uint32_t>> calls = left_calls(nullable_rules());
  // Colour-marking DFS over the left-call graph finds any cycle.
  std::vector<uint8_t> colour(rules_.size(), 0);
  std::vector<std::pair<uint32_t, size_t>> stack;
  for (uint32_t r0 = 0; r0 < rules_.size(); ++r0) {
    if (colour[r0]) continue;
    stack.push_back({r0, 0});
    colour[r0] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == calls[r].size()) {
        colour[r] = 2;
        stack.pop_back();
        continue;
      }
      uint32_t next = calls[r][i++];
      if (colour[next] == 1) {
        throw CompileError("unsupported left recursion through rule '" + rules_[next].name + "'");
      }
      if (colour[next] == 0) {
        colour[next] = 1;
        stack.push_back({next, 0});
      }
    }
  }
}

}  // namespace tsr::constraints

namespace tsr::constraints {

void Grammar::add_repeat_chain(const RepeatChain& chain) {
  chains_.push_back(chain);
  chain_of_.resize(states_.size(), 0);
  const uint32_t end = chain.first + chain.block_size * chain.blocks;
  for (uint32_t q = chain.first; q < end; ++q) {
    if (chain_of_[q] == 0) chain_of_[q] = static_cast<uint32_t>(chains_.size());  // inner chains came first
  }
}

void Grammar::finish() {
  validate();
  const std::vector<bool> nullable = nullable_rules();
  for (RepeatChain& c : chains_) {
    if (item_nullable(c, nullable)) c.blocks = 0;
  }
}

// Whether the first item can match the empty string (then counts say nothing of bytes).
bool Grammar::item_nullable(const RepeatChain& chain, const std::vector<bool>& nullable) const {
  std::vector<uint32_t> work{chain.entry};
  std::vector<bool> seen(states_.size(), false);
  while (!work.empty()) {
    uint32_t q = work.back();
    work.pop_back();
    if (q == chain.first) return true;
    if (seen[q]) continue;
    seen[q] = true;
    for (const Edge& e : states_[q].edges) {
      if (e.kind == EdgeKind::epsilon || (e.kind == EdgeKind::call && nullable[e.rule])) work.push_back(e.target);
    }
  }
  return false;
}

Grammar::Equivalent Grammar::horizon_equivalent(uint32_t q, size_t horizon) const {
  if (q >= chain_of_.size() || chain_of_[q] == 0) return {q, horizon};
  const RepeatChain& c = chains_[chain_of_[q] - 1];
  if (c.blocks == 0) return {q, horizon};
  const uint32_t block = (q - c.first) / c.block_size, offset = (q - c.first) % c.block_size;
  // Blocks agree on tokens of h bytes when the items they still need and allow agree
  // up to h + 2.
  const int64_t cap = static_cast<int64_t>(horizon) + 2;
  const int64_t need = std::max<int64_t>(c.min - static_cast<int64_t>(block), 0);
  const int64_t room = c.max < 0 ? cap : c.max - static_cast<int64_t>(block);
  // Before the minimum, block 0 (needing the most); after it, the first block past it
  // (allowing the most).
  const int64_t same = need > 0 ? 0 : c.min;
  const int64_t limit = std::min<int64_t>(need > 0 ? need - 2 : room - 2, static_cast<int64_t>(horizon));
  if (same == block || limit < 1) return {q, horizon};
  return {c.first + static_cast<uint32_t>(same) * c.block_size + offset, static_cast<size_t>(limit)};
}

}  // namespace tsr::constraints
