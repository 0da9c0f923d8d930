#include "apps/tessera/cli_args.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>
#include <utility>

#include "core/config/did_you_mean.h"

namespace tsr::app {

namespace {

// llama.cpp's multi-letter single-dash flags and the long names Tessera registers.
constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kLlamaFlags{{
    {"-ngl", "--n-gpu-layers"},
    {"-ctk", "--cache-type-k"},
    {"-ctv", "--cache-type-v"},
    {"-cnv", "--conversation"},
    {"-sys", "--system-prompt"},
    {"-hf", "--hf-repo"},
    {"-hfr", "--hf-repo"},
}};

class UnknownName : public CLI::ParseError {
 public:
  explicit UnknownName(const std::string& msg) : CLI::ParseError("UnknownName", msg, CLI::ExitCodes::ExtrasError) {}
};

std::string suggestion(std::string_view word, const std::vector<std::string>& names) {
  std::vector<std::string_view> views(names.begin(), names.end());
  const std::string_view guess = closest_name(word, views);
  return guess.empty() ? "" : "; did you mean '" + std::string(guess) + "'?";
}

// "-x" and "--name" forms of every option of `app`, and the llama.cpp spellings that map to one.
std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
  }
  for (const auto& [llama, name] : kLlamaFlags) {
    if (std::find(names.begin(), names.end(), name) != names.end()) names.emplace_back(llama);
  }
  return names;
}

const CLI::App* find_subcommand(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->check_name(name)) return sub;
  }
  return nullptr;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

bool is_number(std::string_view s) {
  return s.size() > 1 && s[0] == '-' && (std::isdigit(static_cast<unsigned char>(s[1])) || s[1] == '.');
}

// The option `flag` names in `app` ("--temp", "-n", or "-n5" for -n 5), or NULL. "-ctk" is
// no "-c tk": letters after a one-letter flag are an unknown flag, never its value.
const CLI::Option* option_for(const CLI::App& app, const std::string& flag) {
  if (flag.starts_with("--") || flag.size() == 2) return app.get_option_no_throw(flag);
  const std::string_view rest = std::string_view(flag).substr(2);
  if (rest.find_first_not_of("0123456789.") != std::string_view::npos) return nullptr;
  const CLI::Option* opt = app.get_option_no_throw(flag.substr(0, 2));
  return opt && opt->get_expected_min() > 0 ? opt : nullptr;
}

}  // namespace

std::vector<std::string> normalize_args(const CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> out;
  const CLI::App* scope = &app;
  bool value_next = false, positional_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (value_next || positional_only || arg == "-" || is_number(arg) || !arg.starts_with("-")) {
      if (!value_next && !positional_only && scope == &app && !arg.starts_with("-")) {
        const CLI::App* sub = find_subcommand(app, arg);
        if (!sub) throw UnknownName("unknown command '" + arg + "'" + suggestion(arg, subcommand_names(app)) +
                                    " (tessera --help lists them)");
        scope = sub;
      }
      value_next = false;
      out.push_back(std::move(arg));
      continue;
    }
    if (arg == "--") {  // the rest is positional
      positional_only = true;
      out.push_back(std::move(arg));
      continue;
    }
    const size_t eq = arg.find('=');
    std::string flag = arg.substr(0, eq);
    for (const auto& [llama, name] : kLlamaFlags) {
      if (flag == llama) flag = name;
    }
    const CLI::Option* opt = option_for(*scope, flag);
    if (!opt && flag != "-h" && flag != "--help" && !(scope == &app && flag == "--version")) {
      const std::string where = scope == &app ? "tessera" : "tessera " + scope->get_name();
      throw UnknownName("unknown flag '" + arg.substr(0, eq) + "' for " + where +
                        suggestion(arg.substr(0, eq), flag_names(*scope)) + " (" + where + " --help lists them)");
    }
    value_next = opt && eq == std::string::npos && opt->get_expected_min() > 0 && flag.size() > 1 &&
                 (flag.starts_with("--") || flag.size() == 2);
    out.push_back(eq == std::string::npos ? flag : flag + arg.substr(eq));
  }
  return out;
}

}  // namespace tsr::app
