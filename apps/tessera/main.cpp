// The `tessera` command: run, serve, bench, synth, quantize, maskbench, perplexity, train-eagle, inspect.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include <algorithm>

#include "apps/tessera/cli_args.h"
#include "apps/tessera/commands.h"
#include "apps/tessera/log_format.h"

int main(int argc, char** argv) {
  tsr::app::install_log_format();

  CLI::App app{"Tessera: a plugin-based LLM inference engine"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");

  CLI::App* run = app.add_subcommand("run", "generate text from a prompt");
  std::function<int()> run_action = tsr::app::register_run(*run);

  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  std::function<int()> bench_action = tsr::app::register_bench(*bench);

  CLI::App* serve = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  std::function<int()> serve_action = tsr::app::register_serve(*serve);

  CLI::App* synth = app.add_subcommand("synth", "write a llama GGUF with random weights");
  std::function<int()> synth_action = tsr::app::register_synth(*synth);

  CLI::App* quantize = app.add_subcommand("quantize", "convert a GGUF file's weights to another type");
  std::function<int()> quantize_action = tsr::app::register_quantize(*quantize);

  CLI::App* imatrix = app.add_subcommand("imatrix", "importance matrix of a model on a text (llama-imatrix's), for quantize --imatrix");
  std::function<int()> imatrix_action = tsr::app::register_imatrix(*imatrix);

  CLI::App* maskbench = app.add_subcommand("maskbench", "constrained-decoding benchmark (MaskBench)");
  std::function<int()> maskbench_action = tsr::app::register_maskbench(*maskbench);

  CLI::App* perplexity = app.add_subcommand("perplexity", "perplexity of a text, and KL divergence from a reference model");
  std::function<int()> perplexity_action = tsr::app::register_perplexity(*perplexity);

  CLI::App* train_eagle = app.add_subcommand("train-eagle", "train an EAGLE-3 draft head for a small target on the CPU");
  std::function<int()> train_eagle_action = tsr::app::register_train_eagle(*train_eagle);

  CLI::App* inspect = app.add_subcommand("inspect", "print a GGUF file's metadata and tensors");
  std::string inspect_path;
  bool full_arrays = false;
  inspect->add_option("model", inspect_path, "GGUF file")->required();
  inspect->add_flag("--full", full_arrays, "print arrays in full");

  try {
    // CLI11 parses a vector in reverse order.
    std::vector<std::string> args = tsr::app::normalize_args(app, argc, argv);
    std::reverse(args.begin(), args.end());
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // Whatever a subcommand did not report itself (a missing file, malformed JSON) ends the
  // command with its message and status 1, never with std::terminate.
  try {
    if (run->parsed()) return run_action();
    if (bench->parsed()) return bench_action();
    if (serve->parsed()) return serve_action();
    if (synth->parsed()) return synth_action();
    if (quantize->parsed()) return quantize_action();
    if (imatrix->parsed()) return imatrix_action();
    if (maskbench->parsed()) return maskbench_action();
    if (perplexity->parsed()) return perplexity_action();
    if (train_eagle->parsed()) return train_eagle_action();
    if (inspect->parsed()) return tsr::app::cmd_inspect(inspect_path, full_arrays);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
  }
  return 1;
}
