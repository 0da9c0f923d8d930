// The greedy references of a model in ../shared (models/reference/*.ref.jsonl): each line a
// prompt's token ids and the greedy continuation llama.cpp produced for it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/common/shared_data.h"

namespace tsr::testing {

struct GreedyReference {
  std::vector<int32_t> prompt, greedy;
};

// `relative`: the file under ../shared, e.g. "models/reference/stories260K.ref.jsonl".
inline std::vector<GreedyReference> load_greedy_references(const std::string& relative) {
  std::vector<GreedyReference> refs;
  for (const std::string& line : read_lines(shared_path(relative))) {
    const auto j = nlohmann::json::parse(line);
    refs.push_back({j["prompt_ids"].get<std::vector<int32_t>>(), j["greedy_ids"].get<std::vector<int32_t>>()});
  }
  return refs;
}

}  // namespace tsr::testing
