// The HTTP server in-process on an ephemeral port with stories260K, driven by
// httplib::Client: every endpoint, the streaming format, error statuses and shapes,
// authentication, the bounded queue and client disconnects.
#include <gtest/gtest.h>

#include <regex>
#include <httplib.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/engine/engine.h"
#include "base/error.h"
#include "server/http_server.h"
#include "tests/common/shared_data.h"

namespace tsr::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kModel = "models/stories260K.gguf";

Config test_config() {
  Config c;
  c.model.path = testing::shared_path(kModel);
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.threads = 1;
  c.scheduler.max_seqs = 8;
  c.scheduler.max_seqs_per_call = 8;  // n = 8 forks its prompt at once (NChoicesComputeThePromptOnce)
  return c;
}

ServerOptions test_options() {
  ServerOptions o;
  o.port = 0;
  o.max_queue = 16;
  o.max_body_bytes = 1u << 20;
  o.model_id = model_id_from_path(kModel);
  return o;
}

// The data payloads of a text/event-stream body, in order.
std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t end; (end = body.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    const std::string event = body.substr(pos, end - pos);
    if (event.starts_with("data: ")) out.push_back(event.substr(6));
  }
  return out;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(testing::shared_path(kModel))) return;
    engine_ = Engine::create(test_config()).release();
    server_ = new HttpServer(*engine_, test_options());
    port_ = server_->start();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete engine_;
    server_ = nullptr;
    engine_ = nullptr;
  }
  void SetUp() override { TSR_REQUIRE_SHARED(kModel); }

  static httplib::Client client(int port = port_) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    return c;
  }
  static httplib::Result post(const std::string& path, const json& body, int port = port_) {
    return client(port).Post(path.c_str(), body.dump(), "application/json");
  }
  // Expects an OpenAI error object with `status` and, when given, `param`.
  static json expect_error(const httplib::Result& r, int status, const std::string& param = {}) {
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, status) << r->body;
    const json j = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.contains("error")) << r->body;
    if (!j.contains("error")) return j;
    const json& e = j["error"];
    EXPECT_TRUE(e["message"].is_string());
    EXPECT_TRUE(e["type"].is_string());
    EXPECT_TRUE(e.contains("param") && e.contains("code"));
    if (!param.empty()) {
      EXPECT_EQ(e["param"], param) << r->body;
    }
    return j;
  }
  // The whole answer to a request sent as `head` (request line and headers) and no body.
  static std::string answer_to_head(const std::string& head) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    const timeval timeout{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    std::string out;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
        ::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }
  // A POST of `body` to /v1/completions, for tests that read the response as it arrives.
  static httplib::Request completions_request(const json& body) {
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    return req;
  }
  static json completion(json body) {
    body["model"] = "stories260K";
    const auto r = post("/v1/completions", body);
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }

  static inline Engine* engine_ = nullptr;
  static inline HttpServer* server_ = nullptr;
  static inline int port_ = 0;
};

TEST_F(ServerTest, HealthAndModels) {
  auto h = client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  auto m = client().Get("/v1/models");
  ASSERT_TRUE(m);
  const json j = json::parse(m->body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "stories260K");
  EXPECT_EQ(client().Get("/v1/models/stories260K")->status, 200);
  expect_error(client().Get("/v1/models/nope"), 404, "model");
}

TEST_F(ServerTest, GreedyCompletionMatchesTheEngine) {
  const json j = completion({{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}});
  RequestParams p = engine_->request_defaults();
  p.prompt = engine_->tokenize("Once upon a time");
  p.max_tokens = 24;
  p.sampling.temperature = 0;
  const GenerateResult ref = engine_->generate(p);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], ref.text);
  EXPECT_EQ(j["choices"][0]["finish_reason"], finish_reason_name(ref.finish_reason));
  EXPECT_EQ(j["usage"]["prompt_tokens"], p.prompt.size());
  EXPECT_EQ(j["usage"]["completion_tokens"], ref.tokens.size());
  EXPECT_EQ(j["usage"]["total_tokens"], p.prompt.size() + ref.tokens.size());
  // The same prompt as token ids gives the same text.
  const json ids = completion({{"prompt", p.prompt}, {"max_tokens", 24}, {"temperature", 0}});
  EXPECT_EQ(ids["choices"][0]["text"], ref.text);
}

// Without max_tokens a request runs to EOS or the end of the context, as on vLLM's server
// and llama.cpp's, not to a fixed default length.
TEST_F(ServerTest, OmittedMaxTokensRunsToTheEndOfTheContext) {
  const json j = completion({{"prompt", "Once upon a time"}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], engine_->context_length());
}

TEST_F(ServerTest, StreamedCompletionEqualsWholeOne) {
  const json body{{"prompt", "Once upon a time"}, {"max_tokens", 32}, {"temperature", 0}};
  const json whole = completion(body);
  json sbody = body;
  sbody["stream"] = true;
  sbody["stream_options"] = {{"include_usage", true}};
  const auto r = post("/v1/completions", sbody);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto events = sse_events(r->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json c = json::parse(events[i]);
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_TRUE(c["usage"].is_null());
    text += c["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, whole["choices"][0]["text"]);
  const json last_choice = json::parse(events[events.size() - 3]);
  EXPECT_EQ(last_choice["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"]);
  const json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], whole["usage"]);
}

TEST_F(ServerTest, ChatWholeAndStreamed) {
  const json body{{"model", "stories260K"},
                  {"messages", {{{"role", "system"}, {"content", "Tell a story."}}, {{"role", "user"}, {"content", "Hi"}}}},
                  {"max_completion_tokens", 20},
                  {"temperature", 0}};
  const auto r = post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json whole = json::parse(r->body);
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["role"], "assistant");
  EXPECT_LE(whole["usage"]["completion_tokens"].get<int>(), 20);
  json sbody = body;
  sbody["stream"] = true;
  const auto s = post("/v1/chat/completions", sbody);
  const auto events = sse_events(s->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json d = json::parse(events[i])["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
  }
  EXPECT_EQ(text, whole["choices"][0]["message"]["content"]);
}

TEST_F(ServerTest, NChoicesAreSeededReproduciblyAndDiffer) {
  const json body{{"prompt", "Once"}, {"max_tokens", 16}, {"temperature", 1.0}, {"seed", 7}, {"n", 3}};
  const json a = completion(body), b = completion(body);
  ASSERT_EQ(a["choices"].size(), 3u);
  std::set<std::string> distinct;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a["choices"][i]["index"], i);
    EXPECT_EQ(a["choices"][i]["text"], b["choices"][i]["text"]);
    distinct.insert(a["choices"][i]["text"].get<std::string>());
  }
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_EQ(a["usage"]["prompt_tokens"], engine_->tokenize("Once").size());  // counted once
}

TEST_F(ServerTest, StopStringEndsTheText) {
  const json free_run = completion({{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}});
  const std::string text = free_run["choices"][0]["text"];
  const size_t cut = text.find(' ', 10);
  ASSERT_NE(cut, std::string::npos) << text;
  const std::string stop = text.substr(cut, 4);
  const json stopped = completion({{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}, {"stop", {stop}}});
  EXPECT_EQ(stopped["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerTest, Logprobs) {
  const json c = completion({{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 2}});
  const json& lp = c["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), c["usage"]["completion_tokens"].get<size_t>());
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    ASSERT_EQ(lp["top_logprobs"][i].size(), 2u);
    double best = -1e9;
    for (const auto& [tok, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), best, 1e-6);  // greedy picks the top token
  }
  const auto r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                               {"max_tokens", 4}, {"temperature", 0}, {"logprobs", true},
                                               {"top_logprobs", 3}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json content = json::parse(r->body)["choices"][0]["logprobs"]["content"];
  ASSERT_FALSE(content.empty());
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
  EXPECT_TRUE(content[0]["bytes"].is_array());
}

TEST_F(ServerTest, BadRequestsName400Parameters) {
  const auto bad = [](json body, const std::string& param) {
    body["prompt"] = body.value("prompt", json("Once"));
    expect_error(post("/v1/completions", body), 400, param);
  };
  bad({{"temperature", "hot"}}, "temperature");
  bad({{"max_tokens", -1}}, "max_tokens");
  bad({{"max_tokens", 1.5}}, "max_tokens");
  bad({{"top_p", 2}}, "top_p");
  bad({{"n", 0}}, "n");
  bad({{"stop", 3}}, "stop");
  bad({{"logit_bias", {{"abc", 1}}}}, "logit_bias");
  bad({{"logit_bias", {{"99999", 1}}}}, "logit_bias");
  bad({{"stream_options", {{"include_usage", true}}}}, "stream_options");
  bad({{"prompt", {1, "x"}}}, "prompt");
  bad({{"prompt", {100000}}}, "prompt");
  // Constraints that do not compile are 400s naming the parameter and the feature.
  bad({{"grammar", "root ::= undefined"}}, "grammar");
  bad({{"regex", "(?=a)b"}}, "regex");
  bad({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"},
       {"schema", {{"type", "object"}, {"patternProperties", {{"^a", json::object()}}}}}}}}}}, "response_format");
  bad({{"response_format", {{"type", "json_schema"}}}}, "response_format");
  bad({{"response_format", {{"type", "xml"}}}}, "response_format");
  bad({{"grammar", "root ::= \"a\""}, {"regex", "a"}}, "regex");
  bad({{"guided_choice", json::array()}}, "guided_choice");
  expect_error(post("/v1/chat/completions", {{"messages", "hi"}}), 400, "messages");
  expect_error(post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", {{{"type", "function"}}}}}),
               400, "tools");
  expect_error(client().Post("/v1/completions", "{not json", "application/json"), 400);
  // A valid request with a plain-text response_format passes.
  EXPECT_EQ(completion({{"prompt", "Once"}, {"max_tokens", 2}, {"response_format", {{"type", "text"}}}})["object"],
            "text_completion");
}

TEST_F(ServerTest, ConstrainedOutputs) {
  const json schema = {{"type", "object"},
                       {"properties", {{"name", {{"type", "string"}, {"maxLength", 10}}},
                                       {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 120}}}}},
                       {"required", {"name", "age"}},
                       {"additionalProperties", false}};
  const json r = completion({{"prompt", "Once"}, {"max_tokens", 200}, {"temperature", 0},
                             {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", schema}}}}}});
  const json choice = r["choices"][0];
  ASSERT_EQ(choice["finish_reason"], "stop") << r.dump();
  const json doc = json::parse(choice["text"].get<std::string>());
  EXPECT_LE(doc["name"].get<std::string>().size(), 10u);
  EXPECT_GE(doc["age"].get<int>(), 0);
  EXPECT_LE(doc["age"].get<int>(), 120);
  EXPECT_EQ(doc.size(), 2u);
  const json choice2 = completion({{"prompt", "Once"}, {"max_tokens", 50}, {"temperature", 1}, {"seed", 5},
                                   {"guided_choice", {"yes", "no", "a.b"}}})["choices"][0];
  EXPECT_TRUE(choice2["text"] == "yes" || choice2["text"] == "no" || choice2["text"] == "a.b") << choice2;
  const json choice3 = completion({{"prompt", "Once"}, {"max_tokens", 50}, {"temperature", 1}, {"seed", 5},
                                   {"regex", "[0-9]{3}-[a-z]{2}"}})["choices"][0];
  EXPECT_TRUE(std::regex_match(choice3["text"].get<std::string>(), std::regex("[0-9]{3}-[a-z]{2}"))) << choice3;
  const json choice4 = completion({{"prompt", "Once"}, {"max_tokens", 50}, {"temperature", 0},
                                   {"constraint", {{"kind", "gbnf"}, {"text", "root ::= [a-c]{4}"}}}})["choices"][0];
  EXPECT_TRUE(std::regex_match(choice4["text"].get<std::string>(), std::regex("[a-c]{4}"))) << choice4;
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"constraint", {{"kind", "xml"}, {"text", "<a/>"}}}}), 400);
}

TEST_F(ServerTest, NotFoundAndTooLarge) {
  expect_error(client().Get("/v1/nothing"), 404);
  expect_error(post("/v1/completions", {{"model", "gpt-4"}, {"prompt", "x"}}), 404, "model");
  // A prompt past the context is a 400 with OpenAI's code; 413 is for the body's size.
  const json long_prompt = expect_error(post("/v1/completions", {{"prompt", std::vector<int>(600, 5)}}), 400, "prompt");
  EXPECT_EQ(long_prompt["error"]["code"], "context_length_exceeded");
  const json long_chat = expect_error(
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", std::string(3000, 'a')}}}}}), 400, "messages");
  EXPECT_EQ(long_chat["error"]["code"], "context_length_exceeded");
  // Text whose bytes alone need more tokens than the context is refused untokenized.
  for (const auto& [path, body] : {std::pair{"/v1/completions", json{{"prompt", std::string(1u << 19, 'a')}}},
                                   {"/v1/chat/completions",
                                    json{{"messages", {{{"role", "user"}, {"content", std::string(1u << 19, 'a')}}}}}}}) {
    const json huge = expect_error(post(path, body), 400);
    EXPECT_EQ(huge["error"]["code"], "context_length_exceeded");
    EXPECT_NE(huge["error"]["message"].get<std::string>().find("524288 bytes, at least"), std::string::npos) << huge;
  }
  expect_error(post("/v1/completions", {{"prompt", std::string(2u << 20, 'a')}}), 413);
}

// Roles a template cannot render faithfully are refused by name, never dropped.
// Tool results and assistant tool calls are rendered, never dropped: stories260K's vocabulary
// has no template, so ChatML's default gets them as hermes text. Malformed ones are 400s.
TEST_F(ServerTest, ChatRolesAndToolMessagesAreChecked) {
  const auto chat = [](const json& messages) { return post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 2}}); };
  const json unknown = expect_error(chat({{{"role", "narrator"}, {"content", "x"}}}), 400, "messages");
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find("'narrator'"), std::string::npos) << unknown;
  const json history = {{{"role", "user"}, {"content", "x"}},
                        {{"role", "assistant"},
                         {"content", nullptr},
                         {"tool_calls", {{{"id", "a"}, {"type", "function"},
                                          {"function", {{"name", "f"}, {"arguments", "{\"n\": 1}"}}}}}}},
                        {{"role", "tool"}, {"content", "42"}, {"tool_call_id", "a"}}};
  const httplib::Result answered = chat(history);
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->status, 200) << answered->body;
  const auto tokens = post("/tokenize", {{"messages", history}});
  ASSERT_TRUE(tokens);
  const auto text = post("/detokenize", {{"tokens", json::parse(tokens->body)["tokens"]}});
  ASSERT_TRUE(text);
  const std::string prompt = json::parse(text->body)["prompt"];
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\":\"f\",\"arguments\":{\"n\":1}}\n</tool_call>"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<|im_start|>user\n<tool_response>\n42\n</tool_response>"), std::string::npos) << prompt;
  expect_error(chat({{{"role", "user"}, {"content", "x"}},
                     {{"role", "assistant"}, {"tool_calls", json::array({{{"id", "a"}, {"type", "function"}}})}}}),
               400, "messages");
  expect_error(chat({{{"role", "user"}, {"content", "x"}, {"tool_calls", json::array()}}}), 400, "messages");
  expect_error(chat({{{"role", "assistant"}, {"content", "x"}, {"function_call", {{"name", "f"}}}}}), 400, "messages");
  // vLLM's chat_template_kwargs and an assistant turn's reasoning_content reach the template
  // (hf_jinja_test renders Qwen3's with them); each is checked for its type.
  const json reasoned = {{{"role", "user"}, {"content", "x"}},
                         {{"role", "assistant"}, {"content", "y"}, {"reasoning_content", "because"}},
                         {{"role", "user"}, {"content", "z"}}};
  const auto kwargs = post("/v1/chat/completions", {{"messages", reasoned}, {"max_tokens", 2},
                                                    {"chat_template_kwargs", {{"enable_thinking", false}}}});
  ASSERT_TRUE(kwargs);
  EXPECT_EQ(kwargs->status, 200) << kwargs->body;
  expect_error(post("/v1/chat/completions", {{"messages", reasoned}, {"chat_template_kwargs", 5}}), 400,
               "chat_template_kwargs");
  expect_error(chat({{{"role", "assistant"}, {"content", "y"}, {"reasoning_content", 5}}}), 400, "messages");
  const httplib::Result developer = chat({{{"role", "developer"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  ASSERT_TRUE(developer);
  EXPECT_EQ(developer->status, 200) << developer->body;
}

TEST_F(ServerTest, BadToolsAndToolChoicesAreRefused) {
  const json user = {{{"role", "user"}, {"content", "x"}}};
  const json tool = {{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}};
  const auto chat = [&](json extra) {
    extra["messages"] = user;
    extra["max_tokens"] = 2;
    return post("/v1/chat/completions", extra);
  };
  expect_error(chat({{"tools", "f"}}), 400, "tools");
  expect_error(chat({{"tools", {{{"type", "function"}, {"function", {{"name", ""}}}}}}}), 400, "tools");
  expect_error(chat({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", 3}}}}}}}), 400, "tools");
  expect_error(chat({{"tools", {tool}}, {"tool_choice", "sometimes"}}), 400, "tool_choice");
  expect_error(chat({{"tools", {tool}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}), 400,
               "tool_choice");
  expect_error(chat({{"tool_choice", "required"}}), 400, "tool_choice");
  expect_error(chat({{"tools", {tool}}, {"tool_choice", "required"}, {"regex", "a+"}}), 400, "tool_choice");
  expect_error(chat({{"tools", {tool}}, {"parallel_tool_calls", "yes"}}), 400, "parallel_tool_calls");
  expect_error(chat({{"functions", {{{"name", "f"}}}}}), 400, "functions");
  expect_error(chat({{"modalities", {"text", "audio"}}}), 400, "modalities");
  expect_error(chat({{"audio", {{"voice", "alloy"}}}}), 400, "audio");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"tools", {tool}}}), 400, "tools");
}

TEST_F(ServerTest, Metrics) {
  completion({{"prompt", "Once"}, {"max_tokens", 4}, {"temperature", 0}});
  // Responses are counted once written (cpp-httplib's logger), which may be just after the
  // client has read the completion: wait until the count shows.
  auto r = client().Get("/metrics");
  for (int i = 0; i < 200 && r && r->body.find("tessera_http_responses_total{code=\"200\"}") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = client().Get("/metrics");
  }
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  for (const char* name : {"tessera_requests_total{finish_reason=\"length\"}", "tessera_prompt_tokens_total",
                           "tessera_generation_tokens_total", "tessera_time_to_first_token_seconds_bucket",
                           "tessera_time_per_output_token_seconds_count", "tessera_kv_blocks{state=\"free\"}",
                           "tessera_kv_blocks{state=\"used\"}", "tessera_kv_blocks{state=\"cached\"}",
                           "tessera_prefix_cache_hit_rate", "tessera_spec_draft_tokens_total",
                           "tessera_spec_accepted_tokens_total", "tessera_spec_draft_model_passes_total",
                           "tessera_graph_replays_total",
                           "tessera_graphs_recorded", "tessera_http_responses_total{code=\"200\"}"}) {
    EXPECT_NE(r->body.find(name), std::string::npos) << name;
  }
}

// n choices compute their prompt once: the followers fork the first one's KV.
TEST_F(ServerTest, NChoicesComputeThePromptOnce) {
  std::string text;
  for (int i = 0; engine_->tokenize(text).size() < 400; ++i) text += "The dog number " + std::to_string(i) + " ran to the park. ";
  const auto prompt_tokens = int64_t(engine_->tokenize(text).size());
  const auto computed = [] {
    const auto r = client().Get("/metrics");
    std::smatch m;
    const std::string body = r ? r->body : "";
    return std::regex_search(body, m, std::regex("tessera_prompt_tokens_computed_total (\\d+)")) ? std::stoll(m[1]) : -1;
  };
  const int64_t before = computed();
  const json r = completion({{"prompt", text}, {"max_tokens", 4}, {"n", 8}, {"temperature", 1}, {"seed", 5},
                             {"cache_salt", "n-choices-test"}});
  ASSERT_EQ(r["choices"].size(), 8u);
  EXPECT_EQ(r["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(computed() - before, prompt_tokens) << "the prompt computed once, not 8 times";
}

// best_of = 4, n = 1: the one of the four samples with the highest cumulative logprob (the
// samples are those of n = 4 with the same seed: seed + i each). Usage counts every sample.
TEST_F(ServerTest, BestOfReturnsTheHighestLogprobSample) {
  const json base{{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 1.0}, {"seed", 11}};
  json all = base;
  all["n"] = 4;
  all["logprobs"] = 0;
  const json samples = completion(all);
  ASSERT_EQ(samples["choices"].size(), 4u);
  std::string best_text;
  double best = -1e30;
  int64_t completion_tokens = 0;
  for (const json& c : samples["choices"]) {
    double sum = 0;
    for (const json& lp : c["logprobs"]["token_logprobs"]) sum += lp.get<double>();
    if (sum > best) best = sum, best_text = c["text"];
  }
  completion_tokens = samples["usage"]["completion_tokens"];
  json one = base;
  one["best_of"] = 4;
  const json chosen = completion(one);
  ASSERT_EQ(chosen["choices"].size(), 1u);
  EXPECT_EQ(chosen["choices"][0]["text"], best_text);
  EXPECT_EQ(chosen["choices"][0]["index"], 0);
  EXPECT_TRUE(chosen["choices"][0]["logprobs"].is_null()) << "not asked for";
  EXPECT_EQ(chosen["usage"]["completion_tokens"], completion_tokens);
  json streamed = one;
  streamed["stream"] = true;
  expect_error(post("/v1/completions", streamed), 400, "best_of");
  json fewer = base;
  fewer["best_of"] = 1;
  fewer["n"] = 2;
  expect_error(post("/v1/completions", fewer), 400, "best_of");
}

// Beam search at width 1 is greedy decoding; wider beams give n distinct hypotheses.
TEST_F(ServerTest, BeamSearch) {
  const json greedy = completion({{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}});
  const json width1 = completion({{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"use_beam_search", true}});
  EXPECT_EQ(width1["choices"][0]["text"], greedy["choices"][0]["text"]);
  EXPECT_EQ(width1["choices"][0]["finish_reason"], greedy["choices"][0]["finish_reason"]);
  EXPECT_EQ(width1["usage"], greedy["usage"]);
  const json wide = completion({{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"use_beam_search", true},
                                {"beam_width", 4}, {"n", 3}, {"length_penalty", 0.5}});
  ASSERT_EQ(wide["choices"].size(), 3u);
  EXPECT_NE(wide["choices"][0]["text"], wide["choices"][1]["text"]);
  EXPECT_NE(wide["choices"][1]["text"], wide["choices"][2]["text"]);
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"use_beam_search", true}, {"stream", true}}), 400, "stream");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"use_beam_search", true}, {"logprobs", 2}}), 400, "logprobs");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"use_beam_search", true}, {"n", 3}, {"beam_width", 2}}), 400,
               "beam_width");
  expect_error(post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"use_beam_search", true}}),
               400, "use_beam_search");
}

TEST_F(ServerTest, ApiKey) {
  ServerOptions o = test_options();
  o.api_key = "secret";
  HttpServer secured(*engine_, o);
  const int port = secured.start();
  const json body{{"prompt", "Once"}, {"max_tokens", 2}};
  expect_error(post("/v1/completions", body, port), 401);
  httplib::Client c = client(port);
  EXPECT_EQ(c.Get("/health")->status, 200);
  c.set_bearer_token_auth("wrong");
  expect_error(c.Post("/v1/completions", body.dump(), "application/json"), 401);
  expect_error(post("/tokenize", {{"prompt", "Once"}}, port), 401);
  expect_error(post("/detokenize", {{"tokens", {1}}}, port), 401);
  c.set_bearer_token_auth("secret");
  EXPECT_EQ(c.Post("/v1/completions", body.dump(), "application/json")->status, 200);
  EXPECT_EQ(c.Post("/tokenize", R"({"prompt": "Once"})", "application/json")->status, 200);
}

// With the engine paused nothing leaves the queue: one request waits, the next is refused.
// What could crash the server or grow its memory without bound is refused up front:
// documents and patterns nested past the limits (parsing, destroying or compiling them
// recurses per level), bodies without a Content-Length or compressed (httplib bounds the
// body by Content-Length only), and more stop strings than the step thread should check.
TEST_F(ServerTest, UnboundedInputIsRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_error(client().Post("/v1/completions", R"({"prompt": "x", "guided_json": )" + deep + "}", "application/json"), 400);
  const auto nested = [](const std::string& open, const std::string& inner, const std::string& close) {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += open;
    s += inner;
    for (int i = 0; i < 5000; ++i) s += close;
    return s;
  };
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"regex", nested("(", "a", ")")}}), 400, "regex");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"grammar", "root ::= " + nested("(", "\"a\"", ")")}}), 400,
               "grammar");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"stop", std::vector<std::string>(65, "a")}}), 400, "stop");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"stop", std::string(1025, 'a')}}), 400, "stop");
  // Answered from the headers alone, before any of the body is sent.
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  const std::string chunked = answer_to_head(head + "Transfer-Encoding: chunked\r\n\r\n");
  EXPECT_TRUE(chunked.starts_with("HTTP/1.1 411")) << chunked;
  EXPECT_NE(chunked.find("Content-Length"), std::string::npos) << chunked;
  EXPECT_TRUE(answer_to_head(head + "\r\n").starts_with("HTTP/1.1 411"));
  const std::string gzip = answer_to_head(head + "Content-Length: 100\r\nContent-Encoding: gzip\r\n\r\n");
  EXPECT_TRUE(gzip.starts_with("HTTP/1.1 415")) << gzip;
  // Nesting within the limits still works.
  EXPECT_EQ(completion({{"prompt", "x"}, {"max_tokens", 4}, {"regex", nested("(", "a", ")").substr(4990, 21)}})["object"],
            "text_completion");
}

// An idle server admits a call whatever its number of choices (a queue bound that can
// never be met would refuse it forever).
TEST_F(ServerTest, IdleServerAdmitsAnyCall) {
  ServerOptions o = test_options();
  o.max_queue = 1;
  HttpServer small(*engine_, o);
  const int port = small.start();
  const auto r = post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}, {"n", 4}}, port);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"].size(), 4u);
}

// vLLM's request fields beyond OpenAI's reach the engine: min_tokens holds off the end of
// generation (the greedy text goes on past where it stopped), cache_salt keeps a prefix
// out of other salts' cache hits, and priority is taken.
TEST_F(ServerTest, MinTokensCacheSaltAndPriority) {
  // EOS pushed to the top by logit_bias ends at once, unless min_tokens holds it off.
  const std::string eos = std::to_string(engine_->tokenizer().vocab().eos_id);
  const json eager{{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}, {"logit_bias", {{eos, 100}}}};
  EXPECT_EQ(completion(eager)["usage"]["completion_tokens"], 1);
  json held = eager;
  held["min_tokens"] = 6;
  const json six = completion(held);
  EXPECT_EQ(six["choices"][0]["finish_reason"], "stop") << six;
  EXPECT_EQ(six["usage"]["completion_tokens"], 7) << six;  // six held tokens, then EOS
  // A stop string does not end the text before min_tokens either (vLLM's rule).
  const json base{{"prompt", "Once upon a time"}, {"max_tokens", 100}, {"temperature", 0}, {"stop", {"Lily"}}};
  const json first = completion(base);
  json later = base;
  later["min_tokens"] = first["usage"]["completion_tokens"].get<int>() + 5;
  const json second = completion(later);
  EXPECT_EQ(second["choices"][0]["finish_reason"], "stop") << second;
  EXPECT_GT(second["choices"][0]["text"].get<std::string>().size(), first["choices"][0]["text"].get<std::string>().size())
      << first << second;
  std::string story;
  for (int i = 0; i < 12; ++i) story += "The little dog ran to the park. ";
  const json cached = json{{"prompt", story}, {"max_tokens", 1}, {"priority", -3}};
  completion(cached);
  EXPECT_GT(completion(cached)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  json salted = cached;
  salted["cache_salt"] = "tenant-a";
  EXPECT_EQ(completion(salted)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_GT(completion(salted)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"min_tokens", -1}}), 400, "min_tokens");
  expect_error(post("/v1/completions", {{"prompt", "x"}, {"cache_salt", ""}}), 400, "cache_salt");
}

// vLLM's /tokenize and /detokenize: the completion prompt's ids (BOS as the model wants,
// or none), the chat prompt's, token strings on request, and text back from ids.
TEST_F(ServerTest, TokenizeAndDetokenize) {
  const json t = json::parse(post("/tokenize", {{"prompt", "Once upon a time"}})->body);
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), engine_->tokenize("Once upon a time"));
  EXPECT_EQ(t["count"], t["tokens"].size());
  EXPECT_EQ(t["max_model_len"], engine_->context_length());
  EXPECT_TRUE(t["token_strs"].is_null());
  const json plain = json::parse(
      post("/tokenize", {{"prompt", "Once upon a time"}, {"add_special_tokens", false}, {"return_token_strs", true}})->body);
  EXPECT_EQ(plain["count"].get<size_t>() + 1, t["count"].get<size_t>()) << "no BOS";
  ASSERT_EQ(plain["token_strs"].size(), plain["tokens"].size());
  EXPECT_EQ(plain["token_strs"][0], engine_->tokenizer().vocab().tokens[plain["tokens"][0].get<size_t>()]);
  const json back = json::parse(post("/detokenize", {{"tokens", plain["tokens"]}})->body);
  EXPECT_EQ(back["prompt"], "Once upon a time");
  const json messages = {{{"role", "user"}, {"content", "Hello"}}};
  const json chat = json::parse(post("/tokenize", {{"messages", messages}})->body);
  EXPECT_EQ(chat["tokens"].get<std::vector<int32_t>>(), engine_->chat_prompt({{"user", "Hello"}}));
  const json open = json::parse(post("/tokenize", {{"messages", messages}, {"add_generation_prompt", false}})->body);
  EXPECT_LT(open["count"].get<size_t>(), chat["count"].get<size_t>());
  expect_error(post("/tokenize", {{"prompt", "x"}, {"messages", messages}}), 400, "prompt");
  expect_error(post("/tokenize", {{"messages", messages}, {"add_special_tokens", true}}), 400, "add_special_tokens");
  expect_error(post("/detokenize", {{"tokens", {1, engine_->tokenizer().n_tokens()}}}), 400, "tokens");
  expect_error(post("/tokenize", {{"model", "gpt-4"}, {"prompt", "x"}}), 404, "model");
}

// Base64 of little-endian float32 back to floats (OpenAI's encoding_format "base64").
std::vector<float> from_base64(const std::string& text) {
  static const std::string kDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  uint32_t bits = 0;
  int n = 0;
  for (const char c : text) {
    if (c == '=') break;
    bits = bits << 6 | uint32_t(kDigits.find(c));
    if ((n += 6) >= 8) bytes += char(bits >> (n -= 8) & 0xff);
  }
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

TEST_F(ServerTest, EmbeddingsOfTextAndTokenIds) {
  const std::string text = "Once upon a time";
  const std::vector<int32_t> ids = engine_->tokenize(text);
  const auto r = post("/v1/embeddings", {{"model", "stories260K"}, {"input", {text, "The end."}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "stories260K");
  ASSERT_EQ(j["data"].size(), 2u);
  const std::vector<float> first = j["data"][0]["embedding"];
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][1]["index"], 1);
  ASSERT_EQ(first.size(), size_t(engine_->embedding_width()));
  double norm = 0;
  for (float v : first) norm += double(v) * v;
  EXPECT_NEAR(norm, 1.0, 1e-5);
  const int64_t second_tokens = int64_t(engine_->tokenize("The end.").size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], int64_t(ids.size()) + second_tokens);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"]);
  // The same tokens as ids, and as base64 floats: the same vector, bit for bit.
  const auto by_ids = post("/v1/embeddings", {{"input", ids}, {"encoding_format", "base64"}});
  ASSERT_TRUE(by_ids);
  ASSERT_EQ(by_ids->status, 200) << by_ids->body;
  EXPECT_EQ(from_base64(json::parse(by_ids->body)["data"][0]["embedding"]), first);
  const auto own_width = post("/v1/embeddings", {{"input", text}, {"dimensions", engine_->embedding_width()}});
  ASSERT_TRUE(own_width);
  EXPECT_EQ(own_width->status, 200) << own_width->body;
}

TEST_F(ServerTest, BadEmbeddingRequestsName400Parameters) {
  expect_error(post("/v1/embeddings", {{"model", "stories260K"}}), 400, "input");
  expect_error(post("/v1/embeddings", {{"input", ""}}), 400, "input");
  expect_error(post("/v1/embeddings", {{"input", json::array()}}), 400, "input");
  expect_error(post("/v1/embeddings", {{"input", {1, engine_->tokenizer().n_tokens()}}}), 400, "input");
  expect_error(post("/v1/embeddings", {{"input", "x"}, {"encoding_format", "int8"}}), 400, "encoding_format");
  expect_error(post("/v1/embeddings", {{"input", "x"}, {"dimensions", 8}}), 400, "dimensions");
  expect_error(post("/v1/embeddings", {{"input", "x"}, {"model", "text-embedding-3-small"}}), 404, "model");
  const json many = expect_error(post("/v1/embeddings", {{"input", std::vector<std::string>(1000, "x")}}), 400, "input");
  EXPECT_EQ(many["error"]["code"], "too_many_choices");
  const json long_text = expect_error(post("/v1/embeddings", {{"input", std::string(600000, 'a')}}), 400, "input");
  EXPECT_EQ(long_text["error"]["code"], "context_length_exceeded");
}

// Choices are counted per request before anything is tokenized: prompts x n over
// max_choices is a 400 naming the bound, whatever the queue holds.
TEST_F(ServerTest, RequestsBeyondMaxChoicesAreRefused) {
  ServerOptions o = test_options();
  o.max_choices = 8;
  HttpServer small(*engine_, o);
  const int port = small.start();
  const auto many = post("/v1/completions", {{"prompt", std::vector<std::string>(3, "Once")}, {"max_tokens", 2}, {"n", 3}},
                         port);
  ASSERT_TRUE(many);
  EXPECT_EQ(many->status, 400) << many->body;
  const json error = json::parse(many->body)["error"];
  EXPECT_EQ(error["code"], "too_many_choices");
  EXPECT_EQ(error["param"], "prompt");
  EXPECT_NE(error["message"].get<std::string>().find("asks for 9 choices"), std::string::npos) << error;
  const auto chat = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"n", 9}}, port);
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 400) << chat->body;
  // A beam search holds its width of engine requests.
  const auto beams = post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}, {"use_beam_search", true}, {"beam_width", 9}},
                          port);
  ASSERT_TRUE(beams);
  EXPECT_EQ(beams->status, 400) << beams->body;
  EXPECT_EQ(json::parse(chat->body)["error"]["param"], "n");
  const auto fits = post("/v1/completions", {{"prompt", std::vector<std::string>(2, "Once")}, {"max_tokens", 2}, {"n", 4}},
                         port);
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200) << fits->body;
  EXPECT_EQ(json::parse(fits->body)["choices"].size(), 8u);
}

TEST_F(ServerTest, FullQueueAnswers503WithRetryAfter) {
  ServerOptions o = test_options();
  o.max_queue = 1;
  HttpServer small(*engine_, o);
  const int port = small.start();
  engine_->stop();
  std::promise<void> admitted;
  auto waiting = std::async(std::launch::async, [&] {
    httplib::Request req = completions_request(json{{"prompt", "Once"}, {"max_tokens", 4}, {"stream", true}});
    req.response_handler = [&](const httplib::Response&) {
      admitted.set_value();  // headers arrive once the request is queued
      return true;
    };
    std::string body;
    req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
      body.append(d, n);
      return true;
    };
    auto r = client(port).send(req);
    return r ? body : std::string("no response");
  });
  ASSERT_EQ(admitted.get_future().wait_for(10s), std::future_status::ready);
  const auto refused = post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}}, port);
  const json e = expect_error(refused, 503);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  engine_->start();
  EXPECT_NE(waiting.get().find("[DONE]"), std::string::npos);
}

// A client that goes away mid-stream cancels its request: the KV blocks all come back.
TEST_F(ServerTest, DisconnectCancelsAndFreesKvBlocks) {
  const auto aborted_before = engine_->stats().requests_finished;
  httplib::Request req = completions_request(json{{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"ignore_eos", true}, {"stream", true}});
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };
  client().send(req);
  EXPECT_GE(chunks, 1);
  EngineStats s;
  for (int i = 0; i < 200; ++i) {
    s = engine_->stats();
    if (s.requests_finished > aborted_before && s.kv_blocks_used == 0 && s.num_running == 0) break;
    std::this_thread::sleep_for(25ms);
  }
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  const std::string metrics = client().Get("/metrics")->body;
  EXPECT_EQ(metrics.find("tessera_requests_total{finish_reason=\"abort\"} 0"), std::string::npos) << metrics;
}

// Non-streamed requests that run past the first second: one request at a time, 16 choices
// of 480 tokens each (seconds of work).
class SlowServerTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    if (IsSkipped()) return;
    Config c = test_config();
    c.scheduler.max_seqs = 1;
    engine = Engine::create(c);
    ServerOptions o = test_options();
    o.max_queue = 64;
    server = std::make_unique<HttpServer>(*engine, o);
    port = server->start();
  }
  long aborted() {
    const std::string metric = "tessera_requests_total{finish_reason=\"abort\"} ";
    const std::string m = client(port).Get("/metrics")->body;
    const size_t at = m.find(metric);
    return at == std::string::npos ? 0L : std::stol(m.substr(at + metric.size()));
  }
  static inline const json kSlow{{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"ignore_eos", true},
                                 {"n", 16}, {"temperature", 1}, {"seed", 1}};
  std::unique_ptr<Engine> engine;
  std::unique_ptr<HttpServer> server;
  int port = 0;
};

// The client leaves at the first byte (the heartbeat after a second): the next heartbeat
// fails and the choices are cancelled.
TEST_F(SlowServerTest, DisconnectCancels) {
  httplib::Request req = completions_request(kSlow);
  std::string received;
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    received.append(data, size);
    return false;  // leaves at the first heartbeat
  };
  client(port).send(req);
  EXPECT_EQ(received, " ") << "the request finished before the client left";
  EngineStats s;
  for (int i = 0; i < 400; ++i) {
    s = engine->stats();
    if (s.kv_blocks_used == 0 && s.num_running == 0 && s.num_waiting == 0) break;
    std::this_thread::sleep_for(25ms);
  }
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.num_running + s.num_waiting, 0);
  EXPECT_GT(aborted(), 0);
}

// Stopping the server ends the streams in flight properly: their requests are cancelled
// and each stream closes with its last chunk and [DONE], rather than cut off mid-body.
TEST_F(SlowServerTest, StopEndsStreamsWithDone) {
  json body = kSlow;
  body["stream"] = true;
  std::promise<void> first_event;
  auto stream = std::async(std::launch::async, [&] {
    httplib::Request req = completions_request(body);
    std::string received;
    bool signalled = false;
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      received.append(data, size);
      if (!signalled && received.find("data: {") != std::string::npos) {
        signalled = true;
        first_event.set_value();
      }
      return true;
    };
    client(port).send(req);
    return received;
  });
  ASSERT_EQ(first_event.get_future().wait_for(30s), std::future_status::ready);
  server->stop();
  const std::string received = stream.get();
  EXPECT_NE(received.find("data: [DONE]"), std::string::npos) << received.substr(received.size() > 300 ? received.size() - 300 : 0);
  EXPECT_NE(received.find(R"("finish_reason":"abort")"), std::string::npos);
  EXPECT_EQ(engine->stats().num_running + engine->stats().num_waiting, 0);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

// A slow answer arrives chunked, led by whitespace, and parses like a quick one.
TEST_F(SlowServerTest, SlowAnswerIsValidJson) {
  const auto r = post("/v1/completions", kSlow, port);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  ASSERT_EQ(j["choices"].size(), 16u);
  for (const json& c : j["choices"]) EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_EQ(aborted(), 0);
}

}  // namespace
}  // namespace tsr::server

namespace tsr::server {
namespace {

// A second server on a busy port fails at start (no SO_REUSEPORT: it would take half the
// first one's connections).
TEST_F(ServerTest, BusyPortFailsAtStart) {
  ServerOptions o = test_options();
  o.port = port_;
  HttpServer second(*engine_, o);
  try {
    second.start();
    FAIL() << "a second server bound port " << port_;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Address already in use"), std::string::npos) << e.what();
  }
  const httplib::Result health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(ServerTest, CorsForAllowedOriginsOnly) {
  ServerOptions o = test_options();
  o.cors_origins = {"https://app.example"};
  o.api_key = "k";
  HttpServer cors(*engine_, o);
  const int port = cors.start();
  httplib::Client c = client(port);
  // Preflight: answered before authentication, with the asked-for headers.
  const httplib::Result pre = c.Options("/v1/chat/completions", {{"Origin", "https://app.example"},
                                                                 {"Access-Control-Request-Method", "POST"},
                                                                 {"Access-Control-Request-Headers", "authorization, content-type"}});
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  const httplib::Result stranger = c.Options("/v1/models", {{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "GET"}});
  ASSERT_TRUE(stranger);
  EXPECT_EQ(stranger->status, 403);
  EXPECT_FALSE(stranger->has_header("Access-Control-Allow-Origin"));
  // Actual requests: the header for the allowed origin, errors included, none for others.
  const httplib::Result ok = c.Get("/v1/models", {{"Origin", "https://app.example"}, {"Authorization", "Bearer k"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(ok->get_header_value("Vary"), "Origin");
  const httplib::Result denied = c.Get("/v1/models", {{"Origin", "https://app.example"}});
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(denied->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  const httplib::Result other = c.Get("/v1/models", {{"Origin", "https://evil.example"}, {"Authorization", "Bearer k"}});
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
  // The fixture's server has no origins: no CORS headers at all.
  const httplib::Result plain = client().Get("/health", {{"Origin", "https://app.example"}});
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->has_header("Access-Control-Allow-Origin"));
}

// One info line per request: method, path, status, prompt/cached/generated tokens, ms.
// Unknown fields are accepted, as OpenAI's servers accept them, and logged once at debug
// level, their names escaped.
TEST_F(ServerTest, UnknownFieldsAreAcceptedAndLoggedOnce) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  sink->set_pattern("%l %v");
  auto logger = spdlog::default_logger();
  const auto level = logger->level();
  logger->set_level(spdlog::level::debug);
  logger->sinks().push_back(sink);
  const json body{{"prompt", "Once"}, {"max_tokens", 2}, {"user", "u1"}, {"frobnicate\nnow", true}};
  const httplib::Result first = post("/v1/completions", body);
  const httplib::Result second = post("/v1/completions", body);
  const httplib::Result embedded = post("/v1/embeddings", {{"input", "Once"}, {"frobnicate\nnow", 1}});
  const auto logged = [&] {
    std::string all;
    for (const std::string& line : sink->last_formatted()) all += line;
    return all;
  };
  // The access line of the last request comes once its response is written, perhaps just
  // after the client has read it: the sink leaves the logger only when nothing logs any more.
  for (int i = 0; i < 200 && logged().find("\"POST /v1/embeddings\"") == std::string::npos; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  logger->sinks().pop_back();
  logger->set_level(level);
  ASSERT_TRUE(first && second && embedded);
  EXPECT_EQ(first->status, 200) << first->body;
  EXPECT_EQ(second->status, 200) << second->body;
  EXPECT_EQ(embedded->status, 200) << embedded->body;
  const std::string log = logged();
  const std::string line = "/v1/completions: ignoring the unknown field \"frobnicate\\nnow\" (logged once)";
  ASSERT_NE(log.find(line), std::string::npos) << log;
  EXPECT_EQ(log.find(line, log.find(line) + 1), std::string::npos) << "logged twice: " << log;
  EXPECT_EQ(log.find("field \"user\""), std::string::npos) << "a known OpenAI field: " << log;
}

TEST_F(ServerTest, AccessLogLinePerRequest) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  sink->set_pattern("%l %v");
  const auto logged = [&] {
    std::string all;
    for (const std::string& line : sink->last_formatted()) all += line;
    return all;
  };
  auto logger = spdlog::default_logger();
  const auto level = logger->level();
  logger->set_level(spdlog::level::info);
  logger->sinks().push_back(sink);
  const json body{{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}};
  const httplib::Result r = post("/v1/completions", body);
  const httplib::Result streamed = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 3},
                                                            {"temperature", 0}, {"ignore_eos", true}, {"stream", true}});
  client().Get("/v1/nothing");
  // A line is written once its response is; the client may have read the whole of a
  // response a moment before that (a stream's line can follow the next request's).
  const auto all_logged = [&] {
    const std::string log = logged();
    return log.find("/v1/nothing") != std::string::npos && log.find("generated=3 ") != std::string::npos;
  };
  for (int i = 0; i < 200 && !all_logged(); ++i) std::this_thread::sleep_for(10ms);
  logger->sinks().pop_back();
  logger->set_level(level);
  ASSERT_TRUE(r && streamed);
  const std::string log = logged();
  const int prompt = static_cast<int>(engine_->tokenize("Once upon a time").size());
  EXPECT_TRUE(std::regex_search(log, std::regex("info 127\\.0\\.0\\.1 \"POST /v1/completions\" 200 prompt=" +
                                                std::to_string(prompt) + " cached=\\d+ generated=5 [0-9.]+ ms")))
      << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("\"POST /v1/completions\" 200 prompt=\\d+ cached=\\d+ generated=3 ")))
      << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("\"GET /v1/nothing\" 404 prompt=0 cached=0 generated=0 "))) << log;
}

}  // namespace
}  // namespace tsr::server
