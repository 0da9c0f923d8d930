#include "core/config/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"

namespace tsr {
namespace {

namespace fs = std::filesystem;

const fs::path kConfigsDir = TESSERA_CONFIGS_DIR;

// Every key, each set to a value other than its default, so that a key that is accepted
// but not stored shows up as a default below.
constexpr const char* kAllKeys = R"(
plugin_dir = "/opt/tessera/plugins"
[model]
path = "/models/m.gguf"
context = 4096
chat_template = "llama3"
[backend]
plugin = "cuda"
threads = 3
device = 2
graphs = "off"
pack_weights = false
[quant]
scheme = "int4_g128"
outlier_threshold = 4.5
imatrix = "/models/m.imatrix"
[cache]
block_size = 64
memory = "1.5GiB"
prefix_caching = false
host_memory = "256MiB"
disk_path = "/tmp/kv"
disk_memory = "1GiB"
dtype = "bf16"
dtype_k = "q8_0"
dtype_v = "q4_0"
rotation = "hadamard"
eviction = "streaming"
sink_tokens = 8
window = 1000
[scheduler]
max_batch_tokens = 512
max_seqs = 8
policy = "priority"
prefill_chunk = 128
max_seqs_per_call = 3
[sampling]
temperature = 0.25
top_k = 7
top_p = 0.5
min_p = 0.0
typical_p = 0.75
repeat_penalty = 1.25
repeat_last_n = 32
presence_penalty = -0.5
frequency_penalty = 1.5
seed = 1234
max_tokens = 16
[speculative]
method = "ngram"
num_draft_tokens = 32
tree_budget = 48
adaptive = false
ngram_min = 3
ngram_max = 3
draft_model = "/models/draft.gguf"
draft_sharpness = 1.5
[constraints]
plugins = ["gbnf", "regex"]
compile_workers = 3
cache_memory = "64MiB"
compile_timeout = 0.5
[server]
host = "::1"
port = 65535
max_queue = 1
max_choices = 3
max_queue_tokens = 5000
api_key = "k"
metrics_auth = true
max_connections = 100
header_timeout = 2.5
body_timeout = 30
write_timeout = 45
alias = "served"
cors_origins = ["*", "https://a.example:8443"]
[log]
level = "off"
)";

// Runs `fn`, expects a tsr::Error with TSR_STATUS_INVALID_ARGUMENT and returns its message.
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), TSR_STATUS_INVALID_ARGUMENT);
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return {};
}

std::string parse_error(const std::string& text) {
  return error_of([&] { config_parse_string(text, "cfg.toml"); });
}

// A table of bad configs: each must fail with a message that names the source and contains
// `expected`.
struct ErrorCase {
  const char* text;
  const char* expected;
};

void expect_errors(std::initializer_list<ErrorCase> cases) {
  for (const ErrorCase& c : cases) {
    const std::string msg = parse_error(c.text);
    EXPECT_NE(msg.find(c.expected), std::string::npos) << c.text << " -> " << msg;
    EXPECT_EQ(msg.rfind("cfg.toml:", 0), 0u) << msg;
  }
}

// The dotted keys a simple TOML file sets: `[table]` headers and `key = value` lines. Enough
// for the examples in configs/ (no inline tables, no '#' inside strings).
std::set<std::string> keys_in(std::istream& in) {
  std::set<std::string> keys;
  std::string line, table;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    if (line[first] == '[') {
      table = line.substr(first + 1, line.find(']') - first - 1);
      continue;
    }
    const std::string key = line.substr(first, line.find_first_of(" =", first) - first);
    keys.insert(table.empty() ? key : table + "." + key);
  }
  return keys;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory under the system temporary directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tessera_config_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }

 private:
  fs::path path_;
};

TEST(Config, Defaults) {
  const Config c = config_parse_string("");
  EXPECT_EQ(c.plugin_dir, "");
  EXPECT_EQ(c.model.path, "");
  EXPECT_EQ(c.backend.plugin, "cpu");
  EXPECT_EQ(c.backend.threads, 0);
  EXPECT_EQ(c.backend.device, 0);
  EXPECT_EQ(c.backend.graphs, "auto");
  EXPECT_TRUE(c.backend.pack_weights);
  EXPECT_EQ(c.quant.scheme, "auto");
  EXPECT_EQ(c.cache.block_size, 16);
  EXPECT_EQ(c.cache.memory_bytes, 0u);  // auto
  EXPECT_TRUE(c.cache.prefix_caching);
  EXPECT_EQ(c.cache.host_memory_bytes, 0u);  // off
  EXPECT_EQ(c.cache.disk_path, "");          // off
  EXPECT_EQ(c.cache.disk_memory_bytes, 8ull << 30);
  EXPECT_EQ(c.cache.k_dtype(), "f16");
  EXPECT_EQ(c.cache.v_dtype(), "f16");
  EXPECT_EQ(c.cache.rotation, "auto");
  EXPECT_EQ(c.cache.eviction, "none");
  EXPECT_EQ(c.cache.sink_tokens, 4);
  EXPECT_EQ(c.cache.window, 0);
  EXPECT_EQ(c.scheduler.max_batch_tokens, 2048);
  EXPECT_EQ(c.scheduler.max_seqs, 64);
  EXPECT_EQ(c.scheduler.policy, "fcfs");
  EXPECT_EQ(c.scheduler.prefill_chunk, 0);
  EXPECT_EQ(c.scheduler.call_share(), c.scheduler.max_seqs / 2);
  EXPECT_FLOAT_EQ(c.sampling.temperature, 0.8f);
  EXPECT_EQ(c.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(c.sampling.top_p, 0.95f);
  EXPECT_FLOAT_EQ(c.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(c.sampling.typical_p, 1.0f);
  EXPECT_FLOAT_EQ(c.sampling.repeat_penalty, 1.0f);
  EXPECT_EQ(c.sampling.repeat_last_n, 64);
  EXPECT_FLOAT_EQ(c.sampling.presence_penalty, 0.0f);
  EXPECT_FLOAT_EQ(c.sampling.frequency_penalty, 0.0f);
  EXPECT_FALSE(c.sampling.seed.has_value());
  EXPECT_FALSE(c.sampling.max_tokens.has_value());
  EXPECT_EQ(c.speculative.method, "none");
  EXPECT_EQ(c.speculative.num_draft_tokens, 4);
  EXPECT_EQ(c.speculative.tree_budget, 0);
  EXPECT_TRUE(c.speculative.adaptive);
  EXPECT_EQ(c.speculative.ngram_min, 1);
  EXPECT_EQ(c.speculative.ngram_max, 4);
  EXPECT_EQ(c.speculative.draft_model, "");
  EXPECT_EQ(c.speculative.draft_sharpness, 1.0f);
  EXPECT_EQ(c.constraints.plugins, (std::vector<std::string>{"json_schema", "regex", "gbnf"}));
  EXPECT_GE(c.constraints.compile_workers, 2);
  EXPECT_LE(c.constraints.compile_workers, 4);
  EXPECT_EQ(c.constraints.cache_memory_bytes, 256ull << 20);
  EXPECT_DOUBLE_EQ(c.constraints.compile_timeout_s, 10);
  EXPECT_EQ(c.server.host, "127.0.0.1");
  EXPECT_EQ(c.server.port, 8080);
  EXPECT_EQ(c.server.max_queue, 256);
  EXPECT_EQ(c.server.api_key, "");
  EXPECT_EQ(c.log.level, "info");
}

TEST(Config, EveryKeyParsed) {
  const Config c = config_parse_string(kAllKeys);
  EXPECT_EQ(c.plugin_dir, "/opt/tessera/plugins");
  EXPECT_EQ(c.model.path, "/models/m.gguf");
  EXPECT_EQ(c.backend.plugin, "cuda");
  EXPECT_EQ(c.backend.threads, 3);
  EXPECT_EQ(c.backend.device, 2);
  EXPECT_EQ(c.backend.graphs, "off");
  EXPECT_FALSE(c.backend.pack_weights);
  EXPECT_EQ(c.quant.scheme, "int4_g128");
  EXPECT_EQ(c.quant.outlier_threshold, 4.5);
  EXPECT_EQ(c.quant.imatrix, "/models/m.imatrix");
  EXPECT_EQ(c.cache.block_size, 64);
  EXPECT_EQ(c.cache.memory_bytes, 3ull << 29);
  EXPECT_FALSE(c.cache.prefix_caching);
  EXPECT_EQ(c.cache.host_memory_bytes, 256ull << 20);
  EXPECT_EQ(c.cache.disk_path, "/tmp/kv");
  EXPECT_EQ(c.cache.disk_memory_bytes, 1ull << 30);
  EXPECT_EQ(c.cache.dtype, "bf16");
  EXPECT_EQ(c.cache.k_dtype(), "q8_0");
  EXPECT_EQ(c.cache.v_dtype(), "q4_0");
  EXPECT_EQ(c.cache.rotation, "hadamard");
  EXPECT_EQ(c.cache.eviction, "streaming");
  EXPECT_EQ(c.cache.sink_tokens, 8);
  EXPECT_EQ(c.cache.window, 1000);
  EXPECT_EQ(c.scheduler.max_batch_tokens, 512);
  EXPECT_EQ(c.scheduler.max_seqs, 8);
  EXPECT_EQ(c.scheduler.policy, "priority");
  EXPECT_EQ(c.scheduler.prefill_chunk, 128);
  EXPECT_EQ(c.scheduler.max_seqs_per_call, 3);
  EXPECT_EQ(c.scheduler.call_share(), 3);
  EXPECT_FLOAT_EQ(c.sampling.temperature, 0.25f);
  EXPECT_EQ(c.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(c.sampling.top_p, 0.5f);
  EXPECT_FLOAT_EQ(c.sampling.min_p, 0.0f);
  EXPECT_FLOAT_EQ(c.sampling.typical_p, 0.75f);
  EXPECT_FLOAT_EQ(c.sampling.repeat_penalty, 1.25f);
  EXPECT_EQ(c.sampling.repeat_last_n, 32);
  EXPECT_FLOAT_EQ(c.sampling.presence_penalty, -0.5f);
  EXPECT_FLOAT_EQ(c.sampling.frequency_penalty, 1.5f);
  EXPECT_EQ(c.sampling.seed, 1234u);
  EXPECT_EQ(c.sampling.max_tokens, std::optional<int32_t>(16));
  EXPECT_EQ(c.speculative.method, "ngram");
  EXPECT_EQ(c.speculative.num_draft_tokens, 32);
  EXPECT_EQ(c.speculative.tree_budget, 48);
  EXPECT_FALSE(c.speculative.adaptive);
  EXPECT_EQ(c.speculative.ngram_min, 3);
  EXPECT_EQ(c.speculative.ngram_max, 3);
  EXPECT_EQ(c.speculative.draft_model, "/models/draft.gguf");
  EXPECT_EQ(c.speculative.draft_sharpness, 1.5f);
  EXPECT_EQ(c.constraints.plugins, (std::vector<std::string>{"gbnf", "regex"}));
  EXPECT_EQ(c.constraints.compile_workers, 3);
  EXPECT_EQ(c.constraints.cache_memory_bytes, 64ull << 20);
  EXPECT_DOUBLE_EQ(c.constraints.compile_timeout_s, 0.5);
  EXPECT_EQ(c.server.host, "::1");
  EXPECT_EQ(c.server.port, 65535);
  EXPECT_EQ(c.server.max_queue, 1);
  EXPECT_EQ(c.server.max_choices, 3);
  EXPECT_EQ(c.server.max_queue_tokens, 5000);
  EXPECT_EQ(c.server.api_key, "k");
  EXPECT_TRUE(c.server.metrics_auth);
  EXPECT_EQ(c.server.max_connections, 100);
  EXPECT_DOUBLE_EQ(c.server.header_timeout_s, 2.5);
  EXPECT_DOUBLE_EQ(c.server.body_timeout_s, 30);
  EXPECT_DOUBLE_EQ(c.server.write_timeout_s, 45);
  EXPECT_EQ(c.server.alias, "served");
  EXPECT_EQ(c.server.cors_origins, (std::vector<std::string>{"*", "https://a.example:8443"}));
  EXPECT_EQ(c.model.context, 4096);
  EXPECT_EQ(c.model.chat_template, "llama3");
  EXPECT_EQ(c.log.level, "off");
}

// A built-in template's name stays a name; anything else is a file beside the config.
TEST(Config, ChatTemplateNameOrFile) {
  EXPECT_EQ(config_parse_string("[model]\nchat_template = \"my-template_2\"\n").model.chat_template, "my-template_2");
  const Config file = config_parse_string("[model]\nchat_template = \"t/x.jinja\"\n");
  EXPECT_EQ(file.model.chat_template, "t/x.jinja");
}

TEST(Config, CorsOriginsAreChecked) {
  expect_errors({
      {"[server]\ncors_origins = \"*\"\n", "expected array of strings"},
      {"[server]\ncors_origins = [\"app.example\"]\n", "is not an origin"},
      {"[server]\ncors_origins = [\"https://a.example/\"]\n", "is not an origin"},
      {"[server]\ncors_origins = [\"*\", \"*\"]\n", "listed twice"},
      {"[model]\ncontext = -1\n", "out of range"},
  });
}

TEST(Config, FloatKeysAcceptIntegers) {
  const Config c = config_parse_string("[sampling]\ntemperature = 1\ntop_p = 1\n");
  EXPECT_FLOAT_EQ(c.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(c.sampling.top_p, 1.0f);
}

TEST(Config, InlineAndDottedTables) {
  const Config c = config_parse_string("backend = { threads = 5 }\nserver.port = 81\n");
  EXPECT_EQ(c.backend.threads, 5);
  EXPECT_EQ(c.server.port, 81);
}

TEST(Config, EveryExampleLoads) {
  size_t count = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(kConfigsDir)) {
    if (e.path().extension() != ".toml") continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW(config_parse_file(e.path().string()));
    ++count;
  }
  EXPECT_GE(count, 4u);
}

TEST(Config, DefaultExampleNamesTheSharedModel) {
  const Config c = config_parse_file((kConfigsDir / "default.toml").string());
  const fs::path model = c.model.path;
  EXPECT_TRUE(model.is_absolute());
  EXPECT_EQ(model.filename(), "stories260K.gguf");
  const fs::path shared = fs::path(TESSERA_SHARED_DIR) / "models" / "stories260K.gguf";
  if (!fs::exists(shared)) GTEST_SKIP() << "no shared data at " << shared;
  EXPECT_TRUE(fs::exists(model)) << model;
  EXPECT_TRUE(fs::equivalent(model, shared)) << model << " vs " << shared;
}

// full.toml is the reference example: it sets every key (the same set as kAllKeys, whose
// test proves each is stored), and README.md documents each of them and quotes full.toml.
TEST(Config, FullExampleAndReadmeCoverEveryKey) {
  std::ifstream full(kConfigsDir / "full.toml");
  std::istringstream all(kAllKeys);
  const std::set<std::string> keys = keys_in(all);
  const std::vector<std::string> accepted = config_keys();
  EXPECT_EQ(keys, std::set<std::string>(accepted.begin(), accepted.end()));
  EXPECT_EQ(keys_in(full), keys);
  const std::string readme = read_file(kConfigsDir / "README.md");
  for (const std::string& k : keys)
    EXPECT_NE(readme.find("`" + k + "`"), std::string::npos) << k << " is not documented";

  std::istringstream full_text(read_file(kConfigsDir / "full.toml"));
  for (std::string line; std::getline(full_text, line);) {
    line = line.substr(0, line.find('#'));
    line = line.substr(0, line.find_last_not_of(' ') + 1);
    if (line.empty()) continue;
    EXPECT_NE(readme.find("\n" + line + "\n"), std::string::npos) << line;
  }
}

TEST(Config, UnknownKeySuggestsClosest) {
  const std::string msg = parse_error("[backend]\nplugin = \"cpu\"\nthread = 2\n");
  EXPECT_NE(msg.find("cfg.toml:3:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key 'backend.thread'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'threads'?"), std::string::npos) << msg;
}

TEST(Config, UnknownKeySuggestions) {
  expect_errors({
      {"[server]\nhots = \"x\"\n", "did you mean 'host'?"},            // transposition
      {"[sampling]\nTemperature = 1\n", "did you mean 'temperature'?"},  // case
      {"threads = 2\n", "did you mean 'backend.threads'?"},            // above its header
      {"[sampling]\nthreads = 2\n", "did you mean 'backend.threads'?"},  // wrong table
      {"[backend]\nplugin_dir = \"p\"\n", "did you mean 'plugin_dir'?"},  // top-level key
      {"[backend]\nzzz = 1\n", "valid keys in [backend]: plugin, threads, device"},
      {"[backend.cpu]\nthreads = 1\n", "unknown table 'backend.cpu'"},
  });
  EXPECT_EQ(parse_error("[backend]\nzzz = 1\n").find("did you mean"), std::string::npos);
}

TEST(Config, UnknownTable) {
  std::string msg = parse_error("[model]\npath = \"m.gguf\"\n\n[schedular]\nmax_seqs = 2\n");
  EXPECT_NE(msg.find("cfg.toml:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown table 'schedular'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'scheduler'?"), std::string::npos) << msg;

  msg = parse_error("[completely_different]\n");
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
  EXPECT_NE(msg.find("valid names: plugin_dir, model, backend"), std::string::npos) << msg;
}

TEST(Config, ErrorsComeInFileOrder) {
  // std::map order would report [backend] first.
  const std::string msg = parse_error("[server]\nport = 0\n[backend]\nthread = 1\n");
  EXPECT_NE(msg.find("cfg.toml:2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("server.port"), std::string::npos) << msg;
}

TEST(Config, WrongType) {
  expect_errors({
      {"[backend]\nthreads = \"2\"\n",
       "cfg.toml:2:11: backend.threads: expected integer, got string"},
      {"[backend]\nthreads = 2.0\n", "backend.threads: expected integer, got float"},
      {"[sampling]\ntemperature = \"hot\"\n", "sampling.temperature: expected float, got string"},
      {"[cache]\nprefix_caching = 1\n", "cache.prefix_caching: expected boolean, got integer"},
      {"[cache]\ndtype = \"q8\"\n", "cache.dtype: unknown value 'q8' (expected one of: f32, f16, bf16, q8_0, q4_0, fp8_e4m3)"},
      {"[cache]\nmemory = true\n", "cache.memory: expected size string or integer, got boolean"},
      {"[cache]\nhost_memory = -1\n", "cache.host_memory: value -1 is out of range: must be >= 0"},
      {"[cache]\nhost_memory = \"lots\"\n", "cache.host_memory: invalid size 'lots'"},
      {"[model]\npath = 3\n", "model.path: expected string, got integer"},
      {"[constraints]\nplugins = \"regex\"\n",
       "constraints.plugins: expected array of strings, got string"},
      {"[constraints]\nplugins = [1]\n", "constraints.plugins[0]: expected string, got integer"},
      {"[constraints]\ncompile_workers = 0\n",
       "constraints.compile_workers: value 0 is out of range: must be in [1, 64]"},
      {"[constraints]\ncompile_workers = 65\n",
       "constraints.compile_workers: value 65 is out of range: must be in [1, 64]"},
      {"[constraints]\ncache_memory = 0\n", "constraints.cache_memory: value 0 is out of range: must be >= 1"},
      {"[constraints]\ncache_memory = \"lots\"\n", "constraints.cache_memory: invalid size 'lots'"},
      {"[server]\nheader_timeout = 0\n", "server.header_timeout: value 0 is out of range: must be in (0, 3600]"},
      {"[server]\nmax_connections = 0\n", "server.max_connections: value 0 is out of range"},
      {"[constraints]\ncompile_timeout = 0\n",
       "constraints.compile_timeout: value 0 is out of range: must be in (0, 3600]"},
      {"[constraints]\ncompile_timeout = 3601\n",
       "constraints.compile_timeout: value 3601 is out of range: must be in (0, 3600]"},
      {"model = \"m.gguf\"\n", "model: expected table, got string"},
      {"[[backend]]\nthreads = 1\n", "backend: expected table, got array"},
      {"[log]\nlevel = 1979-05-27\n", "log.level: expected string, got date"},
  });
}

TEST(Config, OutOfRange) {
  expect_errors({
      {"[cache]\nblock_size = 3\n", "must be a power of two in [1, 1024]"},
      {"[cache]\nblock_size = 2048\n", "must be a power of two in [1, 1024]"},
      {"[cache]\nblock_size = 0\n", "must be a power of two in [1, 1024]"},
      {"[cache]\nmemory = 0\n", "cache.memory: value 0 is out of range: must be >= 1"},
      {"[cache]\nmemory = \"0GiB\"\n", "cache.memory: must be > 0"},
      {"[sampling]\nrepeat_last_n = -2\n", "must be in [-1, 2147483647]"},
      {"[backend]\nthreads = -1\n",
       "backend.threads: value -1 is out of range: must be in [0, 1024]"},
      {"[backend]\nthreads = 1025\n", "must be in [0, 1024]"},
      {"[backend]\ndevice = -1\n", "must be in [0, 2147483647]"},
      {"[scheduler]\nmax_batch_tokens = 0\n", "must be in [1, 2147483647]"},
      {"[scheduler]\nmax_batch_tokens = 3000000000\n", "must be in [1, 2147483647]"},
      {"[scheduler]\nmax_seqs = 0\n", "must be in [1, 2147483647]"},
      {"[scheduler]\nprefill_chunk = -1\n", "must be in [0, 2147483647]"},
      {"[sampling]\ntemperature = -0.5\n", "value -0.5 is out of range: must be >= 0"},
      {"[sampling]\ntemperature = inf\n", "must be a finite number"},
      {"[sampling]\ntemperature = nan\n", "must be a finite number"},
      {"[sampling]\ntemperature = 1e300\n", "must be a finite number"},
      {"[sampling]\ntop_k = -1\n", "must be in [0, 2147483647]"},
      {"[sampling]\ntop_p = 0\n", "must be in (0, 1]"},
      {"[sampling]\ntop_p = 1.5\n", "must be in (0, 1]"},
      {"[sampling]\nmin_p = -0.1\n", "must be in [0, 1]"},
      {"[sampling]\ntypical_p = 0.0\n", "must be in (0, 1]"},
      {"[sampling]\nrepeat_penalty = 0\n", "must be > 0"},
      {"[sampling]\npresence_penalty = 2.5\n", "must be in [-2, 2]"},
      {"[sampling]\nseed = -1\n", "sampling.seed: value -1 is out of range: must be >= 0"},
      {"[sampling]\nmax_tokens = 0\n", "must be in [1, 2147483647]"},
      {"[speculative]\nnum_draft_tokens = 0\n", "must be in [1, 32]"},
      {"[speculative]\nnum_draft_tokens = 33\n", "must be in [1, 32]"},
      {"[speculative]\nngram_min = 0\n", "must be in [1, 2147483647]"},
      {"[speculative]\nngram_min = 3\nngram_max = 2\n",
       "cfg.toml:3:13: speculative.ngram_max: ngram_max (2) must be >= ngram_min (3)"},
      {"[speculative]\nngram_min = 5\n",
       "speculative.ngram_min: ngram_max (4) must be >= ngram_min (5)"},
      {"[server]\nport = 0\n", "server.port: value 0 is out of range: must be in [1, 65535]"},
      {"[server]\nport = 65536\n", "must be in [1, 65535]"},
      {"[server]\nmax_queue = 0\n", "must be in [1, 2147483647]"},
      {"[server]\nhost = \"\"\n", "server.host: must not be empty"},
      {"[backend]\nplugin = \"\"\n", "backend.plugin: must not be empty"},
  });
}

TEST(Config, BadEnumSuggests) {
  expect_errors({
      {"[quant]\nscheme = \"Q8-0\"\n", "quant.scheme: 'Q8-0' is not a plugin name"},
      {"[scheduler]\npolicy = \"FCFS\"\n", "did you mean 'fcfs'?"},
      {"[speculative]\nmethod = \"Draft-Model\"\n", "speculative.method: 'Draft-Model' is not a plugin name"},
      {"[log]\nlevel = \"warning\"\n", "did you mean 'warn'?"},
      {"[constraints]\nplugins = [\"regex\", \"Json!\"]\n",
       "constraints.plugins[1]: 'Json!' is not a plugin name"},
      {"[constraints]\nplugins = [\"regex\", \"regex\"]\n", "'regex' is listed twice"},
  });
  const std::string msg = parse_error("[scheduler]\npolicy = \"zzzz\"\n");
  EXPECT_NE(msg.find("cfg.toml:2:10: scheduler.policy: unknown value 'zzzz' (expected one of: "
                     "fcfs, priority)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
}

TEST(Config, SyntaxErrorNamesLine) {
  expect_errors({
      {"[backend]\nthreads = = 2\n", "cfg.toml:2:11: Error while parsing value"},
      {"[backend]\nthreads = 2\nthreads = 3\n", "cfg.toml:3:"},  // duplicate key
      {"[backend\nthreads = 2\n", "cfg.toml:1:"},
  });
}

TEST(Config, SizeParsing) {
  struct Case {
    const char* text;
    uint64_t bytes;
  } cases[] = {
      {"4GiB", 4ull << 30},        {"512MiB", 512ull << 20},   {"1.5GB", 1'500'000'000},
      {"100MB", 100'000'000},      {"1024", 1024},             {"1KB", 1000},
      {"1KiB", 1024},              {"2TiB", 2ull << 40},       {"3TB", 3'000'000'000'000},
      {"10B", 10},                 {" 4 GiB ", 4ull << 30},    {"4gib", 4ull << 30},
      {"0.5KiB", 512},             {"1.000001MB", 1'000'001},  {"0", 0},
      {"18446744073709551615", 18446744073709551615ull},      {"1.3MiB", 1363148},
  };
  for (const Case& c : cases) EXPECT_EQ(config_parse_size(c.text), c.bytes) << c.text;

  struct Bad {
    const char* text;
    const char* why;
  } bad[] = {
      {"", "no number"},          {"GiB", "no number"},           {"-1GiB", "no number"},
      {"+1GiB", "no number"},     {"4XB", "unknown unit 'XB'"},   {"4G", "unknown unit 'G'"},
      {"1.", "no digits after"},  {"1.5", "whole number"},        {"1.5B", "whole number"},
      {"1.1234567GB", "at most 6 decimals"},                      {"16777216TiB", "too large"},
      {"18446744073709551616", "too large"},
  };
  for (const Bad& b : bad) {
    const std::string msg = error_of([&] { config_parse_size(b.text); });
    EXPECT_NE(msg.find(b.why), std::string::npos) << b.text << " -> " << msg;
    EXPECT_NE(msg.find("invalid size"), std::string::npos) << msg;
  }
}

TEST(Config, CacheMemoryTakesStringOrInteger) {
  EXPECT_EQ(config_parse_string("[cache]\nmemory = \"4GiB\"\n").cache.memory_bytes, 4ull << 30);
  EXPECT_EQ(config_parse_string("[cache]\nmemory = 1048576\n").cache.memory_bytes, 1ull << 20);
  EXPECT_EQ(config_parse_string("[cache]\nmemory = \"auto\"\n").cache.memory_bytes, 0u);
  const std::string msg = parse_error("[cache]\nmemory = \"4 gigs\"\n");
  EXPECT_NE(msg.find("cfg.toml:2:10: cache.memory: invalid size '4 gigs'"), std::string::npos)
      << msg;
}

TEST(Config, RelativePathsResolveAgainstTheConfigFile) {
  const TempDir tmp;
  const fs::path file = tmp.write("etc/tessera.toml", R"(
plugin_dir = "/abs/plugins"
[model]
path = "models/m.gguf"
[speculative]
draft_model = "../draft.gguf"
)");
  const Config c = config_parse_file(file.string());
  EXPECT_EQ(c.plugin_dir, "/abs/plugins");
  EXPECT_EQ(c.model.path, (tmp.path() / "etc/models/m.gguf").string());
  EXPECT_EQ(c.speculative.draft_model, (tmp.path() / "draft.gguf").string());

  // From a string there is no directory to resolve against: paths are kept as written.
  const Config s = config_parse_string(read_file(file));
  EXPECT_EQ(s.model.path, "models/m.gguf");
  EXPECT_EQ(s.speculative.draft_model, "../draft.gguf");
}

TEST(Config, FileErrorsNameThePath) {
  const TempDir tmp;
  const std::string missing = (tmp.path() / "missing.toml").string();
  std::string msg = error_of([&] { config_parse_file(missing); });
  EXPECT_NE(msg.find("cannot open config file '" + missing + "'"), std::string::npos) << msg;

  msg = error_of([&] { config_parse_file(tmp.path().string()); });
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;

  const fs::path bad = tmp.write("bad.toml", "[server]\n\nport = \"80\"\n");
  msg = error_of([&] { config_parse_file(bad.string()); });
  EXPECT_EQ(msg.rfind(bad.string() + ":3:", 0), 0u) << msg;
}

}  // namespace
}  // namespace tsr
