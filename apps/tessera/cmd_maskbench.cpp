// `tessera maskbench DIR --tokenizer tokenizer.json`: the MaskBench protocol
// (../shared/maskbench/README.md) over every DIR/*.json, single thread: per file compile
// the schema, then check every test instance token by token, timing each mask.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/tessera/commands.h"
#include "constraints/json_literal.h"
#include "constraints/maskbench.h"
#include "core/constraint/token_vocab.h"
#include "core/tokenizer/hf_tokenizer_json.h"
#include "core/tokenizer/tokenizer.h"

namespace tsr::app {
namespace {

namespace fs = std::filesystem;
namespace tc = tsr::constraints;
using Json = nlohmann::ordered_json;

struct MaskbenchFlags {
  std::string dir, tokenizer, instances;
  bool json = false;
  double time_limit_s = 60;
  size_t limit = 0;
  std::string filter;
  bool verbose = false;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// file name → instances, from dev-instances.jsonl (exact text and Llama 3.1 ids).
std::map<std::string, std::vector<tc::MaskbenchInstance>> read_instances(const fs::path& path) {
  std::map<std::string, std::vector<tc::MaskbenchInstance>> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    Json j = Json::parse(line);
    out[j["file"].get<std::string>()].push_back({j["valid"].get<bool>(), j["ids"].get<std::vector<int32_t>>()});
  }
  return out;
}

// Without the instance file: serialize like Python's json.dumps and tokenize here.
std::vector<tc::MaskbenchInstance> own_instances(const Json& file, const Tokenizer& tok) {
  std::vector<tc::MaskbenchInstance> out;
  for (const Json& t : file.value("tests", Json::array())) {
    out.push_back({t["valid"].get<bool>(), tok.encode(tc::python_json_dumps(t["data"]), false, false)});
  }
  return out;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

int run_maskbench(const MaskbenchFlags& f) {
  if (f.verbose) spdlog::set_level(spdlog::level::debug);
  auto tokenizer = Tokenizer::create(vocab_from_hf_tokenizer_json(f.tokenizer));
  auto vocab = std::make_shared<const tc::Vocabulary>(tc::vocabulary_from_desc(TokenVocab(*tokenizer).desc()));
  auto trie = std::make_shared<const tc::TokenTrie>(*vocab);
  fs::path instances_path = f.instances.empty() ? fs::path(f.dir) / ".." / "dev-instances.jsonl" : fs::path(f.instances);
  bool have_instances = fs::exists(instances_path);
  auto instances = have_instances ? read_instances(instances_path) : decltype(read_instances({})){};
  spdlog::info("{} tokens; instances from {}", vocab->size(), have_instances ? instances_path.string() : "own serialization");

  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(f.dir)) {
    std::string name = e.path().filename().string();
    if (e.path().extension() == ".json" && name.find(f.filter) != std::string::npos) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (f.limit && files.size() > f.limit) files.resize(f.limit);

  std::map<tc::MaskbenchOutcome, size_t> counts;
  std::vector<double> tbm, ttfm;
  for (const fs::path& path : files) {
    Json file = Json::parse(read_file(path));
    std::string name = path.filename().string();
    spdlog::debug("{}", name);
    auto insts = have_instances ? instances[name] : own_instances(file, *tokenizer);
    tc::MaskbenchFileResult r = tc::run_maskbench_file(file["schema"].dump(), insts, vocab, trie, f.time_limit_s);
    ++counts[r.outcome];
    if (r.outcome != tc::MaskbenchOutcome::compile_error) ttfm.push_back(r.ttfm_us);
    tbm.insert(tbm.end(), r.tbm_us.begin(), r.tbm_us.end());
    if (r.outcome != tc::MaskbenchOutcome::pass) {
      spdlog::info("{}: {} {}", name, tc::outcome_name(r.outcome), r.message);
    }
  }
  double mean = 0;
  for (double t : tbm) mean += t;
  mean = tbm.empty() ? 0 : mean / static_cast<double>(tbm.size());
  double tbm_max = tbm.empty() ? 0 : *std::max_element(tbm.begin(), tbm.end());
  Json j = {{"files", files.size()},
            {"passing", counts[tc::MaskbenchOutcome::pass]},
            {"compile_errors", counts[tc::MaskbenchOutcome::compile_error]},
            {"validation_errors", counts[tc::MaskbenchOutcome::validation_error]},
            {"invalidation_errors", counts[tc::MaskbenchOutcome::invalidation_error]},
            {"crashes", counts[tc::MaskbenchOutcome::crash]},
            {"timeouts", counts[tc::MaskbenchOutcome::timeout]},
            {"tbm_us_mean", mean},
            {"tbm_us_p50", percentile(tbm, 0.5)},
            {"tbm_us_p99", percentile(tbm, 0.99)},
            {"tbm_us_p999", percentile(tbm, 0.999)},
            {"tbm_us_max", tbm_max},
            {"ttfm_us_p50", percentile(ttfm, 0.5)},
            {"ttfm_us_p90", percentile(ttfm, 0.9)},
            {"ttfm_us_p99", percentile(ttfm, 0.99)}};
  fmt::print("| metric | value |\n|---|---|\n");
  for (const auto& [k, v] : j.items()) {
    fmt::print("| {} | {} |\n", k, v.is_number_float() ? fmt::format("{:.1f}", v.get<double>()) : v.dump());
  }
  fmt::print("masks timed: {}\n", tbm.size());
  if (f.json) fmt::print("{}\n", j.dump());
  return 0;
}

}  // namespace

std::function<int()> register_maskbench(CLI::App& app) {
  auto f = std::make_shared<MaskbenchFlags>();
  app.add_option("dir", f->dir, "directory of MaskBench *.json files")->required();
  app.add_option("--tokenizer", f->tokenizer, "Hugging Face tokenizer.json")->required();
  app.add_option("--instances", f->instances, "instances JSONL (default DIR/../dev-instances.jsonl)");
  app.add_flag("--json", f->json, "print one JSON summary line last");
  app.add_option("--time-limit", f->time_limit_s, "seconds per file");
  app.add_option("--limit", f->limit, "only the first N files (sorted by name)");
  app.add_option("--filter", f->filter, "only files whose name contains this");
  app.add_flag("-v,--verbose", f->verbose, "log each file name before running it");
  return [f] { return run_maskbench(*f); };
}

}  // namespace tsr::app
