// Subcommands of the `tessera` executable. Each returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace tsr::app {

// `tessera inspect MODEL`: GGUF header, metadata and tensor table on stdout.
int cmd_inspect(const std::string& model_path, bool full_arrays);

// `tessera run`: registers its flags on `app` and returns the action to run after parsing.
std::function<int()> register_run(CLI::App& app);

// `tessera bench`: likewise.
std::function<int()> register_bench(CLI::App& app);

// `tessera serve`: the OpenAI-compatible HTTP server.
std::function<int()> register_serve(CLI::App& app);

// `tessera synth OUT`: a random-weight llama GGUF of a preset or given shape.
std::function<int()> register_synth(CLI::App& app);

// `tessera quantize IN OUT TYPE`: converts a GGUF file's weight matrices.
std::function<int()> register_quantize(CLI::App& app);

// `tessera imatrix`: an importance matrix for `quantize --imatrix` (llama-imatrix's).
std::function<int()> register_imatrix(CLI::App& app);

// `tessera maskbench DIR --tokenizer tokenizer.json`: the MaskBench protocol.
std::function<int()> register_maskbench(CLI::App& app);

// `tessera perplexity`.
std::function<int()> register_perplexity(CLI::App& app);

// `tessera train-eagle -m TARGET -o HEAD`: an EAGLE-3 head trained on the CPU.
std::function<int()> register_train_eagle(CLI::App& app);

}  // namespace tsr::app
