#include "server/openai_format.h"

#include <atomic>
#include <random>

#include <fmt/format.h>

#include "core/chat/reasoning.h"
#include "core/tokenizer/tokenizer.h"
#include "server/tool_choice.h"

namespace tsr::server {

namespace {

using nlohmann::json;

json finish_reason_json(const ChoiceDelta& d) {
  if (!d.finished) return nullptr;
  return d.tool_calls.empty() ? json(finish_reason_name(d.finish_reason)) : json("tool_calls");
}

// A chat reply: content (null when the reply is calls alone) and its tool_calls.
json chat_message(const ChoiceDelta& c) {
  json message{{"role", "assistant"}, {"content", c.text}};
  if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
  if (!c.tool_calls.empty()) {
    if (c.text.empty()) message["content"] = nullptr;
    message["tool_calls"] = tool_calls_json(c.tool_calls, false);
  }
  return message;
}

const char* object_name(const ResponseMeta& m, bool chunk) {
  if (m.endpoint == Endpoint::CHAT) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

json envelope(const ResponseMeta& m, bool chunk) {
  return {{"id", m.id}, {"object", object_name(m, chunk)}, {"created", m.created}, {"model", m.model}};
}

std::string piece(const Tokenizer& tok, int32_t id) { return tok.token_to_piece(id, true); }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

// Legacy completions shape: parallel arrays plus text offsets.
json completion_logprobs(const std::vector<TokenLogprob>& lps, size_t& offset, const Tokenizer& tok) {
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : lps) {
    const std::string p = piece(tok, t.id);
    tokens.push_back(p);
    values.push_back(t.logprob);
    json top = json::object();
    for (const TopLogprob& a : t.top) top[piece(tok, a.id)] = a.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += p.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json chat_token(const Tokenizer& tok, int32_t id, float logprob) {
  const std::string p = piece(tok, id);
  return {{"token", p}, {"logprob", logprob}, {"bytes", bytes_of(p)}};
}

json chat_logprobs(const std::vector<TokenLogprob>& lps, const Tokenizer& tok) {
  json content = json::array();
  for (const TokenLogprob& t : lps) {
    json entry = chat_token(tok, t.id, t.logprob);
    json top = json::array();
    for (const TopLogprob& a : t.top) top.push_back(chat_token(tok, a.id, a.logprob));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", content}};
}

json logprobs_json(const ResponseMeta& m, const ChoiceDelta& d, size_t& offset, const Tokenizer& tok) {
  if (!m.logprobs) return nullptr;
  return m.endpoint == Endpoint::CHAT ? chat_logprobs(d.logprobs, tok) : completion_logprobs(d.logprobs, offset, tok);
}

}  // namespace

std::string new_response_id(Endpoint endpoint) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return fmt::format("{}-{:08x}{:08x}", endpoint == Endpoint::CHAT ? "chatcmpl" : "cmpl", uint32_t(salt),
                     uint32_t(++counter));
}

void split_reply(ChoiceDelta& c, const ResponseMeta& meta) {
  if (meta.reasoning) {
    ReasoningSplit split = split_reasoning(c.text, *meta.reasoning);
    c.reasoning = std::move(split.reasoning);
    c.text = std::move(split.content);
  }
  if (!meta.tool_format) return;
  ParsedReply reply = parse_tool_calls(*meta.tool_format, c.text);
  if (reply.calls.empty()) return;
  c.text = std::move(reply.content);
  c.tool_calls = std::move(reply.calls);
}

void accumulate(ChoiceDelta& total, ChoiceDelta&& d) {
  total.index = d.index;
  total.text += d.text;
  total.tokens.insert(total.tokens.end(), d.tokens.begin(), d.tokens.end());
  total.logprobs.insert(total.logprobs.end(), std::make_move_iterator(d.logprobs.begin()),
                        std::make_move_iterator(d.logprobs.end()));
  total.finished = d.finished;
  total.finish_reason = d.finish_reason;
  total.error = std::move(d.error);
  total.stats = d.stats;
}

json usage_json(const std::vector<RequestStats>& finals, int32_t n) {
  int64_t prompt = 0, cached = 0, completion = 0;
  for (size_t i = 0; i < finals.size(); ++i) {
    if (i % size_t(n) == 0) {
      prompt += finals[i].prompt_tokens;
      cached += finals[i].cached_tokens;
    }
    completion += finals[i].completion_tokens;
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json response_json(const ResponseMeta& m, const std::vector<ChoiceDelta>& choices, int32_t n, const Tokenizer& tok) {
  json out = envelope(m, false);
  json list = json::array();
  std::vector<RequestStats> finals;
  for (const ChoiceDelta& c : choices) {
    size_t offset = 0;
    json choice{{"index", c.index}, {"logprobs", logprobs_json(m, c, offset, tok)}, {"finish_reason", finish_reason_json(c)}};
    if (m.endpoint == Endpoint::CHAT) choice["message"] = chat_message(c);
    else choice["text"] = c.text;
    list.push_back(std::move(choice));
    finals.push_back(c.stats);
  }
  out["choices"] = std::move(list);
  out["usage"] = usage_json(finals, n);
  return out;
}

json chunk_json(const ResponseMeta& m, const ChoiceDelta& d, bool first, size_t& text_offset, const Tokenizer& tok) {
  json out = envelope(m, true);
  json choice{{"index", d.index}, {"logprobs", logprobs_json(m, d, text_offset, tok)},
              {"finish_reason", finish_reason_json(d)}};
  if (m.endpoint == Endpoint::CHAT) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (first || !d.text.empty()) delta["content"] = d.text;
    if (!d.tool_calls.empty()) delta["tool_calls"] = tool_calls_json(d.tool_calls, true);
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = d.text;
  }
  out["choices"] = json::array({std::move(choice)});
  return out;
}

json usage_chunk_json(const ResponseMeta& m, json usage) {
  json out = envelope(m, true);
  out["choices"] = json::array();
  out["usage"] = std::move(usage);
  return out;
}

}  // namespace tsr::server
