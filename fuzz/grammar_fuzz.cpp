// Constraint sources (GBNF, regex, JSON Schema): compiling any text either succeeds or
// throws CompileError naming the problem. A compiled grammar is then walked token by
// token, choices taken from the input, checking the invariants decoding relies on:
// - the mask holds exactly the tokens accept() takes (a fork per token);
// - rollback restores the previous state;
// - for a JSON Schema, an output the grammar lets end is JSON that the schema accepts
//   (where the validator can decide it): the constraint never fails open.
//
// Input: byte 0 picks the kind, the text runs to the first NUL, the bytes after it pick
// tokens among those the mask allows.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "constraints/compiled_grammar.h"
#include "constraints/errors.h"
#include "constraints/matcher.h"
#include "constraints/schema_validate.h"
#include "constraints/synthetic_vocab.h"

namespace {

using namespace tsr::constraints;

constexpr size_t kMaxSteps = 48;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "grammar_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

std::vector<uint32_t> mask_of(const Matcher& m, const Vocabulary& vocab) {
  std::vector<uint32_t> mask(vocab.mask_words());
  m.fill_mask(mask.data());
  return mask;
}

// The allowed tokens, after checking the mask against accept() on forks.
std::vector<int32_t> checked_allowed(const Matcher& m, const Vocabulary& vocab) {
  const std::vector<uint32_t> mask = mask_of(m, vocab);
  std::vector<int32_t> allowed;
  for (size_t id = 0; id < vocab.size(); ++id) {
    Matcher fork = m.fork();
    const bool accepted = fork.accept(static_cast<int32_t>(id));
    if (accepted != testing::mask_has(mask, static_cast<int32_t>(id))) fail("mask and accept() disagree on token", std::to_string(id));
    if (accepted) allowed.push_back(static_cast<int32_t>(id));
  }
  return allowed;
}

// An output the JSON Schema grammar ended must be valid JSON satisfying the schema.
void check_json_output(std::string_view schema_text, const std::string& output) {
  const auto schema = nlohmann::ordered_json::parse(schema_text, nullptr, false);
  const auto instance = nlohmann::ordered_json::parse(output, nullptr, false);
  if (instance.is_discarded()) fail("the schema's grammar ended on text that is not JSON", output);
  try {
    if (!SchemaValidator(schema).valid(instance, schema, "")) {
      fail("the schema's grammar ended on JSON the schema rejects", output);
    }
  } catch (const CompileError&) {
    // a keyword the validator cannot decide: no verdict
  }
}

void walk(const std::shared_ptr<CompiledGrammar>& grammar, ConstraintKind kind, std::string_view text,
          std::string_view choices) {
  const Vocabulary& vocab = grammar->vocab();
  Matcher m(grammar);
  std::string output;
  for (size_t step = 0; step < kMaxSteps && step < choices.size() && !m.is_terminated(); ++step) {
    const std::vector<int32_t> allowed = checked_allowed(m, vocab);
    if (allowed.empty()) break;
    const int32_t id = allowed[static_cast<uint8_t>(choices[step]) % allowed.size()];
    const std::vector<uint32_t> before = mask_of(m, vocab);
    if (!m.accept(id)) fail("an allowed token was refused", std::to_string(id));
    if (step % 7 == 3) {  // rollback and take the same step again: the same states
      const std::vector<uint32_t> after = mask_of(m, vocab);
      if (!m.rollback(1) || mask_of(m, vocab) != before) fail("rollback", std::to_string(step));
      if (!m.accept(id) || mask_of(m, vocab) != after) fail("a step repeated after a rollback differs", std::to_string(id));
    }
    if (!m.is_terminated()) output += vocab.bytes[size_t(id)];
  }
  if (kind == ConstraintKind::json_schema && (m.is_terminated() || m.can_terminate())) {
    check_json_output(text, output);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr ConstraintKind kKinds[] = {ConstraintKind::gbnf, ConstraintKind::regex,
                                              ConstraintKind::json_schema};
  const ConstraintKind kind = kKinds[data[0] % 3];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = rest.find('\0');
  const std::string_view text = rest.substr(0, nul);
  const std::string_view choices = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  std::shared_ptr<CompiledGrammar> grammar;
  try {
    grammar = testing::compile_test(kind, std::string(text));
  } catch (const CompileError&) {
    return 0;
  }
  walk(grammar, kind, text, choices);
  return 0;
}
