// The MaskBench protocol (../shared/maskbench/README.md) for one schema file: compile
// (timed as time to first mask), then walk every test instance token by token, timing
// each mask, and classify the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "constraints/vocabulary.h"

namespace tsr::constraints {

struct MaskbenchInstance {
  bool valid = true;
  std::vector<int32_t> ids;
};

enum class MaskbenchOutcome { pass, compile_error, validation_error, invalidation_error, crash, timeout };

struct MaskbenchFileResult {
  MaskbenchOutcome outcome = MaskbenchOutcome::pass;
  std::string message;          // the compile error, or what went wrong
  double ttfm_us = 0;           // compile + first mask; 0 when compilation failed
  std::vector<double> tbm_us;   // one per mask computed
};

// An invalid instance counts as rejected when a token is masked out or, after its last
// token, the grammar cannot end (EOS is masked out). time_limit_s bounds the whole file.
MaskbenchFileResult run_maskbench_file(const std::string& schema_json,
                                       const std::vector<MaskbenchInstance>& instances,
                                       std::shared_ptr<const Vocabulary> vocab,
                                       std::shared_ptr<const TokenTrie> trie, double time_limit_s);

const char* outcome_name(MaskbenchOutcome outcome);

}  // namespace tsr::constraints
