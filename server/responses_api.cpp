#include "server/responses_api.h"

#include "server/http_message.h"

#include <atomic>
#include <chrono>
#include <random>

#include <fmt/format.h>

#include "core/chat/reasoning.h"
#include "core/engine/engine.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/tool_choice.h"

namespace tsr::server {

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kPollInterval = 250ms;  // how often a waiting handler checks for shutdown
constexpr auto kKeepAlive = 1s;        // a stream's comment while it waits: a departed client is noticed

std::string new_id(std::string_view prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return fmt::format("{}{:08x}{:016x}", prefix, uint32_t(salt), ++counter);
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A message's text: a string, or input_text / output_text parts (images are refused).
std::string content_text(const json& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_param("input", at + ".content must be a string or an array of parts");
  std::string text;
  for (const json& part : content) {
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if ((type != "input_text" && type != "output_text" && type != "text") || !part.contains("text") ||
        !part["text"].is_string()) {
      throw bad_param("input", at + ": only text parts (input_text, output_text) are supported");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// A function call joins the assistant turn just before it (parallel calls), or opens one.
void add_function_call(json& messages, const json& item, const std::string& at) {
  for (const char* key : {"call_id", "name", "arguments"}) {
    if (!item.contains(key) || !item[key].is_string()) throw bad_param("input", at + " needs a string '" + key + "'");
  }
  const json call{{"id", item["call_id"]}, {"type", "function"},
                  {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
  if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls")) {
    messages.back()["tool_calls"].push_back(call);
  } else {
    messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}});
  }
}

// `input` (a string, or message, function_call and function_call_output items) as chat
// messages. Reasoning items are the model's own earlier thoughts, which chat templates
// leave out of later turns; they are passed over.
json input_messages(const json& input) {
  if (input.is_string()) return json::array({{{"role", "user"}, {"content", input}}});
  if (!input.is_array() || input.empty()) throw bad_param("input", "'input' must be a string or a non-empty array of items");
  json messages = json::array();
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string at = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) throw bad_param("input", at + " must be an object");
    const std::string type = item.value("type", "message");
    if (type == "message") {
      const std::string role = item.value("role", "");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
        throw bad_param("input", at + " has role '" + role.substr(0, 64) + "' (user, assistant, system or developer)");
      }
      messages.push_back({{"role", role}, {"content", content_text(item.value("content", json("")), at)}});
    } else if (type == "function_call") {
      add_function_call(messages, item, at);
    } else if (type == "function_call_output") {
      if (!item.contains("call_id") || !item["call_id"].is_string()) throw bad_param("input", at + " needs a 'call_id'");
      const json& output = item.value("output", json(""));
      messages.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]},
                          {"content", output.is_string() ? output.get<std::string>() : output.dump()}});
    } else if (type != "reasoning") {
      throw bad_param("input", at + " has type '" + type.substr(0, 64) + "' (message, function_call, "
                                    "function_call_output or reasoning)");
    }
  }
  return messages;
}

// Responses' flat function tools ({type, name, description, parameters}) as chat's.
json chat_tools(const json& tools) {
  if (!tools.is_array()) throw bad_param("tools", "'tools' must be an array");
  json out = json::array();
  for (const json& t : tools) {
    if (!t.is_object() || t.value("type", "") != "function") {
      throw unsupported_param("tools", "tools other than functions (built-in tools such as web_search)");
    }
    json fn{{"name", t.value("name", json())}};
    for (const char* key : {"description", "parameters"}) {
      if (t.contains(key)) fn[key] = t[key];
    }
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

json chat_tool_choice(const json& choice) {
  if (choice.is_object() && choice.value("type", "") == "function") {
    return {{"type", "function"}, {"function", {{"name", choice.value("name", json())}}}};
  }
  return choice;
}

// text.format: text, json_object or json_schema ({name, schema, strict}).
std::optional<json> response_format(const json& body) {
  const json* text = field(body, "text");
  const json* format = text && text->is_object() ? field(*text, "format") : nullptr;
  if (!format) return std::nullopt;
  if (!format->is_object()) throw bad_param("text", "'text.format' must be an object");
  const std::string type = format->value("type", "");
  if (type == "text" || type == "json_object") return json{{"type", type}};
  if (type != "json_schema") throw bad_param("text", "'text.format.type' must be text, json_object or json_schema");
  if (!format->contains("schema")) throw bad_param("text", "'text.format.schema' is required");
  return json{{"type", "json_schema"}, {"json_schema", {{"name", format->value("name", "response")}, {"schema", (*format)["schema"]}}}};
}

// The request as a chat-completions request after `history` (a stored conversation).
json chat_body(const json& body, const json& history) {
  json messages = json::array();
  if (auto instructions = get_string(body, "instructions")) messages.push_back({{"role", "system"}, {"content", *instructions}});
  for (const json& m : history) messages.push_back(m);
  const json* input = field(body, "input");
  if (!input) throw bad_param("input", "'input' is required");
  for (json& m : input_messages(*input)) messages.push_back(std::move(m));
  json chat{{"messages", std::move(messages)}};
  for (const auto& [from, to] : std::initializer_list<std::pair<const char*, const char*>>{
           {"model", "model"}, {"max_output_tokens", "max_tokens"}, {"temperature", "temperature"}, {"top_p", "top_p"},
           {"parallel_tool_calls", "parallel_tool_calls"}, {"stream", "stream"}, {"seed", "seed"}, {"user", "user"}}) {
    if (const json* v = field(body, from)) chat[to] = *v;
  }
  if (const json* tools = field(body, "tools")) chat["tools"] = chat_tools(*tools);
  if (const json* choice = field(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*choice);
  if (auto format = response_format(body)) chat["response_format"] = std::move(*format);
  const json* reasoning = field(body, "reasoning");
  if (reasoning && reasoning->is_object() && reasoning->contains("effort") && !(*reasoning)["effort"].is_null()) {
    chat["reasoning_effort"] = (*reasoning)["effort"];
  }
  return chat;
}

// One reply's output items and the assistant turn they add to the conversation.
struct Output {
  json items = json::array();
  json message;  // chat's assistant message, for the store
};

json message_item(const std::string& text) {
  return {{"type", "message"}, {"id", new_id("msg_")}, {"status", "completed"}, {"role", "assistant"},
          {"content", json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}})}};
}

json reasoning_item(const std::string& text) {
  return {{"type", "reasoning"}, {"id", new_id("rs_")}, {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

Output output_of(const ChoiceDelta& c) {
  Output out;
  out.message = {{"role", "assistant"}, {"content", c.text}};
  if (!c.reasoning.empty()) out.items.push_back(reasoning_item(c.reasoning));
  if (!c.text.empty() || c.tool_calls.empty()) out.items.push_back(message_item(c.text));
  if (c.tool_calls.empty()) return out;
  json calls = json::array();
  for (const ToolCall& call : c.tool_calls) {
    const std::string call_id = new_id("call_");
    out.items.push_back({{"type", "function_call"}, {"id", new_id("fc_")}, {"call_id", call_id}, {"name", call.name},
                         {"arguments", call.arguments}, {"status", "completed"}});
    calls.push_back({{"id", call_id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  out.message["tool_calls"] = std::move(calls);
  return out;
}

// What every response object carries besides its output.
struct ResponseHead {
  std::string id;
  int64_t created;
  std::string model;
  json request;  // the parameters echoed back
  bool store;
};

json response_object(const ResponseHead& h, const std::string& status, json output, const json& usage,
                     tsr_finish_reason finish) {
  const json& r = h.request;
  json out{{"id", h.id}, {"object", "response"}, {"created_at", h.created}, {"status", status}, {"model", h.model},
           {"output", std::move(output)}, {"error", nullptr},
           {"incomplete_details", finish == TSR_FINISH_LENGTH ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
           {"instructions", r.value("instructions", json())}, {"max_output_tokens", r.value("max_output_tokens", json())},
           {"previous_response_id", r.value("previous_response_id", json())},
           {"parallel_tool_calls", r.value("parallel_tool_calls", true)}, {"temperature", r.value("temperature", json())},
           {"top_p", r.value("top_p", json())}, {"tool_choice", r.value("tool_choice", json("auto"))},
           {"tools", r.value("tools", json::array())}, {"text", r.value("text", json{{"format", {{"type", "text"}}}})},
           {"store", h.store}, {"metadata", r.value("metadata", json::object())}, {"usage", usage}};
  return out;
}

json usage_of(const RequestStats& s) {
  return {{"input_tokens", s.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", s.cached_tokens}}},
          {"output_tokens", s.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", s.prompt_tokens + s.completion_tokens}};
}

// max_tokens: incomplete; a shutdown's cancel: cancelled.
std::string status_of(tsr_finish_reason reason) {
  return reason == TSR_FINISH_LENGTH ? "incomplete" : reason == TSR_FINISH_ABORT ? "cancelled" : "completed";
}

void check_finish(const ChoiceDelta& c) {
  if (c.finish_reason == TSR_FINISH_ERROR) throw ApiError(500, "generation failed: " + c.error, "server_error");
  if (c.finish_reason == TSR_FINISH_ABORT) throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
}

// The reply of a non-streamed response, whole and split as its meta says.
ChoiceDelta wait_reply(const ApiContext& ctx, StartedChat& chat) {
  ChoiceDelta total;
  while (!chat.job->done()) {
    if (ctx.stopping) chat.job->cancel();
    for (ChoiceDelta& d : chat.job->next(kPollInterval)) accumulate(total, std::move(d));
  }
  check_finish(total);
  split_reply(total, chat.meta);
  return total;
}

// The streaming events of one response, as the official clients consume them: created,
// in_progress, then each output item added, its deltas and done, then completed (with
// the whole response). Reasoning and text stream as they come; calls come whole at the
// end, once their syntax has been parsed.
class ResponseEvents {
 public:
  ResponseEvents(StartedChat chat, ResponseHead head, json conversation, ResponseStore& store,
                 const std::atomic<bool>& stopping)
      : job_(std::move(chat.job)), meta_(std::move(chat.meta)), head_(std::move(head)),
        conversation_(std::move(conversation)), store_(store), stopping_(stopping) {
    if (meta_.reasoning) reasoning_.emplace(*meta_.reasoning);
    if (meta_.tool_format) tools_.emplace(*meta_.tool_format);
  }

  bool pump(DataSink& sink) {
    if (!started_) {
      started_ = true;
      json r = response_object(head_, "in_progress", json::array(), nullptr, TSR_FINISH_NONE);
      if (!emit(sink, {{"type", "response.created"}, {"response", r}})) return fail();
      if (!emit(sink, {{"type", "response.in_progress"}, {"response", r}})) return fail();
    }
    if (stopping_) job_->cancel();
    std::vector<ChoiceDelta> deltas = job_->next(kKeepAlive);
    for (ChoiceDelta& d : deltas) {
      if (!on_delta(sink, d)) return fail();
    }
    if (deltas.empty() && !sink.write(": keep-alive\n\n", 14)) return fail();
    return true;
  }

  void cancel() { job_->cancel(); }

 private:
  bool fail() {
    job_->cancel();
    return false;
  }

  bool emit(DataSink& sink, json event) {
    event["sequence_number"] = sequence_++;
    const std::string text = "event: " + event["type"].get<std::string>() + "\ndata: " + dump(event) + "\n\n";
    return sink.write(text.data(), text.size());
  }

  bool on_delta(DataSink& sink, ChoiceDelta& d) {
    if (d.finish_reason == TSR_FINISH_ERROR) {
      return emit(sink, {{"type", "error"}, {"code", "server_error"}, {"message", "generation failed: " + d.error}}) &&
             (sink.done(), true);
    }
    stats_ = d.stats;
    ReasoningSplit split{"", d.text};
    if (reasoning_) split = reasoning_->push(d.text);
    if (d.finished && reasoning_) {
      ReasoningSplit rest = reasoning_->finish();
      split.reasoning += rest.reasoning;
      split.content += rest.content;
    }
    std::string text = tools_ ? tools_->push(split.content) : split.content;
    ParsedReply tail;
    if (d.finished && tools_) {
      tail = tools_->finish();
      text += tail.content;
    }
    if (!split.reasoning.empty() && !reasoning_delta(sink, split.reasoning)) return false;
    if (!text.empty() && !text_delta(sink, text)) return false;
    if (!d.finished) return true;
    return finish(sink, d, std::move(tail.calls));
  }

  bool reasoning_delta(DataSink& sink, const std::string& delta) {
    if (!reasoning_item_) {
      reasoning_item_ = reasoning_item("");
      reasoning_item_->erase("content");
      reasoning_index_ = next_index_++;
      if (!emit(sink, {{"type", "response.output_item.added"}, {"output_index", reasoning_index_}, {"item", *reasoning_item_}})) {
        return false;
      }
    }
    reasoning_text_ += delta;
    return emit(sink, {{"type", "response.reasoning_text.delta"}, {"item_id", (*reasoning_item_)["id"]},
                       {"output_index", reasoning_index_}, {"content_index", 0}, {"delta", delta}});
  }

  bool text_delta(DataSink& sink, const std::string& delta) {
    if (!close_reasoning(sink)) return false;
    if (!message_item_) {
      message_item_ = message_item("");
      (*message_item_)["status"] = "in_progress";
      (*message_item_)["content"] = json::array();
      message_index_ = next_index_++;
      const json part{{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}};
      if (!emit(sink, {{"type", "response.output_item.added"}, {"output_index", message_index_}, {"item", *message_item_}}) ||
          !emit(sink, {{"type", "response.content_part.added"}, {"item_id", (*message_item_)["id"]},
                       {"output_index", message_index_}, {"content_index", 0}, {"part", part}})) {
        return false;
      }
    }
    text_ += delta;
    return emit(sink, {{"type", "response.output_text.delta"}, {"item_id", (*message_item_)["id"]},
                       {"output_index", message_index_}, {"content_index", 0}, {"delta", delta}});
  }

  bool close_reasoning(DataSink& sink) {
    if (!reasoning_item_ || reasoning_closed_) return true;
    reasoning_closed_ = true;
    json item = *reasoning_item_;
    item["content"] = json::array({{{"type", "reasoning_text"}, {"text", reasoning_text_}}});
    output_.push_back(item);
    return emit(sink, {{"type", "response.reasoning_text.done"}, {"item_id", item["id"]}, {"output_index", reasoning_index_},
                       {"content_index", 0}, {"text", reasoning_text_}}) &&
           emit(sink, {{"type", "response.output_item.done"}, {"output_index", reasoning_index_}, {"item", item}});
  }

  bool close_message(DataSink& sink) {
    if (!message_item_) return true;
    json item = *message_item_;
    const json part{{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}};
    item["status"] = "completed";
    item["content"] = json::array({part});
    output_.push_back(item);
    return emit(sink, {{"type", "response.output_text.done"}, {"item_id", item["id"]}, {"output_index", message_index_},
                       {"content_index", 0}, {"text", text_}}) &&
           emit(sink, {{"type", "response.content_part.done"}, {"item_id", item["id"]}, {"output_index", message_index_},
                       {"content_index", 0}, {"part", part}}) &&
           emit(sink, {{"type", "response.output_item.done"}, {"output_index", message_index_}, {"item", item}});
  }

  bool finish(DataSink& sink, const ChoiceDelta& last, std::vector<ToolCall> calls) {
    if (calls.empty() && !message_item_ && !text_delta(sink, "")) return false;  // an empty answer is a message too
    if (!close_reasoning(sink) || !close_message(sink)) return false;
    ChoiceDelta whole;
    whole.text = text_;
    whole.tool_calls = std::move(calls);
    Output out = output_of(whole);
    for (json& item : out.items) {
      if (item["type"] != "function_call") continue;
      const int32_t index = next_index_++;
      json added = item;
      added["arguments"] = "";
      added["status"] = "in_progress";
      if (!emit(sink, {{"type", "response.output_item.added"}, {"output_index", index}, {"item", added}}) ||
          !emit(sink, {{"type", "response.function_call_arguments.delta"}, {"item_id", item["id"]}, {"output_index", index},
                       {"delta", item["arguments"]}}) ||
          !emit(sink, {{"type", "response.function_call_arguments.done"}, {"item_id", item["id"]}, {"output_index", index},
                       {"arguments", item["arguments"]}}) ||
          !emit(sink, {{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}})) {
        return false;
      }
      output_.push_back(item);
    }
    conversation_.push_back(out.message);
    if (head_.store) store_.put(head_.id, conversation_);
    const std::string status = status_of(last.finish_reason);
    json r = response_object(head_, status, output_, usage_of(stats_), last.finish_reason);
    if (!emit(sink, {{"type", "response." + status}, {"response", r}})) return false;
    sink.done();
    return true;
  }

  std::shared_ptr<GenerationJob> job_;
  ResponseMeta meta_;
  ResponseHead head_;
  json conversation_;
  ResponseStore& store_;
  const std::atomic<bool>& stopping_;
  std::optional<ReasoningStream> reasoning_;
  std::optional<ToolReplyStream> tools_;
  bool started_ = false, reasoning_closed_ = false;
  int64_t sequence_ = 0;
  int32_t next_index_ = 0, reasoning_index_ = 0, message_index_ = 0;
  std::optional<json> reasoning_item_, message_item_;
  std::string reasoning_text_, text_;
  json output_ = json::array();
  RequestStats stats_;
};

}  // namespace

void handle_responses(const ApiContext& ctx, ResponseStore& store, const HttpRequest& req, HttpResponse& res) {
  const json body = parse_body(req);
  log_unknown_fields(body,
                     {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "tools",
                      "tool_choice", "parallel_tool_calls", "text", "reasoning", "stream", "store",
                      "previous_response_id", "metadata", "user", "seed", "truncation", "service_tier", "include"},
                     "/v1/responses");
  json history = json::array();
  if (auto previous = get_string(body, "previous_response_id")) {
    std::optional<json> stored = store.get(*previous);
    if (!stored) {
      throw ApiError(404, "the response '" + previous->substr(0, 64) + "' is not stored (unknown, expired, or created with store: false)",
                     "invalid_request_error", "previous_response_id", "previous_response_not_found");
    }
    history = std::move(*stored);
  }
  json chat = chat_body(body, history);
  json conversation = chat["messages"];
  if (get_string(body, "instructions")) conversation.erase(conversation.begin());  // they do not carry over
  StartedChat started = start_chat(ctx, chat);
  auto in_flight = in_flight_token(ctx);
  ResponseHead head{new_id("resp_"), unix_now(), ctx.model_id, body, get_bool(body, "store").value_or(true)};
  if (started.stream) {
    auto events = std::make_shared<ResponseEvents>(std::move(started), std::move(head), std::move(conversation), store,
                                                   ctx.stopping);
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream", [events](DataSink& sink) { return events->pump(sink); },
        [events, in_flight](bool success) {
          if (!success) events->cancel();
        });
    return;
  }
  const ChoiceDelta reply = wait_reply(ctx, started);
  Output out = output_of(reply);
  conversation.push_back(out.message);
  if (head.store) store.put(head.id, conversation);
  res.set_content(dump(response_object(head, status_of(reply.finish_reason), std::move(out.items), usage_of(reply.stats), reply.finish_reason)),
                  "application/json");
}

}  // namespace tsr::server
