#include "handoff/serve/openai_protocol.h"

#include <cmath>
#include <random>
#include <set>

#include "handoff/serve/chat_output.h"
#include "handoff/serve/tool_request.h"
#include "handoff/text/tool_call_grammar.h"

namespace handoff::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param, "invalid_value");
}

double number(const json& body, const char* key, double lo, double hi, double fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  const json& v = body[key];
  if (!v.is_number()) bad(key, fmt::format("'{}' must be a number", key));
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi) || !std::isfinite(d))
    bad(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, d));
  return d;
}

int64_t integer(const json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  const json& v = body[key];
  if (!v.is_number_integer()) bad(key, fmt::format("'{}' must be an integer", key));
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi)
    bad(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, i));
  return i;
}

bool boolean(const json& body, const char* key, bool fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  if (!body[key].is_boolean()) bad(key, fmt::format("'{}' must be a boolean", key));
  return body[key].get<bool>();
}

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

std::vector<int32_t> token_list(const json& v, const char* key, int64_t vocab) {
  std::vector<int32_t> ids;
  for (const json& t : v) {
    if (!t.is_number_integer()) bad(key, fmt::format("'{}' must hold token ids (integers)", key));
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= vocab)
      bad(key, fmt::format("token id {} is outside the vocabulary of {}", id, vocab));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

[[noreturn]] void too_long(const std::string& param, const ProtocolContext& ctx,
                           const std::string& what) {
  throw ApiError(
      400,
      fmt::format("This model's maximum context length is {} tokens, but the prompt has {}",
                  ctx.max_model_len, what),
      param, "context_length_exceeded");
}

// A prompt needs room for one generated token, as the engine checks.
void check_token_count(size_t tokens, const std::string& param, const ProtocolContext& ctx) {
  if (ctx.max_model_len > 0 && static_cast<int64_t>(tokens) >= ctx.max_model_len)
    too_long(param, ctx, fmt::format("{} tokens", tokens));
}

// Refuses text whose bytes alone prove it too long, before paying to tokenise it.
void check_text_bytes(size_t bytes, const std::string& param, const ProtocolContext& ctx) {
  const size_t per_token = ctx.tokenizer->max_bytes_per_token();
  if (per_token == 0 || ctx.max_model_len <= 0) return;
  const size_t at_least = bytes / per_token + (bytes % per_token != 0);
  if (static_cast<int64_t>(at_least) >= ctx.max_model_len)
    too_long(param, ctx, fmt::format("at least {} tokens ({} bytes)", at_least, bytes));
}

std::string message_text(const json& content, size_t i) {
  const std::string param = fmt::format("messages[{}].content", i);
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "content must be a string or a list of text parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad(param, "only text content parts are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

const std::set<std::string> kCommon = {"model",
                                       "max_tokens",
                                       "temperature",
                                       "top_p",
                                       "top_k",
                                       "min_p",
                                       "seed",
                                       "presence_penalty",
                                       "frequency_penalty",
                                       "repetition_penalty",
                                       "stop",
                                       "stop_token_ids",
                                       "ignore_eos",
                                       "n",
                                       "stream",
                                       "stream_options",
                                       "user",
                                       "logprobs",
                                       "skip_special_tokens",
                                       "spaces_between_special_tokens",
                                       "add_special_tokens"};
const std::set<std::string> kCompletionsOnly = {"prompt", "echo", "best_of", "suffix"};
const std::set<std::string> kChatOnly = {
    "messages",    "max_completion_tokens", "top_logprobs",         "tools",
    "tool_choice", "response_format",       "chat_template_kwargs", "add_generation_prompt"};

}  // namespace

std::string to_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

json parse_json_object(const std::string& text) {
  // Nesting is refused while parsing: the parser keeps its own stack, so it is safe at any depth.
  const auto limit_depth = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw ApiError(400,
                     fmt::format("the request JSON nests deeper than {} levels", kMaxJsonDepth), "",
                     "invalid_json");
    return true;
  };
  json body;
  try {
    body = json::parse(text, limit_depth);
  } catch (const json::exception& e) {
    throw ApiError(400, fmt::format("the body is not valid JSON: {}", e.what()), "",
                   "invalid_json");
  }
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
  return body;
}

ParsedRequest parse_request(Endpoint endpoint, const std::string& text,
                            const ProtocolContext& ctx) {
  json body = parse_json_object(text);
  const bool chat = endpoint == Endpoint::kChat;
  for (const auto& [key, v] : body.items())
    if (!kCommon.count(key) && !(chat ? kChatOnly : kCompletionsOnly).count(key))
      throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", key), key,
                     "unknown_parameter");

  ParsedRequest p;
  p.endpoint = endpoint;
  p.system_fingerprint = ctx.system_fingerprint;
  if (body.contains("model")) {
    if (!body["model"].is_string()) bad("model", "'model' must be a string");
    p.model = body["model"].get<std::string>();
    if (p.model != ctx.served_model)
      throw ApiError(404, fmt::format("The model '{}' does not exist", p.model), "model",
                     "model_not_found");
  } else {
    p.model = ctx.served_model;
  }
  engine::Request& r = p.request;
  // The engine bounds it further by --max-num-seqs (the choices run side by side).
  r.n = static_cast<int>(integer(body, "n", 1, kMaxChoices, 1));
  engine::SamplingParams& s = r.sampling;
  s.temperature = static_cast<float>(number(body, "temperature", 0.0, 2.0, 1.0));
  s.top_p = static_cast<float>(number(body, "top_p", 0.0, 1.0, 1.0));
  if (s.top_p <= 0.0f) bad("top_p", "'top_p' must be > 0");
  const int64_t top_k = integer(body, "top_k", -1, 1 << 30, 0);
  s.top_k = top_k < 0 ? 0 : top_k;
  s.min_p = static_cast<float>(number(body, "min_p", 0.0, 1.0, 0.0));
  s.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2.0, 2.0, 0.0));
  s.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2.0, 2.0, 0.0));
  s.repetition_penalty = static_cast<float>(number(body, "repetition_penalty", 1e-3, 100.0, 1.0));
  // Without a seed every request samples differently (as OpenAI and vLLM do); with one, the
  // same request samples the same tokens.
  if (body.contains("seed") && !body["seed"].is_null())
    r.seed = static_cast<uint64_t>(integer(body, "seed", INT64_MIN, INT64_MAX, 0));
  else
    r.seed = random_seed();
  r.skip_special_tokens = boolean(body, "skip_special_tokens", true);
  r.spaces_between_special_tokens = boolean(body, "spaces_between_special_tokens", true);
  r.ignore_eos = boolean(body, "ignore_eos", false);
  p.stream = boolean(body, "stream", false);
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& so = body["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (!p.stream) bad("stream_options", "'stream_options' is only allowed with stream: true");
    p.include_usage = boolean(so, "include_usage", false);
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& st = body["stop"];
    if (st.is_string()) {
      r.stop.push_back(st.get<std::string>());
    } else if (st.is_array()) {
      for (const json& x : st) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or a list of strings");
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or a list of strings");
    }
    for (const auto& x : r.stop)
      if (x.empty()) bad("stop", "stop strings must not be empty");
    if (r.stop.size() > 16) bad("stop", "at most 16 stop strings");
  }
  const int64_t vocab = ctx.vocab_size;
  if (body.contains("stop_token_ids") && !body["stop_token_ids"].is_null()) {
    if (!body["stop_token_ids"].is_array())
      bad("stop_token_ids", "'stop_token_ids' must be a list");
    r.stop_token_ids = token_list(body["stop_token_ids"], "stop_token_ids", vocab);
  }

  if (!chat) {
    if (boolean(body, "echo", false)) bad("echo", "'echo' is not supported");
    if (integer(body, "best_of", 1, kMaxChoices, r.n) != r.n)
      bad("best_of", "only best_of = n is supported");
    if (body.contains("suffix") && !body["suffix"].is_null())
      bad("suffix", "'suffix' is not supported");
    if (body.contains("logprobs") && !body["logprobs"].is_null()) {
      r.top_logprobs = static_cast<int>(integer(body, "logprobs", 0, 20, 0));
      p.logprobs = true;
    }
    r.max_tokens = integer(body, "max_tokens", 1, INT32_MAX, 16);
    if (!body.contains("prompt"))
      throw ApiError(400, "'prompt' is required", "prompt", "missing_required_parameter");
    // One prompt (text or token ids), or a batch: a list of texts or of token-id lists.
    const json& prompt = body["prompt"];
    const bool batch =
        prompt.is_array() && !prompt.empty() && (prompt[0].is_string() || prompt[0].is_array());
    if (batch && prompt.size() > kMaxPrompts)
      bad("prompt", fmt::format("at most {} prompts per request", kMaxPrompts));
    const size_t count = batch ? prompt.size() : 1;
    const bool add_special_tokens = boolean(body, "add_special_tokens", true);
    for (size_t i = 0; i < count; ++i) {
      const json& one = batch ? prompt[i] : prompt;
      const std::string param = batch ? fmt::format("prompt[{}]", i) : "prompt";
      std::vector<int32_t> ids;
      if (one.is_string()) {
        if (ctx.tokenizer == nullptr) bad(param, "this model has no tokenizer: send token ids");
        const auto& text = one.get_ref<const std::string&>();
        check_text_bytes(text.size(), param, ctx);
        ids = ctx.tokenizer->encode(text, add_special_tokens);
        check_token_count(ids.size(), param, ctx);
      } else if (one.is_array() && !one.empty() && one[0].is_number()) {
        check_token_count(one.size(), param, ctx);
        ids = token_list(one, param.c_str(), vocab);
      } else {
        bad(param, batch ? "each prompt of a list must be a string or a list of token ids"
                         : "'prompt' must be a string, a list of token ids, or a list of those");
      }
      if (ids.empty()) bad(param, "the prompt is empty");
      p.prompts.push_back(std::move(ids));
    }
    r.prompt = p.prompts[0];
  } else {
    if (body.contains("logprobs")) p.logprobs = boolean(body, "logprobs", false);
    if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
      if (!p.logprobs) bad("top_logprobs", "'top_logprobs' needs logprobs: true");
      r.top_logprobs = static_cast<int>(integer(body, "top_logprobs", 0, 20, 0));
    } else if (p.logprobs) {
      r.top_logprobs = 0;
    }
    if (body.contains("response_format") && !body["response_format"].is_null()) {
      const json& rf = body["response_format"];
      if (!rf.is_object() || rf.value("type", "") != "text")
        bad("response_format", "only response_format {\"type\": \"text\"} is supported");
    }
    if (ctx.tokenizer == nullptr || ctx.chat_template == nullptr)
      throw ApiError(400, "this model has no tokenizer or chat template", "messages");
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
      throw ApiError(400, "'messages' must be a non-empty list", "messages");
    text::ChatRequest chat_req;
    chat_req.add_generation_prompt = boolean(body, "add_generation_prompt", true);
    static const std::set<std::string> kRoles = {"system", "user", "assistant", "tool",
                                                 "developer"};
    for (size_t i = 0; i < body["messages"].size(); ++i) {
      const json& m = body["messages"][i];
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          !kRoles.count(m["role"].get<std::string>()))
        bad(fmt::format("messages[{}].role", i),
            "each message needs a role: system, user, assistant, tool or developer");
      check_message_tool_fields(m, i);
      nlohmann::ordered_json om(m);  // a direct copy (depth already bounded by the parse)
      // OpenAI's newer name for system instructions; templates only know "system".
      if (om["role"] == "developer") om["role"] = "system";
      // An assistant message that only calls tools keeps its null content: templates test
      // for it (DeepSeek-V3's `content is none`).
      const json content = m.value("content", json(nullptr));
      if (!(content.is_null() && om.contains("tool_calls") && !om["tool_calls"].is_null()))
        om["content"] = message_text(content, i);
      else
        om["content"] = nullptr;
      chat_req.messages.push_back(std::move(om));
    }
    // The tools and template kwargs keep the client's key order (templates serialise them with
    // tojson, and models saw their definitions as written): parse those parts again, ordered.
    nlohmann::ordered_json ordered;
    if (body.contains("tools") || body.contains("chat_template_kwargs"))
      ordered = nlohmann::ordered_json::parse(text);
    parse_tools_and_kwargs(body, ordered, ctx, p, chat_req);
    if (p.tool_format != text::ToolCallFormat::kNone ||
        p.reasoning_format != text::ReasoningFormat::kNone) {
      // The parsers read the markers, which a tokenizer may mark special (as vLLM's parsers,
      // they override skip_special_tokens); they are not shown: the parsers take them out.
      r.skip_special_tokens = false;
      r.spaces_between_special_tokens = false;
    }
    std::string rendered;
    try {
      rendered = ctx.chat_template->render(chat_req);
    } catch (const InputError& e) {
      bad("messages", fmt::format("the chat template failed: {}", e.what()));
    }
    p.starts_in_reasoning = text::prompt_opens_reasoning(rendered);
    if (!p.forced_tools.empty()) {
      // Enforced by constrained decoding: the output is one call in the template's format (a
      // thinking block the prompt opened is closed first, so the call is in the answer).
      const bool close_thinking =
          p.starts_in_reasoning && p.reasoning_format != text::ReasoningFormat::kNone;
      try {
        r.tool_call_grammar = text::ToolCallGrammar::make(
            p.tool_format, p.forced_tools, close_thinking ? "</think>" : "", ctx.tokenizer);
      } catch (const InputError& e) {
        bad("tool_choice", e.what());
      }
    }
    // The template writes the BOS itself (add_special_tokens adds the tokenizer's as well).
    check_text_bytes(rendered.size(), "messages", ctx);
    r.prompt = ctx.tokenizer->encode(rendered, boolean(body, "add_special_tokens", false));
    check_token_count(r.prompt.size(), "messages", ctx);
    p.prompts = {r.prompt};
    const int64_t fallback =
        std::max<int64_t>(1, ctx.max_model_len - static_cast<int64_t>(r.prompt.size()));
    r.max_tokens = integer(body, "max_completion_tokens", 1, INT32_MAX,
                           integer(body, "max_tokens", 1, INT32_MAX, fallback));
  }
  if (r.prompt.empty()) bad("prompt", "the prompt is empty");
  return p;
}

namespace {

std::string token_text(const ProtocolContext& ctx, int32_t id) {
  return ctx.tokenizer != nullptr ? ctx.tokenizer->token_bytes(id) : fmt::format("<{}>", id);
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

json logprobs_json(const ParsedRequest& p, const std::vector<engine::TokenLogprob>& lps,
                   const ProtocolContext& ctx) {
  if (!p.logprobs) return nullptr;
  if (p.endpoint == Endpoint::kChat) {
    json content = json::array();
    for (const auto& lp : lps) {
      const std::string t = token_text(ctx, lp.token);
      json top = json::array();
      for (const auto& x : lp.top) {
        const std::string tt = token_text(ctx, x.token);
        top.push_back({{"token", tt}, {"logprob", x.logprob}, {"bytes", bytes_of(tt)}});
      }
      content.push_back(
          {{"token", t}, {"logprob", lp.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  int64_t offset = 0;
  for (const auto& lp : lps) {
    const std::string t = token_text(ctx, lp.token);
    tokens.push_back(t);
    token_logprobs.push_back(lp.logprob);
    json m = json::object();
    for (const auto& x : lp.top) m[token_text(ctx, x.token)] = x.logprob;
    top.push_back(m);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.size());
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

json usage(int64_t prompt, int64_t completion) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

json finish_json(const std::optional<std::string>& reason) {
  if (!reason) return nullptr;
  return *reason == "abort" ? json("abort") : json(*reason);
}

}  // namespace

nlohmann::json make_response(const ParsedRequest& p, const std::string& id, int64_t created,
                             const std::vector<engine::RequestEvent>& choices,
                             const ProtocolContext& ctx, ChatOutputs* outputs) {
  const bool chat = p.endpoint == Endpoint::kChat;
  json list = json::array();
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (const engine::RequestEvent& all : choices) {
    ChatOutput* output = outputs != nullptr ? outputs->at(all.index) : nullptr;
    // The message first: parsing it decides the finish reason ("tool_calls").
    json message = chat && output != nullptr ? output->message(all.text)
                                             : json{{"role", "assistant"}, {"content", all.text}};
    json choice = {
        {"index", all.index},
        {"logprobs", logprobs_json(p, all.logprobs, ctx)},
        {"finish_reason", finish_json(output != nullptr ? output->finish_reason(all.finish_reason)
                                                        : all.finish_reason)}};
    if (chat)
      choice["message"] = std::move(message);
    else
      choice["text"] = all.text;
    list.push_back(std::move(choice));
    // A prompt counts once however many choices it has.
    if (all.index % std::max(1, p.request.n) == 0) prompt_tokens += all.prompt_tokens;
    completion_tokens += all.completion_tokens;
  }
  return {{"id", id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", p.model},
          {"system_fingerprint", p.system_fingerprint},
          {"choices", list},
          {"usage", usage(prompt_tokens, completion_tokens)}};
}

nlohmann::json make_chunk(const ParsedRequest& p, const std::string& id, int64_t created,
                          const engine::RequestEvent& e, const ProtocolContext& ctx,
                          ChatOutputs* outputs) {
  const bool chat = p.endpoint == Endpoint::kChat;
  ChatOutput* output = outputs != nullptr ? outputs->at(e.index) : nullptr;
  // The parsers see the text before the finish reason is decided (their last calls count).
  json delta = output != nullptr ? output->delta(e.text, e.finish_reason.has_value())
               : e.text.empty() && e.finish_reason ? json::object()
                                                   : json{{"content", e.text}};
  json choice = {
      {"index", e.index},
      {"logprobs", logprobs_json(p, e.logprobs, ctx)},
      {"finish_reason",
       finish_json(output != nullptr ? output->finish_reason(e.finish_reason) : e.finish_reason)}};
  if (chat)
    choice["delta"] = std::move(delta);
  else
    choice["text"] = e.text;
  json chunk = {{"id", id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", p.model},
                {"system_fingerprint", p.system_fingerprint},
                {"choices", json::array({choice})}};
  if (p.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

nlohmann::json make_role_chunk(const ParsedRequest& p, const std::string& id, int64_t created,
                               int index) {
  json chunk = {{"id", id},
                {"object", "chat.completion.chunk"},
                {"created", created},
                {"model", p.model},
                {"system_fingerprint", p.system_fingerprint},
                {"choices", json::array({{{"index", index},
                                          {"delta", {{"role", "assistant"}, {"content", ""}}},
                                          {"logprobs", nullptr},
                                          {"finish_reason", nullptr}}})}};
  if (p.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

nlohmann::json make_usage_chunk(const ParsedRequest& p, const std::string& id, int64_t created,
                                int64_t prompt_tokens, int64_t completion_tokens) {
  const bool chat = p.endpoint == Endpoint::kChat;
  return {{"id", id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", p.model},
          {"system_fingerprint", p.system_fingerprint},
          {"choices", json::array()},
          {"usage", usage(prompt_tokens, completion_tokens)}};
}

}  // namespace handoff::serve
