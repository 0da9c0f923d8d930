// Typed, validated engine configuration parsed from TOML (toml++).
//
// Parsing is strict: an unknown section or key, a value of the wrong type or one out of
// range is a tsr::Error whose message names the source, line, key and, for unknown keys,
// the closest valid key ("did you mean ...?"). Every key is documented in configs/README.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tsr {

struct ModelConfig {
  std::string path;                       // required (may come from the command line instead)
  int32_t context = 0;                    // tokens per sequence; 0: the trained context, as [cache] memory allows
  std::string chat_template;              // empty: the model's; a built-in name or a file
};

struct BackendConfig {
  std::string plugin = "cpu";
  int32_t threads = 0;                    // 0: number of cores
  int32_t device = 0;
  std::string graphs = "auto";            // auto (on for GPU devices) | on | off
  bool pack_weights = true;               // matmul weights in the backend's own layout, where it has one
};

struct QuantConfig {
  std::string scheme = "auto";            // auto | q8_0 | q4_0 | int4_g128 | fp8_e4m3 | llm_int8 | w8a8_smooth | a plugin's
  std::optional<double> outlier_threshold;  // llm_int8's (the plugin's default 6.0 when unset)
  std::string imatrix;                    // llama.cpp importance matrix for the scheme; empty: none
};

struct CacheConfig {
  int32_t block_size = 16;
  uint64_t memory_bytes = 0;              // 0 ("auto"): a share of the memory free at start (core/kv/kv_memory.h)
  bool prefix_caching = true;
  uint64_t host_memory_bytes = 0;         // host tier for evicted prefix blocks (core/kv/host_tier.h); 0: off
  std::string disk_path;                  // disk tier below it (core/kv/disk_tier.h); empty: off
  uint64_t disk_memory_bytes = 8ull << 30;  // the disk tier's bound
  std::string dtype = "f16";              // K and V: f32 | f16 | bf16 | q8_0 | q4_0 | fp8_e4m3 (core/kv/kv_dtype.h)
  std::string dtype_k, dtype_v;           // empty: dtype (llama.cpp's -ctk / -ctv)
  std::string rotation = "auto";          // auto (q4_0 caches) | hadamard | none
  std::string eviction = "none";          // none | streaming (core/kv/streaming_window.h)
  int32_t sink_tokens = 4;                // streaming: first tokens always kept
  int32_t window = 0;                     // streaming: last tokens kept; 0: the context less the sinks

  // The default f16 for K and V, unchanged: a backend without f16 caches runs F32 instead.
  bool dtype_is_default() const { return dtype == "f16" && dtype_k.empty() && dtype_v.empty(); }
  const std::string& k_dtype() const { return dtype_k.empty() ? dtype : dtype_k; }
  const std::string& v_dtype() const { return dtype_v.empty() ? dtype : dtype_v; }
};

struct SchedulerConfig {
  int32_t max_batch_tokens = 2048;
  int32_t max_seqs = 64;
  std::string policy = "fcfs";            // fcfs | priority
  int32_t prefill_chunk = 0;              // 0: limited only by the token budget
  int32_t max_seqs_per_call = 0;          // one call's (submit_all's) share of max_seqs; 0: half
  // The running sequences one call may hold: max_seqs_per_call, or half of max_seqs.
  int32_t call_share() const { return max_seqs_per_call > 0 ? max_seqs_per_call : std::max(1, max_seqs / 2); }
};

struct SamplingConfig {                   // request defaults
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float typical_p = 1.0f;
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;           // absent: random per request
  // Absent: each front end's default (server: the rest of the context; tessera run: 128).
  std::optional<int32_t> max_tokens;
};

struct SpeculativeConfig {
  std::string method = "none";            // none, or a draft plugin's name (draft_model: "model")
  int32_t num_draft_tokens = 4;
  // Draft tokens of a tree (paths of num_draft_tokens at most), for drafts that propose
  // trees (eagle); 0 or at most num_draft_tokens: chains.
  int32_t tree_budget = 0;
  bool adaptive = true;
  int32_t ngram_min = 1;
  int32_t ngram_max = 4;
  std::string draft_model;                // path of the draft GGUF (method = draft_model)
  // The draft model's (or EAGLE head's) logits are multiplied by it before the draft reads
  // them: above 1 sharpens its sampled draws towards its argmax. Outputs never depend on it.
  float draft_sharpness = 1.0f;
};

struct ConstraintsConfig {
  // Constraint plugins to load, in order: the first that serves a kind compiles it.
  std::vector<std::string> plugins{"json_schema", "regex", "gbnf"};
  int32_t compile_workers = default_compile_workers();  // compiles at once
  uint64_t cache_memory_bytes = 256ull << 20;  // compiled constraints kept, by their bytes
  double compile_timeout_s = 10;               // one compile's time budget

  // min(4, hardware threads), at least 2: one costly schema never delays another.
  static int32_t default_compile_workers();
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  int32_t port = 8080;
  int32_t max_queue = 256;
  int32_t max_choices = 128;              // prompts x n of one request
  int64_t max_queue_tokens = 0;           // prompt tokens of unfinished requests; 0: 32 x the context
  std::string api_key;                    // empty: no authentication
  bool metrics_auth = false;              // /metrics needs the API key too
  int32_t max_connections = 4096;         // open at once; more are answered 503
  double header_timeout_s = 10;           // a request's header (or an idle connection)
  double body_timeout_s = 60;             // a request's body
  double write_timeout_s = 60;            // a client that accepts none of its response
  std::string alias;                      // the served model id; empty: the file name
  std::vector<std::string> cors_origins;  // origins answered with CORS headers; "*": any
};

struct LogConfig {
  std::string level = "info";             // trace | debug | info | warn | error | off
};

struct Config {
  std::string plugin_dir;                 // searched first; then TESSERA_PLUGIN_PATH, then beside the binary
  ModelConfig model;
  BackendConfig backend;
  QuantConfig quant;
  CacheConfig cache;
  SchedulerConfig scheduler;
  SamplingConfig sampling;
  SpeculativeConfig speculative;
  ConstraintsConfig constraints;
  ServerConfig server;
  LogConfig log;
};

// `source` names the text in error messages (a file path or "<string>").
Config config_parse_string(std::string_view toml_text, const std::string& source = "<string>");
Config config_parse_file(const std::string& path);

// Every accepted key, dotted ("backend.threads"; top-level keys bare), in table order.
std::vector<std::string> config_keys();

// "4GiB", "512MiB", "1.5GB", "1048576" -> bytes. Throws tsr::Error on bad input.
uint64_t config_parse_size(std::string_view text);

}  // namespace tsr
