#include "core/engine/engine.h"

#include <spdlog/spdlog.h>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/chat/chat_template.h"
#include "core/engine/quant_setup.h"
#include "core/kv/host_memory.h"
#include "core/constraint/grammar_cache.h"
#include "core/constraint/token_vocab.h"
#include "base/error.h"
#include "core/kv/kv_cache.h"
#include "core/kv/kv_cache_manager.h"
#include "core/kv/kv_memory.h"
#include "core/model/gguf.h"
#include "core/model/llama_forward.h"
#include "core/runner/model_runner.h"
#include "core/plugin_host/backend.h"
#include "core/plugin_host/plugin_loader.h"
#include "core/sched/prompt_groups.h"
#include "core/sched/scheduler.h"
#include "core/spec/draft_client.h"
#include "core/spec/model_host.h"
#include "core/spec/speculation_gate.h"
#include "core/spec/speculation_policy.h"

namespace tsr {

namespace {

// Logs load progress in 10 % steps for files large enough to take a while.
LoadProgress progress_logger(const std::string& what) {
  return [what, last = -1](uint64_t done, uint64_t total) mutable {
    if (total < (64ull << 20)) return;
    const int pct = static_cast<int>(done * 100 / total);
    if (pct / 10 != last / 10 || done == total) {
      spdlog::info("loading {}: {:3d}% ({} / {} MiB)", what, pct, done >> 20, total >> 20);
      last = pct;
    }
  };
}

// The [constraints] plugins, in order (the first that serves a kind compiles it).
std::unique_ptr<GrammarCache> load_constraint_plugins(const Config& c, const Tokenizer& tokenizer,
                                                      const std::vector<std::filesystem::path>& dirs) {
  const TokenVocab vocab(tokenizer);
  std::vector<std::shared_ptr<ConstraintPlugin>> plugins;
  for (const std::string& name : c.constraints.plugins) {
    plugins.push_back(ConstraintPlugin::create(Plugin::find(TSR_PLUGIN_CONSTRAINT, name, dirs), vocab));
  }
  GrammarCache::Limits limits;
  limits.workers = static_cast<size_t>(c.constraints.compile_workers);
  limits.max_bytes = static_cast<size_t>(c.constraints.cache_memory_bytes);
  limits.compile_timeout_s = c.constraints.compile_timeout_s;
  return std::make_unique<GrammarCache>(std::move(plugins), limits);
}

// The most tokens of a draft tree: [speculative] tree_budget where the backend runs tree
// attention and no streaming window moves the cache under the tree; else 0 (chains).
int32_t draft_tree_budget(const SpeculativeConfig& spec, const Backend& backend, bool streaming) {
  if (spec.tree_budget <= spec.num_draft_tokens) return 0;
  const char* why = streaming                        ? "a streaming window ([cache] eviction) moves the cache"
                    : !backend.has_tree_attention() ? "the backend has no tree attention"
                                                    : nullptr;
  if (why == nullptr) return spec.tree_budget;
  spdlog::warn("[speculative] tree_budget = {} ignored, drafts are chains: {}", spec.tree_budget, why);
  return 0;
}

// [speculative] method -> draft plugin name ("draft_model" loads the plugin "model").
std::string draft_plugin_name(const std::string& method) {
  return method == "draft_model" ? "model" : method;
}

// [cache] eviction = "streaming" as a window for a context of n_ctx tokens (window 0:
// the context less the sinks), or no eviction.
StreamingWindow streaming_window(const Config& c, const LlamaHParams& hp, int32_t n_ctx) {
  if (c.cache.eviction != "streaming") return {};
  const char* refused = hp.n_swa > 0                           ? "a model with sliding-window layers"
                        : c.speculative.method != "none"       ? "speculative decoding (a ring step computes one position)"
                                                               : nullptr;
  if (refused != nullptr) throw Error(std::string("[cache] eviction = \"streaming\" does not combine with ") + refused);
  StreamingWindow w{c.cache.sink_tokens, c.cache.window > 0 ? c.cache.window : n_ctx - c.cache.sink_tokens};
  if (w.window < 1 || w.capacity() > n_ctx) {
    throw Error(fmt::format("[cache] sink_tokens ({}) + window ({}) must be within the context ({} tokens), "
                            "with a window of at least 1",
                            w.sink_tokens, w.window, n_ctx));
  }
  spdlog::info("KV eviction: streaming, {} sink tokens + a window of {}; requests generate past the context "
               "and forget its middle (lossy)",
               w.sink_tokens, w.window);
  return w;
}

// A streaming request's length limit: positions stay far below where float RoPE angles
// lose their precision.
constexpr int32_t kStreamingMaxPositions = 1 << 24;

struct Submission {
  RequestId id;
  RequestId call;  // the first id of its submit_all
  RequestParams params;
  OutputCallback on_output;
  Clock::time_point arrival;
};

struct Live {
  std::unique_ptr<Request> request;
  OutputCallback on_output;
  std::unique_ptr<DraftClient::Seq> draft;  // with speculative decoding
  SpeculationPolicy::State spec;
  bool compiling = false;  // waits for its constraint before it is scheduled
};

struct Compiled {
  RequestId id;
  GrammarCache::Result result;
};

// Everything a block's KV bytes depend on besides its tokens: the model's contents, the
// cache's shape and dtypes, the backend that computed it and the quantization scheme.
std::string kv_disk_identity(const GgufFile& gguf, const KvCacheShape& shape, const std::string& backend,
                             const std::string& quant) {
  return fmt::format("tessera kv 1; model {:016x}; layers {} kv_heads {} head_dim {} block {}; K {} V {}{}; "
                     "backend {}; quant {}",
                     gguf_content_fingerprint(gguf), shape.n_layer, shape.n_kv_heads, shape.head_dim,
                     shape.block_size, tsr_dtype_name(shape.format.k), tsr_dtype_name(shape.format.v),
                     shape.format.rotated ? " rotated" : "", backend, quant);
}

}  // namespace

struct Engine::Impl {
  Config config;
  std::unique_ptr<Backend> backend;
  std::shared_ptr<const GgufFile> gguf;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Scheduler> scheduler;
  PromptGroups groups;  // choices sharing a prompt: computed once, then forked
  std::unique_ptr<ModelHost> model_host;  // runs draft models
  std::unique_ptr<DraftClient> draft;     // NULL without speculative decoding
  std::unique_ptr<SpeculationPolicy> spec_policy;
  std::unique_ptr<SpeculationGate> spec_gate;  // with adaptive drafting: whether a step drafts at all
  int32_t tree_budget = 0;  // the most tokens of a draft tree (0: chains)
  // The drafting that feeds the next step: the batch size it was decided for and the time
  // the proposals took, charged to that step.
  struct DraftCycle {
    int32_t running = 0;
    double seconds = 0;
  };
  std::optional<DraftCycle> draft_cycle;
  int32_t n_ctx = 0;
  int32_t max_positions = 0;  // a request's length limit: n_ctx, or more with a streaming window
  uint64_t kv_bytes_per_token = 0;
  int64_t kv_tokens = 0;  // the pool's capacity
  std::string chat_template;  // the Jinja text chat prompts are rendered with

  // Step-thread state (step_mutex is held while a step runs).
  std::mutex step_mutex;
  std::unordered_map<RequestId, Live> live;
  std::vector<float> logits, hidden;
  int64_t finished = 0, steps = 0, generated = 0, drafted = 0, accepted = 0, verifications = 0;
  int64_t steps_interrupted = 0;
  uint64_t arrivals_seen = 0;  // `arrivals` when this step took the inbox

  // Shared with submitting threads.
  mutable std::mutex inbox_mutex;
  std::condition_variable inbox_cv;
  std::vector<Submission> inbox;
  std::vector<RequestId> cancels;
  std::vector<Compiled> compiled;  // constraints compiled since the last step
  size_t n_compiling = 0;          // step thread only: live requests waiting for one
  std::atomic<RequestId> next_id{1};
  std::atomic<uint64_t> arrivals{0};  // calls submitted: a new one interrupts an interruptible step
  std::thread worker;
  bool stopping = false;       // guarded by inbox_mutex
  std::string failure;         // guarded by inbox_mutex: why the engine serves no more, if it does not
  std::atomic<bool> background{false};
  mutable std::mutex stats_mutex;
  EngineStats stats;
  // Last, so that it is destroyed first: its worker's callbacks use the inbox.
  std::unique_ptr<GrammarCache> grammars;

  void load();
  bool step();
  void admit(std::vector<Submission>& subs, std::vector<RequestId>& cancel_ids, Clock::time_point now);
  void start_compile(Live& l);
  void attach_constraints(std::vector<Compiled>& done, std::vector<Request*>& touched,
                          Clock::time_point now);
  void finish(Live& l, tsr_finish_reason reason, Clock::time_point now, std::string error = {});
  void check_device(const std::exception& step_error, std::vector<Request*>& touched);
  void drop_draft(Live& l, const std::exception& e);
  bool execute(const SchedulerOutput& out, std::vector<Request*>& touched);
  bool follows_group(Live& l);
  // Where a step computed a request's chunk: its first row in the step and first position.
  struct PromptRows {
    int64_t first_row;
    int32_t start;
  };
  void fork_followers(Request& leader, std::span<const float> row, const PromptRows& rows, Clock::time_point now,
                      std::vector<Request*>& touched);
  void release_orphans();
  void check(const RequestParams& params) const;
  void propose_drafts();
  void deliver_hidden(Live& l, int64_t first_row, int32_t start);
  void deliver_path_hidden(Live& l, int64_t first_draft_row, int32_t first_position);
  void deliver_rows(Live& l, int64_t first_row, int32_t n, int32_t position);
  void deliver(std::vector<Request*>& touched);
  void publish_stats();
  ForwardOptions forward_options(const Backend& backend, const KvCacheShape& shape, int32_t context) const;
  void run_background();
};

// Decode graphs: on for GPU devices unless the config says otherwise. The recorded block
// tables stay under 768 KiB (a GPU backend checks index operands from its host mirrors of
// buffers up to 1 MiB while recording); sequences beyond their width run eagerly.
ForwardOptions Engine::Impl::forward_options(const Backend& backend, const KvCacheShape& shape,
                                             int32_t context) const {
  ForwardOptions o;
  const std::string& mode = config.backend.graphs;
  o.graphs = mode == "on" || (mode == "auto" && backend.props().type == TSR_DEVICE_GPU);
  o.graph_max_batch = config.scheduler.max_seqs;
  const int64_t context_blocks = (int64_t{context} + shape.block_size - 1) / shape.block_size;
  o.graph_max_blocks = static_cast<int32_t>(std::min<int64_t>(context_blocks, std::max(1, (192 << 10) / o.graph_max_batch)));
  o.context = context;
  return o;
}

void Engine::Impl::load() {
  if (config.model.path.empty()) {
    throw Error("no model given: set [model] path in the config or pass -m MODEL");
  }
  // A plugin_dir that is not there would leave the search to the other folders silently,
  // and load plugins other than the ones the operator pointed at.
  std::error_code ec;
  if (!config.plugin_dir.empty() && !std::filesystem::is_directory(config.plugin_dir, ec)) {
    throw Error("plugin_dir '" + config.plugin_dir + "' is not a directory", TSR_STATUS_NOT_FOUND);
  }
  const auto dirs = plugin_search_dirs(config.plugin_dir);
  auto plugin = Plugin::find(TSR_PLUGIN_BACKEND, config.backend.plugin, dirs);
  backend = Backend::create(plugin, config.backend.device, config.backend.threads);

  gguf = GgufFile::open(config.model.path);
  model = LlamaModel::load(gguf, *backend, progress_logger(config.model.path), quant_scheme_load(config.quant.scheme, config.quant, dirs),
                            config.backend.pack_weights);
  tokenizer = Tokenizer::create(vocab_from_gguf(*gguf));
  const LlamaHParams& hp = model->hparams();
  if (tokenizer->n_tokens() != hp.n_vocab) {
    throw Error(config.model.path + ": the vocabulary has " + std::to_string(tokenizer->n_tokens()) +
                " tokens, the embedding " + std::to_string(hp.n_vocab));
  }
  KvCacheShape shape = ModelRunner::cache_shape(*model, config.cache);
  shape.format = kv_format_for_backend(*backend, shape.format, config.cache.dtype_is_default());
  const uint64_t kv_memory = kv_memory_budget(config.cache.memory_bytes, backend->props(), model->weight_bytes());
  n_ctx = kv_cache_context(shape, kv_memory, config.model.context, hp.n_ctx_train);
  ModelRunnerOptions ro;
  ro.block_size = shape.block_size;
  ro.kv = shape.format;
  ro.num_blocks = kv_cache_num_blocks(shape, kv_memory, n_ctx, config.scheduler.max_seqs);
  ro.streaming = streaming_window(config, hp, n_ctx);
  max_positions = ro.streaming.enabled() ? kStreamingMaxPositions : n_ctx;
  kv_bytes_per_token = shape.bytes_per_token();
  kv_tokens = int64_t(ro.num_blocks) * shape.block_size;
  ro.prefix_caching = config.cache.prefix_caching;
  ro.host_tier_bytes = config.cache.host_memory_bytes;
  if (!config.cache.disk_path.empty()) {
    ro.disk_tier_path = config.cache.disk_path;
    ro.disk_tier_bytes = config.cache.disk_memory_bytes;
    ro.disk_tier_identity = kv_disk_identity(*gguf, shape, backend->name(), config.quant.scheme);
  }
  const uint64_t host_pool = backend->props().host_visible != 0 ? uint64_t(ro.num_blocks) * shape.bytes_per_block() : 0;
  check_host_kv_memory(host_pool, ro.prefix_caching ? ro.host_tier_bytes : 0, host_memory_limit());
  ro.forward = forward_options(*backend, shape, n_ctx);
  runner = std::make_unique<ModelRunner>(*model, *backend, ro);
  scheduler = std::make_unique<Scheduler>(config.scheduler, runner->kv());
  chat_template = chat_template_resolve(config.model.chat_template, tokenizer->vocab());
  grammars = load_constraint_plugins(config, *tokenizer, dirs);
  if (config.speculative.method != "none") {
    auto plugin = Plugin::find(TSR_PLUGIN_DRAFT, draft_plugin_name(config.speculative.method), dirs);
    model_host = std::make_unique<ModelHost>(*backend, config, *model);
    model_host->set_states_buffer([this] { return runner->forward().capture_buffer(); });
    const DraftClient::TargetShape target{model->n_params(), model->hparams().n_layer, model->hparams().n_embd};
    draft = std::make_unique<DraftClient>(plugin, config.speculative, tokenizer->vocab().tokens, target,
                                          model_host->table(), config.backend.threads);
    if (!draft->hidden_layers().empty()) runner->set_capture_layers(draft->hidden_layers());
    spec_policy = std::make_unique<SpeculationPolicy>(config.speculative, config.scheduler);
    if (config.speculative.adaptive) spec_gate = std::make_unique<SpeculationGate>(!draft->runs_model());
    tree_budget = draft_tree_budget(config.speculative, *backend, ro.streaming.enabled());
    spdlog::info("speculative decoding: {} drafts, k = {}{}", config.speculative.method,
                 config.speculative.num_draft_tokens, config.speculative.adaptive ? " (adaptive)" : "");
  }
  publish_stats();
}

void Engine::Impl::admit(std::vector<Submission>& subs, std::vector<RequestId>& cancel_ids,
                         Clock::time_point now) {
  // Copied, not held: a cached constraint's callback (start_compile) takes inbox_mutex.
  const std::string failed = [&] {
    std::lock_guard lock(inbox_mutex);
    return failure;
  }();
  for (Submission& s : subs) {
    auto r = std::make_unique<Request>(s.id, std::move(s.params), *tokenizer, s.arrival);
    r->set_call(s.call);
    Live l{std::move(r), std::move(s.on_output), nullptr, {}};
    if (draft && !l.request->embeds()) {  // an embedding generates nothing to draft
      try {
        l.draft = draft->open(l.request->tokens());
      } catch (const std::exception& e) {
        drop_draft(l, e);
      }
    }
    Live& placed = live.emplace(s.id, std::move(l)).first->second;
    if (!failed.empty()) {  // submitted before the failure
      placed.request->finish(TSR_FINISH_ERROR, now, failed);
    } else if (placed.request->params().constraint) {
      start_compile(placed);
    } else if (!follows_group(placed)) {
      scheduler->add(placed.request.get());
    }
  }
  for (RequestId id : cancel_ids) {
    auto it = live.find(id);
    if (it == live.end()) continue;
    finish(it->second, TSR_FINISH_ABORT, now);
  }
}

// Compiles on one of the cache's workers (or finds it cached); the result reaches the next step
// through the inbox.
void Engine::Impl::start_compile(Live& l) {
  l.compiling = true;
  ++n_compiling;
  const RequestId id = l.request->id();
  grammars->request(*l.request->params().constraint, [this, id](const GrammarCache::Result& r) {
    {
      std::lock_guard lock(inbox_mutex);
      compiled.push_back({id, r});
    }
    inbox_cv.notify_one();
  });
}

// Requests whose constraint compiled start with a fresh matcher; a constraint that did not
// compile fails its request with the reason.
void Engine::Impl::attach_constraints(std::vector<Compiled>& done, std::vector<Request*>& touched,
                                      Clock::time_point now) {
  for (Compiled& c : done) {
    auto it = live.find(c.id);
    if (it == live.end() || !it->second.compiling) continue;  // cancelled meanwhile
    it->second.compiling = false;
    --n_compiling;
    Request& r = *it->second.request;
    try {
      if (!c.result.grammar) throw Error(c.result.error);
      r.set_matcher(c.result.grammar->new_matcher());
      scheduler->add(&r);
    } catch (const std::exception& e) {
      r.finish(TSR_FINISH_ERROR, now, e.what());
      touched.push_back(&r);
    }
  }
}

// Also for a request still waiting for its constraint (cancelled, or past its deadline):
// the step loop counts those.
void Engine::Impl::finish(Live& l, tsr_finish_reason reason, Clock::time_point now, std::string error) {
  if (l.compiling) {
    l.compiling = false;
    --n_compiling;
  }
  l.request->finish(reason, now, std::move(error));
  scheduler->remove(l.request.get());
}

// A device error that outlives its step (the stream cannot even synchronize afterwards: a
// lost GPU, a CUDA sticky error) ends the engine. Every request fails now and submit()
// refuses new ones, naming the error, rather than each being admitted only to fail in
// its first step while the server reports itself healthy.
void Engine::Impl::check_device(const std::exception& step_error, std::vector<Request*>& touched) {
  const auto* e = dynamic_cast<const Error*>(&step_error);
  if (e == nullptr || e->status() != TSR_STATUS_DEVICE_ERROR) return;
  try {
    backend->synchronize();
    return;  // the device works: the step alone failed
  } catch (const std::exception&) {
  }
  const std::string why = std::string("the device failed: ") + step_error.what();
  spdlog::critical("engine: {}; it serves no more requests", why);
  {
    std::lock_guard lock(inbox_mutex);
    failure = why;
  }
  const Clock::time_point now = Clock::now();
  for (auto& [id, l] : live) {
    if (l.request->finished()) continue;
    finish(l, TSR_FINISH_ERROR, now, why);
    touched.push_back(l.request.get());
  }
}

// A draft that fails turns speculation off for its request alone; the request goes on.
void Engine::Impl::drop_draft(Live& l, const std::exception& e) {
  spdlog::warn("request {}: speculative decoding off: {}", l.request->id(), e.what());
  l.draft.reset();
  l.request->truncate_drafts(0);
}

// A request of a prompt group (unconstrained: a constrained one waits for its compile
// instead) either leads it or waits for its leader's prompt. A streaming window's ring
// blocks hold other positions than a fork would assume, so it runs alone there.
bool Engine::Impl::follows_group(Live& l) {
  const Request& r = *l.request;
  if (r.params().prompt_group == 0 || r.embeds() || config.cache.eviction != "none") return false;
  return groups.join(r.params().prompt_group, r.id());
}

// The leader's prompt is computed: each follower shares its blocks and draws its first
// token from the leader's last logits row, with its own seed and sampling, as if it had
// computed the prompt itself. One that cannot run now (max_seqs) or whose prompt differs
// waits in the queue like any request (and finds the prompt in the prefix cache).
void Engine::Impl::fork_followers(Request& leader, std::span<const float> row, const PromptRows& rows,
                                  Clock::time_point now, std::vector<Request*>& touched) {
  const std::span<const int32_t> prompt = leader.tokens().first(size_t(leader.num_prompt_tokens()));
  const int32_t n_vocab = model->hparams().n_vocab;
  for (const RequestId id : groups.take_followers(leader.id())) {
    auto it = live.find(id);
    if (it == live.end() || it->second.request->finished()) continue;  // cancelled meanwhile
    Request& f = *it->second.request;
    f.set_num_computed(f.num_prompt_tokens());
    if (!std::ranges::equal(f.tokens(), prompt) || !scheduler->add_running(&f, now)) {
      f.set_num_computed(0);
      scheduler->add(&f);
      continue;
    }
    runner->kv().fork(leader.id(), f.id());
    deliver_hidden(it->second, rows.first_row, rows.start);  // the leader's last prompt chunk, shared
    try {
      f.append_verified(row, n_vocab, max_positions, now);
      generated += 1;
    } catch (const std::exception& e) {  // its own sampling or constraint: it alone fails
      f.finish(TSR_FINISH_ERROR, now, e.what());
    }
    if (f.finished()) scheduler->remove(&f);
    touched.push_back(&f);
  }
}

// Followers whose leader finished (or left) before its prompt was computed run alone.
void Engine::Impl::release_orphans() {
  const auto gone = [this](RequestId leader) {
    auto it = live.find(leader);
    return it == live.end() || it->second.request->finished();
  };
  for (const RequestId id : groups.take_orphans(gone)) {
    auto it = live.find(id);
    if (it != live.end() && !it->second.request->finished()) scheduler->add(it->second.request.get());
  }
}

// False: a call arrived during an interruptible step and the step was abandoned.
bool Engine::Impl::execute(const SchedulerOutput& out, std::vector<Request*>& touched) {
  const StepInterrupt interrupt = [this] { return arrivals.load(std::memory_order_relaxed) != arrivals_seen; };
  if (!runner->execute(out, logits, hidden, out.interruptible ? &interrupt : nullptr)) return false;
  KvCacheManager& kv = runner->kv();
  const Clock::time_point now = Clock::now();  // tokens exist from here on
  const int32_t n_vocab = model->hparams().n_vocab;
  const auto n_embd = size_t(model->hparams().n_embd);
  size_t row = 0, hidden_row = 0;
  int64_t step_row = 0;  // the chunk's first row in the step
  for (const ScheduledChunk& c : out.chunks) {
    Request& r = *c.request;
    const int32_t before = r.num_tokens();
    const int32_t start = r.num_computed();
    const int64_t first_row = std::exchange(step_row, step_row + c.num_new_tokens);
    const auto [lo, hi] = r.pooled_rows(r.num_computed(), c.num_new_tokens);
    r.on_computed(c.num_new_tokens);
    if (r.embeds()) {
      kv.commit(r.id(), r.tokens(), r.num_computed(), r.cache_key());
      r.pool_states(std::span(hidden).subspan(hidden_row * n_embd, size_t(hi - lo) * n_embd), hi - lo, now);
      hidden_row += size_t(hi - lo);
      if (r.finished()) scheduler->remove(&r);
      continue;
    }
    if (r.num_computed() < before) {  // a prefill chunk: no token yet
      kv.commit(r.id(), r.tokens(), r.num_computed(), r.cache_key());
      deliver_hidden(live.at(r.id()), first_row, start);
      continue;
    }
    const auto k = static_cast<int32_t>(r.drafts().size());
    const int32_t depth = r.draft_depth();
    const std::span<const float> rows = logits_rows(logits, n_vocab, row, size_t(k) + 1);
    row += size_t(k) + 1;
    int32_t n_accepted = 0;
    try {
      n_accepted = r.append_verified(rows, n_vocab, max_positions, now);
    } catch (const std::exception& e) {  // this request's sampling or constraint: it alone fails
      r.finish(TSR_FINISH_ERROR, now, e.what());
      scheduler->remove(&r);
      continue;
    }
    // KV of rejected drafts never reaches the prefix cache: append_verified counts only the
    // accepted positions as computed.
    kv.commit(r.id(), r.tokens(), r.num_computed(), r.cache_key());
    if (before == r.num_prompt_tokens()) fork_followers(r, rows.first(size_t(n_vocab)), {first_row, start}, now, touched);
    generated += r.num_tokens() - before;
    drafted += k;
    accepted += n_accepted;
    verifications += k > 0;
    Live& l = live.at(r.id());
    deliver_hidden(l, first_row, start);
    deliver_path_hidden(l, first_row + before - start, before);
    if (l.draft && k > 0) {
      try {
        l.draft->on_verified(n_accepted, r.tokens().back());
        spec_policy->observe(l.spec, depth, n_accepted);
      } catch (const std::exception& e) {
        drop_draft(l, e);
      }
    }
    if (r.finished()) scheduler->remove(&r);
  }
  return true;
}

// The target's states at the draft's layers for the positions this step added to the
// request's history (from `start`; its rows from `first_row` of the step): a prompt chunk's
// every row, a verification's last token and accepted drafts.
void Engine::Impl::deliver_hidden(Live& l, int64_t first_row, int32_t start) {
  deliver_rows(l, first_row, l.request->num_computed() - start, start);
}

// The states of the accepted drafts of a tree that lie off its first chain (the drafts'
// rows start at `first_draft_row`, the first draft's position is `first_position`): each
// is the state of its position, which the next step computes again for the KV.
void Engine::Impl::deliver_path_hidden(Live& l, int64_t first_draft_row, int32_t first_position) {
  const std::span<const int32_t> path = l.request->accepted_path();
  for (size_t m = 0; m < path.size(); ++m) {
    if (path[m] != int32_t(m)) deliver_rows(l, first_draft_row + path[m], 1, first_position + int32_t(m));
  }
}

// Rows [first_row, first_row + n) of the step's captured states, as positions from `position`.
void Engine::Impl::deliver_rows(Live& l, int64_t first_row, int32_t n, int32_t position) {
  if (!l.draft || draft->hidden_layers().empty() || n <= 0) return;
  const tsr_tensor& all = runner->forward().captured();
  const int64_t n_embd = all.shape[2];
  tsr_tensor rows = all;
  rows.shape[1] = n;
  rows.data = static_cast<uint8_t*>(all.data) + first_row * n_embd * int64_t(sizeof(float));
  try {
    l.draft->on_hidden(rows, position);
  } catch (const std::exception& e) {
    drop_draft(l, e);
  }
}

// Asks the draft for proposals for every running request that is caught up: in one call
// where the draft batches (a draft model then runs one pass per round for all of them),
// else one request at a time. A failed batch call is retried request by request, so that
// only the request at fault loses its speculation.
void Engine::Impl::propose_drafts() {
  const auto running = static_cast<int32_t>(scheduler->num_running());
  const Clock::time_point start = Clock::now();
  if (spec_gate) {
    draft_cycle = DraftCycle{running, 0};
    if (!spec_gate->drafts(running)) return;
  }
  std::vector<Live*> asked;
  std::vector<DraftClient::BatchItem> items;
  std::vector<std::vector<double>> uniforms(live.size());
  std::vector<tsr_draft_sampling> draws(live.size());  // items point into it: no reallocation
  for (auto& [id, l] : live) {
    Request& r = *l.request;
    if (!l.draft || r.finished() || r.state() != RequestState::RUNNING || !r.caught_up()) continue;
    const int32_t room = std::min(r.params().max_tokens - r.num_output_tokens(), n_ctx - r.num_tokens()) - 1;
    const int32_t k = std::min(spec_policy->num_drafts(l.spec, running), room);
    if (k <= 0) continue;
    // A tree's nodes take slots past the accepted path: the context bounds them too.
    const int32_t tree = r.constrained() ? 0 : std::min(tree_budget, n_ctx - r.num_tokens() - 1);
    const size_t at = asked.size();
    const bool sampled = r.describe_draws(k, uniforms[at], draws[at]);
    asked.push_back(&l);
    items.push_back({l.draft.get(), r.tokens(), k, tree, sampled ? &draws[at] : nullptr});
  }
  std::vector<DraftClient::Proposal> proposals;
  if (items.size() > 1 && draft->batches()) {
    try {
      proposals = draft->propose_batch(items);
    } catch (const std::exception& e) {
      spdlog::warn("draft '{}': a batched proposal failed, asking each request alone: {}", draft->name(), e.what());
    }
  }
  for (size_t i = 0; i < asked.size(); ++i) {
    Live& l = *asked[i];
    try {
      DraftClient::Proposal p = proposals.empty() ? l.draft->propose(items[i].history, items[i].k, items[i].tree, items[i].sampling)
                                                  : std::move(proposals[i]);
      l.request->set_drafts(std::move(p.tokens), std::move(p.parents));
      l.request->trim_drafts_to_constraint();
    } catch (const std::exception& e) {
      drop_draft(l, e);
    }
  }
  if (draft_cycle) draft_cycle->seconds = std::chrono::duration<double>(Clock::now() - start).count();
}

void Engine::Impl::deliver(std::vector<Request*>& touched) {
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (Request* r : touched) {
    const RequestId id = r->id();
    RequestOutput out = r->take_output();
    auto it = live.find(id);
    if (it->second.on_output) it->second.on_output(out);
    if (out.finished) {
      ++finished;
      live.erase(it);
    }
  }
}

bool Engine::Impl::step() {
  // Step-driven generate() may run on several threads at once; steps take turns.
  std::lock_guard stepping(step_mutex);
  std::vector<Submission> subs;
  std::vector<RequestId> cancel_ids;
  std::vector<Compiled> done;
  {
    std::unique_lock lock(inbox_mutex);
    // Step-driven callers loop on step(): while only compiles are pending, wait for one
    // rather than spin.
    if (inbox.empty() && cancels.empty() && compiled.empty() && n_compiling > 0 && live.size() == n_compiling) {
      inbox_cv.wait_for(lock, std::chrono::milliseconds(50));
    }
    subs.swap(inbox);
    arrivals_seen = arrivals.load(std::memory_order_relaxed);
    cancel_ids.swap(cancels);
    done.swap(compiled);
  }
  const Clock::time_point now = Clock::now();
  admit(subs, cancel_ids, now);
  std::vector<Request*> touched;
  attach_constraints(done, touched, now);
  for (auto& [id, l] : live) {
    if (l.request->finished()) touched.push_back(l.request.get());
    else if (l.request->past_deadline(now)) {
      finish(l, TSR_FINISH_LENGTH, now);
      touched.push_back(l.request.get());
    }
  }
  const SchedulerOutput out = scheduler->schedule(now);
  if (!out.chunks.empty()) {
    try {
      const bool decode = std::ranges::all_of(out.chunks, [](const ScheduledChunk& c) { return c.request->caught_up(); });
      const int64_t generated_before = generated, drafted_before = drafted;
      const Clock::time_point start = Clock::now();
      if (!execute(out, touched)) {
        scheduler->on_interrupted();
        ++steps_interrupted;
      } else {
        if (draft_cycle && decode) {
          const double seconds = draft_cycle->seconds + std::chrono::duration<double>(Clock::now() - start).count();
          spec_gate->observe(draft_cycle->running, drafted > drafted_before, generated - generated_before, seconds);
        }
        draft_cycle.reset();
        if (draft) propose_drafts();
      }
    } catch (const std::exception& e) {
      // A failed step fails the requests in it; the engine itself stays usable.
      spdlog::error("step failed: {}", e.what());
      for (const ScheduledChunk& c : out.chunks) {
        c.request->finish(TSR_FINISH_ERROR, Clock::now(), e.what());
        scheduler->remove(c.request);
      }
      check_device(e, touched);
    }
    ++steps;
  } else {
    // Nothing to run but, perhaps, requests whose prefix is being read from disk: wait for
    // a read rather than spin.
    runner->kv().wait_for_loads(std::chrono::milliseconds(5));
  }
  for (const ScheduledChunk& c : out.chunks) touched.push_back(c.request);
  if (!groups.empty()) release_orphans();  // before deliver() lets finished leaders go
  deliver(touched);
  publish_stats();
  return !live.empty();
}

void Engine::Impl::publish_stats() {
  EngineStats s;
  const KvCacheManager& kv = runner->kv();
  s.kv_blocks_total = kv.pool().num_blocks();
  s.kv_blocks_free = kv.num_free_blocks();
  s.kv_blocks_used = kv.num_used_blocks();
  s.kv_blocks_cached = kv.pool().num_cached();
  s.prompt_tokens = scheduler->prefix_queries();
  s.cached_prompt_tokens = scheduler->prefix_hits();
  s.prefix_hit_rate = s.prompt_tokens > 0 ? double(s.cached_prompt_tokens) / s.prompt_tokens : 0;
  if (const KvHostTier* tier = runner->host_tier()) {
    s.kv_host_blocks = int64_t(tier->num_blocks());
    s.kv_host_stored = int64_t(tier->stats().stored);
    s.kv_host_restored = int64_t(tier->stats().hits);
  }
  if (const KvDiskTier* disk = runner->disk_tier()) {
    const KvDiskTierStats d = disk->stats();
    s.kv_disk_blocks = int64_t(disk->num_blocks());
    s.kv_disk_written = int64_t(d.written);
    s.kv_disk_loaded = int64_t(d.loaded);
    s.kv_disk_rejected = int64_t(d.rejected);
  }
  s.num_waiting = static_cast<int32_t>(scheduler->num_waiting());
  s.num_running = static_cast<int32_t>(scheduler->num_running());
  s.num_unfinished = static_cast<int32_t>(live.size());
  s.requests_finished = finished;
  s.preemptions = scheduler->total_preemptions();
  s.steps = steps;
  s.steps_interrupted = steps_interrupted;
  s.generated_tokens = generated;
  s.draft_tokens = drafted;
  s.accepted_tokens = accepted;
  s.verifications = verifications;
  s.draft_model_passes = model_host ? model_host->passes() : 0;
  s.constraint_compiles = static_cast<int64_t>(grammars->misses());
  s.constraint_cache_hits = static_cast<int64_t>(grammars->hits());
  s.graph_replays = runner->forward().graph_replays();
  s.graphs_recorded = runner->forward().graphs_recorded();
  std::lock_guard lock(stats_mutex);
  stats = s;
}

void Engine::Impl::run_background() {
  for (;;) {
    {
      std::unique_lock lock(inbox_mutex);
      inbox_cv.wait(lock, [&] {
        return stopping || !inbox.empty() || !cancels.empty() || !compiled.empty() ||
               live.size() > n_compiling;
      });
      if (stopping) return;
    }
    // The last request just finished: hand the memory the burst freed back to the system,
    // so that a server's resident size follows its load rather than its history.
    try {
      if (!step()) malloc_trim(0);
    } catch (const std::exception& e) {  // a step's own failures fail its requests; this is a last resort
      spdlog::error("engine step: {}", e.what());
    }
  }
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() { stop(); }

// Loading runs on a thread of its own that ends with it. Packing and converting weights
// run OpenMP regions, and libgomp keeps a thread pool per thread that started one for as
// long as that thread lives: the caller's pool would outlive the load beside the step
// thread's, and with more pooled threads than cores libgomp stops spinning between
// regions, so every op of every later step paid a futex wake-up (measured: 64 tokens of a
// Q4_0 110m through the server 18% in the kernel's wake-up paths, gone when the load's
// pool ended with its thread).
std::unique_ptr<Engine> Engine::create(const Config& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  std::async(std::launch::async, [&] { impl->load(); }).get();
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const Config& Engine::config() const { return impl_->config; }
const Tokenizer& Engine::tokenizer() const { return *impl_->tokenizer; }
const LlamaHParams& Engine::hparams() const { return impl_->model->hparams(); }
int32_t Engine::context_length() const { return impl_->n_ctx; }
uint64_t Engine::kv_bytes_per_token() const { return impl_->kv_bytes_per_token; }
int64_t Engine::kv_tokens() const { return impl_->kv_tokens; }
const std::string& Engine::chat_template() const { return impl_->chat_template; }
const tsr_device_props& Engine::device() const { return impl_->backend->props(); }

uint64_t Engine::weight_bytes() const { return impl_->model->weight_bytes(); }
uint64_t Engine::step_read_bytes() const { return impl_->model->step_read_bytes(); }

RequestParams Engine::request_defaults() const {
  const SamplingConfig& c = impl_->config.sampling;
  RequestParams p;
  p.max_tokens = c.max_tokens.value_or(INT32_MAX);
  p.seed = c.seed;
  SamplingParams& s = p.sampling;
  s.temperature = c.temperature;
  s.top_k = c.top_k;
  s.top_p = c.top_p;
  s.min_p = c.min_p;
  s.typical_p = c.typical_p;
  s.repeat_penalty = c.repeat_penalty;
  s.repeat_last_n = c.repeat_last_n;
  s.presence_penalty = c.presence_penalty;
  s.frequency_penalty = c.frequency_penalty;
  return p;
}

std::vector<int32_t> Engine::tokenize(std::string_view text, size_t max_tokens) const {
  return impl_->tokenizer->encode(text, true, false, max_tokens);
}

std::vector<int32_t> Engine::chat_prompt(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                         const nlohmann::ordered_json& tools,
                                         const nlohmann::ordered_json& kwargs, size_t max_tokens) const {
  const Vocab& vocab = impl_->tokenizer->vocab();
  const auto token_text = [&](int32_t id) {
    return id >= 0 && id < static_cast<int32_t>(vocab.tokens.size()) ? vocab.tokens[size_t(id)] : std::string();
  };
  const std::string bos = token_text(vocab.bos_id), eos = token_text(vocab.eos_id);
  ChatTemplateInputs inputs{messages, add_generation_prompt, bos, eos, tools, std::nullopt, kwargs};
  const std::string text = apply_chat_template(impl_->chat_template, inputs);
  const bool has_bos = !bos.empty() && text.starts_with(bos);
  return impl_->tokenizer->encode(text, !has_bos, true, max_tokens);
}

namespace {

// An embedding request pools the last, mean or first state and samples nothing.
void check_embedding(const RequestParams& params) {
  if (*params.embed == Pooling::RANK) {
    throw Error("rank pooling (a reranker's classifier head) gives no embeddings", TSR_STATUS_UNSUPPORTED);
  }
  if (params.constraint) throw Error("an embedding request takes no constraint");
}

}  // namespace

Pooling Engine::pooling() const { return impl_->model->hparams().pooling; }

int32_t Engine::embedding_width() const { return impl_->model->hparams().n_embd; }

// Throws tsr::Error naming what the engine cannot take of `params`.
void Engine::Impl::check(const RequestParams& params) const {
  if (params.prompt.empty()) throw Error("the prompt is empty");
  if (static_cast<int32_t>(params.prompt.size()) >= n_ctx) {
    throw Error("the prompt has " + std::to_string(params.prompt.size()) +
                " tokens; the context holds " + std::to_string(n_ctx) + " (prompt and output)");
  }
  for (int32_t t : params.prompt) {
    if (t < 0 || t >= tokenizer->n_tokens()) throw Error("prompt token id " + std::to_string(t) + " is out of range");
  }
  if (params.max_tokens < 1) throw Error("max_tokens must be >= 1");
  if (params.min_tokens < 0) throw Error("min_tokens must be >= 0");
  if (params.constraint) grammars->check_kind(params.constraint->kind);
  if (params.embed) check_embedding(params);
  SamplerChain validate(params.sampling);  // throws naming a bad sampling parameter
  for (const LogitBias& b : params.sampling.logit_bias) {
    if (b.token >= tokenizer->n_tokens()) throw Error("logit_bias token id " + std::to_string(b.token) + " is out of range");
  }
}

RequestId Engine::submit(RequestParams params, OutputCallback on_output) {
  std::vector<RequestParams> one;
  one.push_back(std::move(params));
  std::vector<OutputCallback> callbacks;
  callbacks.push_back(std::move(on_output));
  return submit_all(std::move(one), std::move(callbacks)).front();
}

std::vector<RequestId> Engine::submit_all(std::vector<RequestParams> params, std::vector<OutputCallback> on_output) {
  Impl& m = *impl_;
  if (std::optional<std::string> why = failure()) {
    throw Error("the engine serves no more requests: " + *why, TSR_STATUS_DEVICE_ERROR);
  }
  if (on_output.size() != params.size()) throw Error("submit_all: one callback per request", TSR_STATUS_INVALID_ARGUMENT);
  for (const RequestParams& p : params) m.check(p);
  std::vector<RequestId> ids;
  {
    std::lock_guard lock(m.inbox_mutex);  // one step admits them all
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < params.size(); ++i) {
      ids.push_back(m.next_id++);
      m.inbox.push_back({ids.back(), ids.front(), std::move(params[i]), std::move(on_output[i]), now});
    }
    m.arrivals.fetch_add(1, std::memory_order_relaxed);
  }
  m.inbox_cv.notify_one();
  return ids;
}

void Engine::compile_constraint(const ConstraintSpec& spec) { impl_->grammars->get(spec); }

std::optional<std::string> Engine::failure() const {
  std::lock_guard lock(impl_->inbox_mutex);
  if (impl_->failure.empty()) return std::nullopt;
  return impl_->failure;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(impl_->inbox_mutex);
    impl_->cancels.push_back(id);
  }
  impl_->inbox_cv.notify_one();
}

bool Engine::step() {
  if (impl_->background) throw Error("step() while the background thread runs", TSR_STATUS_INVALID_ARGUMENT);
  return impl_->step();
}

void Engine::start() {
  Impl& m = *impl_;
  if (m.background.exchange(true)) return;
  {
    std::lock_guard lock(m.inbox_mutex);
    m.stopping = false;
  }
  m.worker = std::thread([&m] { m.run_background(); });
}

void Engine::stop() {
  Impl& m = *impl_;
  if (!m.background) return;
  {
    std::lock_guard lock(m.inbox_mutex);
    m.stopping = true;
  }
  m.inbox_cv.notify_all();
  m.worker.join();
  m.background = false;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(impl_->stats_mutex);
  return impl_->stats;
}

GenerateResult Engine::generate(RequestParams params, OutputCallback on_output) {
  auto result = std::make_shared<GenerateResult>();
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  submit(std::move(params), [result, done, on_output](const RequestOutput& out) {
    if (on_output) on_output(out);
    result->tokens.insert(result->tokens.end(), out.tokens.begin(), out.tokens.end());
    result->text += out.text;
    if (out.finished) {
      result->finish_reason = out.finish_reason;
      result->error = out.error;
      result->embedding = out.embedding;
      result->stats = out.stats;
      done->set_value();
    }
  });
  if (impl_->background) {
    finished.wait();
  } else {
    while (finished.wait_for(std::chrono::seconds(0)) != std::future_status::ready) impl_->step();
  }
  return std::move(*result);
}

}  // namespace tsr
