// Strict TOML configuration parsing.
//
// Every valid key is one row of kKeys: its table, its name and the function that checks the
// value's type and range and stores it. The unknown-key suggestions come from the same
// table, so the accepted keys and the suggestions cannot drift apart; configs/README.md
// documents the same rows (config_test checks that configs/full.toml sets them all).
#include "core/config/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <sstream>
#include <system_error>
#include <thread>
#include <toml++/toml.h>

#include "core/config/did_you_mean.h"
#include "core/kv/kv_dtype_names.h"
#include "base/error.h"

namespace tsr {
namespace {

namespace fs = std::filesystem;
using Choices = std::span<const std::string_view>;

constexpr std::string_view kGraphModes[] = {"auto", "on", "off"};
constexpr std::string_view kPolicies[] = {"fcfs", "priority"};
constexpr std::string_view kKvEvictions[] = {"none", "streaming"};
constexpr std::string_view kLogLevels[] = {"trace", "debug", "info", "warn", "error", "off"};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string join(Choices items) {
  std::string out;
  for (std::string_view s : items) out += (out.empty() ? "" : ", ") + std::string(s);
  return out;
}

// ---------------------------------------------------------------------------------------
// Reading one value.

struct Context {
  std::string source;  // names the text in messages
  fs::path base_dir;   // relative paths are resolved against it; empty: kept as written
};

std::string_view type_name(toml::node_type t) {
  constexpr std::string_view names[] = {"none",  "table",   "array", "string", "integer",
                                        "float", "boolean", "date",  "time",   "date-time"};
  return names[static_cast<size_t>(t)];
}

std::string where(const Context& ctx, const toml::source_region& src) {
  return fmt::format("{}:{}:{}", ctx.source, src.begin.line, src.begin.column);
}

// A real-valued range [lo, hi], or (lo, hi] when `lo_open`; an infinite `hi` means "no
// upper bound". No key needs an open upper bound.
struct Interval {
  double lo, hi;
  bool lo_open = false;

  bool contains(double v) const { return (lo_open ? v > lo : v >= lo) && v <= hi; }
  std::string describe() const {
    if (std::isinf(hi)) return fmt::format("{} {}", lo_open ? ">" : ">=", lo);
    return fmt::format("in {}{}, {}]", lo_open ? "(" : "[", lo, hi);
  }
};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// One TOML value being read under its full dotted key. Each accessor checks the type and
// the range and throws an error that points at the value.
class Field {
 public:
  Field(const toml::node& node, std::string key, const Context& ctx)
      : node_(node), key_(std::move(key)), ctx_(ctx) {}

  [[noreturn]] void fail(std::string_view what) const {
    throw Error(fmt::format("{}: {}: {}", where(ctx_, node_.source()), key_, what));
  }

  bool boolean() const { return expect<bool>("boolean"); }

  std::string str() const { return expect<std::string>("string"); }

  std::string nonempty_str() const {
    std::string s = str();
    if (s.empty()) fail("must not be empty");
    return s;
  }

  // Relative paths are taken relative to the config file, not the working directory, so a
  // config and the models beside it can be moved together.
  std::string path() const {
    const fs::path p = str();
    if (p.empty() || p.is_absolute() || ctx_.base_dir.empty()) return p.string();
    return (ctx_.base_dir / p).lexically_normal().string();
  }

  // A built-in chat template's name (letters, digits, '-', '_') as it is; anything else is
  // a file, relative to the config file's folder.
  std::string template_ref() const {
    const std::string v = nonempty_str();
    const bool name = v.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") == std::string::npos;
    return name ? v : path();
  }

  // A browser origin ("https://app.example:8443", no path) or "*" for any.
  std::string origin() const {
    std::string v = nonempty_str();
    const bool ok = v == "*" || ((v.starts_with("http://") || v.starts_with("https://")) && v.back() != '/' &&
                                 v.find_first_of(" \t\r\n,") == std::string::npos);
    if (!ok) fail("'" + v + "' is not an origin (scheme://host[:port], no path) or \"*\"");
    return v;
  }

  template <typename T>
  T int_in(int64_t lo, int64_t hi = std::numeric_limits<T>::max()) const {
    const int64_t v = expect<int64_t>("integer");
    if (v < lo || v > hi) out_of_range(v, int_range(lo, hi));
    return static_cast<T>(v);
  }

  int32_t power_of_two_in(int64_t lo, int64_t hi) const {
    const int64_t v = expect<int64_t>("integer");
    if (v < lo || v > hi || (v & (v - 1)) != 0)
      out_of_range(v, "a power of two " + int_range(lo, hi));
    return static_cast<int32_t>(v);
  }

  // TOML writes `1` and `1.0` differently; a float key takes both.
  float real_in(Interval range) const {
    if (!node_.is_number()) type_error("float");
    const double v = node_.is_integer() ? static_cast<double>(*node_.value<int64_t>())
                                        : *node_.value<double>();
    if (!std::isfinite(static_cast<float>(v))) out_of_range(v, "a finite number");
    if (!range.contains(v)) out_of_range(v, range.describe());
    return static_cast<float>(v);
  }

  // A number > 0, or inf (TOML's `inf`: "never", e.g. no activation is an outlier).
  double positive_or_inf() const {
    if (!node_.is_number()) type_error("float");
    const double v = node_.is_integer() ? static_cast<double>(*node_.value<int64_t>()) : *node_.value<double>();
    if (!(v > 0)) out_of_range(v, "> 0 (or inf)");
    return v;
  }

  std::string one_of(Choices choices) const { return checked_choice(str(), choices); }

  // A plugin name ([a-z0-9_]+, as in libtessera_<kind>_<name>.so); whether that plugin
  // exists is the engine's question, at start.
  std::string plugin_name() const {
    std::string v = nonempty_str();
    if (v.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      fail("'" + v + "' is not a plugin name (lower-case letters, digits and '_')");
    return v;
  }

  // An array of distinct strings, each read by `element` (plugin_name, origin).
  std::vector<std::string> distinct(std::string (Field::*element)() const) const {
    const toml::array* arr = node_.as_array();
    if (!arr) type_error("array of strings");
    std::vector<std::string> out;
    for (size_t i = 0; i < arr->size(); ++i) {
      const Field item((*arr)[i], fmt::format("{}[{}]", key_, i), ctx_);
      std::string v = (item.*element)();
      if (std::find(out.begin(), out.end(), v) != out.end()) item.fail("'" + v + "' is listed twice");
      out.push_back(std::move(v));
    }
    return out;
  }

  // A size, or 0 for the string "auto".
  uint64_t size_or_auto() const {
    if (node_.is_string() && *node_.value<std::string>() == "auto") return 0;
    return size();
  }

  // A size, or 0 (the integer or "0") for none.
  uint64_t size_or_zero() const {
    if (node_.is_integer()) return int_in<uint64_t>(0, kI64Max);
    if (node_.is_string() && *node_.value<std::string>() == "0") return 0;
    return size();
  }

  uint64_t size() const {
    if (node_.is_integer()) return int_in<uint64_t>(1, kI64Max);
    if (!node_.is_string()) type_error("size string or integer");
    uint64_t bytes = 0;
    try {
      bytes = config_parse_size(*node_.value<std::string>());
    } catch (const Error& e) {
      fail(e.what());
    }
    if (bytes == 0) fail("must be > 0");
    return bytes;
  }

 private:
  template <typename T>
  T expect(std::string_view type) const {
    const std::optional<T> v = node_.value_exact<T>();
    if (!v) type_error(type);
    return *v;
  }

  [[noreturn]] void type_error(std::string_view expected) const {
    fail(fmt::format("expected {}, got {}", expected, type_name(node_.type())));
  }

  template <typename V>
  [[noreturn]] void out_of_range(V v, const std::string& allowed) const {
    fail(fmt::format("value {} is out of range: must be {}", v, allowed));
  }

  static std::string int_range(int64_t lo, int64_t hi) {
    if (hi == kI64Max) return fmt::format(">= {}", lo);
    return fmt::format("in [{}, {}]", lo, hi);
  }

  std::string checked_choice(std::string v, Choices choices) const {
    if (std::find(choices.begin(), choices.end(), v) != choices.end()) return v;
    std::string msg = fmt::format("unknown value '{}' (expected one of: {})", v, join(choices));
    if (std::string_view guess = closest_name(v, choices); !guess.empty())
      msg += fmt::format("; did you mean '{}'?", guess);
    fail(msg);
  }

  const toml::node& node_;
  std::string key_;
  const Context& ctx_;
};

// ---------------------------------------------------------------------------------------
// The key registry. Ranges are documented in configs/README.md.

struct KeySpec {
  std::string_view table;  // "" for a top-level key
  std::string_view name;
  void (*apply)(const Field&, Config&);
};

constexpr KeySpec kKeys[] = {
    {"", "plugin_dir", [](const Field& f, Config& c) { c.plugin_dir = f.path(); }},

    {"model", "path", [](const Field& f, Config& c) { c.model.path = f.path(); }},
    {"model", "context", [](const Field& f, Config& c) { c.model.context = f.int_in<int32_t>(0); }},
    {"model", "chat_template", [](const Field& f, Config& c) { c.model.chat_template = f.template_ref(); }},

    {"backend", "plugin", [](const Field& f, Config& c) { c.backend.plugin = f.nonempty_str(); }},
    {"backend", "threads",
     [](const Field& f, Config& c) { c.backend.threads = f.int_in<int32_t>(0, 1024); }},
    {"backend", "device",
     [](const Field& f, Config& c) { c.backend.device = f.int_in<int32_t>(0); }},
    {"backend", "graphs", [](const Field& f, Config& c) { c.backend.graphs = f.one_of(kGraphModes); }},
    {"backend", "pack_weights", [](const Field& f, Config& c) { c.backend.pack_weights = f.boolean(); }},

    {"quant", "scheme",
     [](const Field& f, Config& c) { c.quant.scheme = f.plugin_name(); }},
    {"quant", "outlier_threshold",
     [](const Field& f, Config& c) { c.quant.outlier_threshold = f.positive_or_inf(); }},
    {"quant", "imatrix", [](const Field& f, Config& c) { c.quant.imatrix = f.path(); }},

    {"cache", "block_size",
     [](const Field& f, Config& c) { c.cache.block_size = f.power_of_two_in(1, 1024); }},
    {"cache", "memory", [](const Field& f, Config& c) { c.cache.memory_bytes = f.size_or_auto(); }},
    {"cache", "prefix_caching",
     [](const Field& f, Config& c) { c.cache.prefix_caching = f.boolean(); }},
    {"cache", "host_memory", [](const Field& f, Config& c) { c.cache.host_memory_bytes = f.size_or_zero(); }},
    {"cache", "disk_path", [](const Field& f, Config& c) { c.cache.disk_path = f.path(); }},
    {"cache", "disk_memory", [](const Field& f, Config& c) { c.cache.disk_memory_bytes = f.size(); }},
    {"cache", "dtype", [](const Field& f, Config& c) { c.cache.dtype = f.one_of(kKvDtypeNames); }},
    {"cache", "dtype_k", [](const Field& f, Config& c) { c.cache.dtype_k = f.one_of(kKvDtypeNames); }},
    {"cache", "dtype_v", [](const Field& f, Config& c) { c.cache.dtype_v = f.one_of(kKvDtypeNames); }},
    {"cache", "rotation", [](const Field& f, Config& c) { c.cache.rotation = f.one_of(kKvRotations); }},
    {"cache", "eviction", [](const Field& f, Config& c) { c.cache.eviction = f.one_of(kKvEvictions); }},
    {"cache", "sink_tokens", [](const Field& f, Config& c) { c.cache.sink_tokens = f.int_in<int32_t>(0, 1024); }},
    {"cache", "window", [](const Field& f, Config& c) { c.cache.window = f.int_in<int32_t>(0); }},

    {"scheduler", "max_batch_tokens",
     [](const Field& f, Config& c) { c.scheduler.max_batch_tokens = f.int_in<int32_t>(1); }},
    {"scheduler", "max_seqs",
     [](const Field& f, Config& c) { c.scheduler.max_seqs = f.int_in<int32_t>(1); }},
    {"scheduler", "policy",
     [](const Field& f, Config& c) { c.scheduler.policy = f.one_of(kPolicies); }},
    {"scheduler", "prefill_chunk",
     [](const Field& f, Config& c) { c.scheduler.prefill_chunk = f.int_in<int32_t>(0); }},
    {"scheduler", "max_seqs_per_call",
     [](const Field& f, Config& c) { c.scheduler.max_seqs_per_call = f.int_in<int32_t>(0); }},

    {"sampling", "temperature",
     [](const Field& f, Config& c) { c.sampling.temperature = f.real_in({0, kInf}); }},
    {"sampling", "top_k",
     [](const Field& f, Config& c) { c.sampling.top_k = f.int_in<int32_t>(0); }},
    {"sampling", "top_p",
     [](const Field& f, Config& c) { c.sampling.top_p = f.real_in({0, 1, true}); }},
    {"sampling", "min_p", [](const Field& f, Config& c) { c.sampling.min_p = f.real_in({0, 1}); }},
    {"sampling", "typical_p",
     [](const Field& f, Config& c) { c.sampling.typical_p = f.real_in({0, 1, true}); }},
    {"sampling", "repeat_penalty",
     [](const Field& f, Config& c) { c.sampling.repeat_penalty = f.real_in({0, kInf, true}); }},
    {"sampling", "repeat_last_n",
     [](const Field& f, Config& c) { c.sampling.repeat_last_n = f.int_in<int32_t>(-1); }},
    {"sampling", "presence_penalty",
     [](const Field& f, Config& c) { c.sampling.presence_penalty = f.real_in({-2, 2}); }},
    {"sampling", "frequency_penalty",
     [](const Field& f, Config& c) { c.sampling.frequency_penalty = f.real_in({-2, 2}); }},
    {"sampling", "seed",
     [](const Field& f, Config& c) { c.sampling.seed = f.int_in<uint64_t>(0, kI64Max); }},
    {"sampling", "max_tokens",
     [](const Field& f, Config& c) { c.sampling.max_tokens = f.int_in<int32_t>(1); }},

    {"speculative", "method",
     [](const Field& f, Config& c) { c.speculative.method = f.plugin_name(); }},
    {"speculative", "num_draft_tokens",
     [](const Field& f, Config& c) { c.speculative.num_draft_tokens = f.int_in<int32_t>(1, 32); }},
    {"speculative", "tree_budget",
     [](const Field& f, Config& c) { c.speculative.tree_budget = f.int_in<int32_t>(0, 64); }},
    {"speculative", "adaptive",
     [](const Field& f, Config& c) { c.speculative.adaptive = f.boolean(); }},
    {"speculative", "ngram_min",
     [](const Field& f, Config& c) { c.speculative.ngram_min = f.int_in<int32_t>(1); }},
    {"speculative", "ngram_max",
     [](const Field& f, Config& c) { c.speculative.ngram_max = f.int_in<int32_t>(1); }},
    {"speculative", "draft_model",
     [](const Field& f, Config& c) { c.speculative.draft_model = f.path(); }},
    {"speculative", "draft_sharpness",
     [](const Field& f, Config& c) { c.speculative.draft_sharpness = f.real_in({0, 16, true}); }},

    {"constraints", "plugins",
     [](const Field& f, Config& c) { c.constraints.plugins = f.distinct(&Field::plugin_name); }},
    {"constraints", "compile_workers",
     [](const Field& f, Config& c) { c.constraints.compile_workers = f.int_in<int32_t>(1, 64); }},
    {"constraints", "cache_memory", [](const Field& f, Config& c) { c.constraints.cache_memory_bytes = f.size(); }},
    {"constraints", "compile_timeout",
     [](const Field& f, Config& c) { c.constraints.compile_timeout_s = f.real_in({0, 3600, true}); }},

    {"server", "host", [](const Field& f, Config& c) { c.server.host = f.nonempty_str(); }},
    {"server", "port",
     [](const Field& f, Config& c) { c.server.port = f.int_in<int32_t>(1, 65535); }},
    {"server", "max_queue",
     [](const Field& f, Config& c) { c.server.max_queue = f.int_in<int32_t>(1); }},
    {"server", "max_choices",
     [](const Field& f, Config& c) { c.server.max_choices = f.int_in<int32_t>(1, 65536); }},
    {"server", "max_queue_tokens",
     [](const Field& f, Config& c) { c.server.max_queue_tokens = f.int_in<int64_t>(0); }},
    {"server", "api_key", [](const Field& f, Config& c) { c.server.api_key = f.str(); }},
    {"server", "metrics_auth", [](const Field& f, Config& c) { c.server.metrics_auth = f.boolean(); }},
    {"server", "max_connections",
     [](const Field& f, Config& c) { c.server.max_connections = f.int_in<int32_t>(1, 1 << 20); }},
    {"server", "header_timeout",
     [](const Field& f, Config& c) { c.server.header_timeout_s = f.real_in({0, 3600, true}); }},
    {"server", "body_timeout", [](const Field& f, Config& c) { c.server.body_timeout_s = f.real_in({0, 3600, true}); }},
    {"server", "write_timeout",
     [](const Field& f, Config& c) { c.server.write_timeout_s = f.real_in({0, 3600, true}); }},
    {"server", "alias", [](const Field& f, Config& c) { c.server.alias = f.nonempty_str(); }},
    {"server", "cors_origins", [](const Field& f, Config& c) { c.server.cors_origins = f.distinct(&Field::origin); }},

    {"log", "level", [](const Field& f, Config& c) { c.log.level = f.one_of(kLogLevels); }},
};

std::string dotted(std::string_view table, std::string_view name) {
  return table.empty() ? std::string(name) : fmt::format("{}.{}", table, name);
}

const KeySpec* find_key(std::string_view table, std::string_view name) {
  for (const KeySpec& k : kKeys)
    if (k.table == table && k.name == name) return &k;
  return nullptr;
}

// Names valid inside `table`; at the top level these are the top-level keys and the tables.
std::vector<std::string_view> names_in(std::string_view table) {
  std::vector<std::string_view> out;
  auto add = [&](std::string_view name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const KeySpec& k : kKeys) {
    if (k.table == table) add(k.name);
    else if (table.empty()) add(k.table);
  }
  return out;
}

}  // namespace

std::vector<std::string> config_keys() {
  std::vector<std::string> out;
  for (const KeySpec& k : kKeys) out.push_back(dotted(k.table, k.name));
  return out;
}

namespace {

bool is_table_name(std::string_view name) {
  return !name.empty() && std::any_of(std::begin(kKeys), std::end(kKeys),
                                      [&](const KeySpec& k) { return k.table == name; });
}

// ---------------------------------------------------------------------------------------
// Walking the document.

using Entry = std::pair<const toml::key*, const toml::node*>;

// toml::table iterates in key order; errors are more useful in file order.
std::vector<Entry> in_file_order(const toml::table& table) {
  std::vector<Entry> entries;
  for (const auto& [key, node] : table) entries.emplace_back(&key, &node);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    const auto& pa = a.first->source().begin;
    const auto& pb = b.first->source().begin;
    return std::tie(pa.line, pa.column) < std::tie(pb.line, pb.column);
  });
  return entries;
}

// The same key in another table ("threads" at the top level -> "backend.threads", the usual
// result of writing a key above its table header), else the closest name in this table.
std::string suggestion(std::string_view name, std::string_view table) {
  for (const KeySpec& k : kKeys)
    if (k.name == name && k.table != table) return dotted(k.table, k.name);
  return std::string(closest_name(name, names_in(table)));
}

[[noreturn]] void unknown(const Context& ctx, const toml::key& key, std::string_view table,
                          bool is_table) {
  std::string msg = fmt::format("{}: unknown {} '{}'", where(ctx, key.source()),
                                is_table ? "table" : "key", dotted(table, key.str()));
  if (const std::string guess = suggestion(key.str(), table); !guess.empty())
    msg += fmt::format("; did you mean '{}'?", guess);
  else
    msg += fmt::format(" (valid {}: {})",
                       table.empty() ? "names" : fmt::format("keys in [{}]", table),
                       join(names_in(table)));
  throw Error(msg);
}

void apply_table(const toml::table& tbl, std::string_view table, const Context& ctx, Config& cfg) {
  for (const auto& [key, node] : in_file_order(tbl)) {
    const std::string full = dotted(table, key->str());
    if (table.empty() && is_table_name(key->str())) {
      if (!node->is_table())
        Field(*node, full, ctx).fail(fmt::format("expected table, got {}",
                                                 type_name(node->type())));
      apply_table(*node->as_table(), key->str(), ctx, cfg);
    } else if (const KeySpec* spec = find_key(table, key->str())) {
      spec->apply(Field(*node, full, ctx), cfg);
    } else {
      unknown(ctx, *key, table, node->is_table());
    }
  }
}

// Checks that involve more than one key. The error points at ngram_max when it is set.
void check_relations(const toml::table& root, const Context& ctx, const Config& cfg) {
  const SpeculativeConfig& s = cfg.speculative;
  if (s.ngram_max >= s.ngram_min) return;
  // Defaults satisfy the relation, so at least one of the two keys is present.
  const std::string key = root.at_path("speculative.ngram_max") ? "speculative.ngram_max"
                                                                 : "speculative.ngram_min";
  Field(*root.at_path(key).node(), key, ctx)
      .fail(fmt::format("ngram_max ({}) must be >= ngram_min ({})", s.ngram_max, s.ngram_min));
}

Config parse(std::string_view text, const Context& ctx) {
  toml::table root;
  try {
    root = toml::parse(text, ctx.source);
  } catch (const toml::parse_error& e) {
    throw Error(fmt::format("{}: {}", where(ctx, e.source()), e.description()));
  }
  Config cfg;
  apply_table(root, "", ctx, cfg);
  check_relations(root, ctx, cfg);
  return cfg;
}

// ---------------------------------------------------------------------------------------
// Sizes.

struct Unit {
  std::string_view name;
  uint64_t bytes;
};
// Matched case-insensitively: "KiB" is binary, "KB" decimal, whatever the case.
constexpr Unit kUnits[] = {
    {"b", 1},
    {"kb", 1'000},       {"mb", 1'000'000}, {"gb", 1'000'000'000}, {"tb", 1'000'000'000'000},
    {"kib", 1ull << 10}, {"mib", 1ull << 20}, {"gib", 1ull << 30},    {"tib", 1ull << 40},
};

// Fraction digits are limited so that fraction * unit stays exact in 64 bits.
constexpr size_t kMaxFractionDigits = 6;

[[noreturn]] void bad_size(std::string_view text, std::string_view why) {
  throw Error(fmt::format("invalid size '{}': {} (expected e.g. \"4GiB\", \"512MiB\", \"1.5GB\" or "
                          "a byte count; units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
                          text, why));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

uint64_t unit_bytes(std::string_view original, std::string_view unit) {
  if (unit.empty()) return 1;
  const std::string u = lower(unit);
  for (const Unit& k : kUnits)
    if (k.name == u) return k.bytes;
  bad_size(original, fmt::format("unknown unit '{}'", unit));
}

}  // namespace

int32_t ConstraintsConfig::default_compile_workers() {
  return static_cast<int32_t>(std::clamp(std::thread::hardware_concurrency(), 2u, 4u));
}

uint64_t config_parse_size(std::string_view text) {
  const std::string_view s = trim(text);
  const char* const end = s.data() + s.size();
  uint64_t whole = 0;
  auto [p, ec] = std::from_chars(s.data(), end, whole);
  if (ec == std::errc::result_out_of_range) bad_size(text, "too large");
  if (ec != std::errc()) bad_size(text, "no number");

  uint64_t frac = 0, frac_scale = 1;
  if (p != end && *p == '.') {
    const char* const digits = ++p;
    while (p != end && std::isdigit(static_cast<unsigned char>(*p))) {
      if (static_cast<size_t>(p - digits) == kMaxFractionDigits)
        bad_size(text, fmt::format("at most {} decimals", kMaxFractionDigits));
      frac = frac * 10 + static_cast<uint64_t>(*p++ - '0');
      frac_scale *= 10;
    }
    if (p == digits) bad_size(text, "no digits after '.'");
  }

  const uint64_t unit = unit_bytes(text, trim(std::string_view(p, end)));
  if (frac_scale > 1 && unit == 1) bad_size(text, "a byte count must be a whole number");
  const uint64_t frac_bytes = frac * unit / frac_scale;  // rounds down to whole bytes
  if (whole > (std::numeric_limits<uint64_t>::max() - frac_bytes) / unit)
    bad_size(text, "too large");
  return whole * unit + frac_bytes;
}

Config config_parse_string(std::string_view toml_text, const std::string& source) {
  return parse(toml_text, Context{source, {}});
}

Config config_parse_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Error(fmt::format("cannot read config file '{}': is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open config file '{}': {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("cannot read config file '{}'", path));
  return parse(text.str(), Context{path, fs::absolute(path).parent_path()});
}

}  // namespace tsr
