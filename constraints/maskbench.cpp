#include "constraints/maskbench.h"

#include <chrono>

#include "constraints/errors.h"
#include "constraints/matcher.h"

namespace tsr::constraints {
namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

bool allowed(const std::vector<uint32_t>& mask, int32_t id) {
  return (mask[id >> 5] >> (id & 31)) & 1;
}

// Walks one instance; true when every token (and, for invalid ones, the end) is allowed.
bool walk(const std::shared_ptr<CompiledGrammar>& grammar, const MaskbenchInstance& inst,
          std::vector<uint32_t>& mask, MaskbenchFileResult& result, Clock::time_point deadline,
          bool& timed_out) {
  Matcher m(grammar);
  for (int32_t id : inst.ids) {
    if (Clock::now() > deadline) {
      timed_out = true;
      return false;
    }
    auto t0 = Clock::now();
    m.fill_mask(mask.data());
    result.tbm_us.push_back(micros(t0, Clock::now()));
    if (!allowed(mask, id)) return false;
    if (!m.accept(id)) throw std::logic_error("token in the mask but not accepted");
  }
  return inst.valid || m.can_terminate();
}

}  // namespace

const char* outcome_name(MaskbenchOutcome outcome) {
  switch (outcome) {
    case MaskbenchOutcome::pass: return "pass";
    case MaskbenchOutcome::compile_error: return "compile_error";
    case MaskbenchOutcome::validation_error: return "validation_error";
    case MaskbenchOutcome::invalidation_error: return "invalidation_error";
    case MaskbenchOutcome::crash: return "crash";
    case MaskbenchOutcome::timeout: return "timeout";
  }
  return "?";
}

MaskbenchFileResult run_maskbench_file(const std::string& schema_json,
                                       const std::vector<MaskbenchInstance>& instances,
                                       std::shared_ptr<const Vocabulary> vocab,
                                       std::shared_ptr<const TokenTrie> trie, double time_limit_s) {
  MaskbenchFileResult result;
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(time_limit_s));
  std::vector<uint32_t> mask(vocab->mask_words());
  std::shared_ptr<CompiledGrammar> grammar;
  try {
    grammar = compile(ConstraintKind::json_schema, schema_json, vocab, trie);
    Matcher(grammar).fill_mask(mask.data());
    result.ttfm_us = micros(start, Clock::now());
  } catch (const CompileError& e) {
    result.outcome = MaskbenchOutcome::compile_error;
    result.message = e.what();
    return result;
  } catch (const std::exception& e) {
    result.outcome = MaskbenchOutcome::crash;
    result.message = e.what();
    return result;
  }
  for (size_t i = 0; i < instances.size(); ++i) {
    bool timed_out = false, accepted = false;
    try {
      accepted = walk(grammar, instances[i], mask, result, deadline, timed_out);
    } catch (const std::exception& e) {
      result.outcome = MaskbenchOutcome::crash;
      result.message = "instance " + std::to_string(i) + ": " + e.what();
      return result;
    }
    if (timed_out) {
      result.outcome = MaskbenchOutcome::timeout;
      return result;
    }
    if (accepted != instances[i].valid) {
      bool invalidation = accepted;
      if (invalidation || result.outcome == MaskbenchOutcome::pass) {
        result.outcome = invalidation ? MaskbenchOutcome::invalidation_error : MaskbenchOutcome::validation_error;
        result.message = "instance " + std::to_string(i);
      }
    }
  }
  return result;
}

}  // namespace tsr::constraints
