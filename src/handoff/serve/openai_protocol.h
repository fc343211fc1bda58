#pragma once
// The OpenAI request bodies (/v1/completions, /v1/chat/completions) parsed strictly into engine
// requests, and the response and stream-chunk bodies built from engine events.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "handoff/engine/request.h"
#include "handoff/serve/api_error.h"
#include "handoff/text/chat_template.h"
#include "handoff/text/reasoning_parser.h"
#include "handoff/text/tokenizer.h"
#include "handoff/text/tool_call_parser.h"

namespace handoff::serve {

enum class Endpoint { kCompletions, kChat };

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  engine::Request request;  // its prompt is prompts[0]; request.n choices per prompt
  // Every prompt, in order: /v1/completions takes a list of prompts (a batch), each run as its
  // own engine request; choice index = prompt index * n + choice.
  std::vector<std::vector<int32_t>> prompts;
  std::string model;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;           // chat: logprobs: true; completions: logprobs: N
  std::string system_fingerprint;  // from ProtocolContext, for every body built for it
  // Chat output parsing (see serve/chat_output.h): the tool-call format when the request's
  // tools are parsed (tools given, tool_choice not "none"), the reasoning format, and whether
  // the rendered prompt leaves the model inside a thinking block.
  text::ToolCallFormat tool_format = text::ToolCallFormat::kNone;
  nlohmann::json tools;
  text::ReasoningFormat reasoning_format = text::ReasoningFormat::kNone;
  bool starts_in_reasoning = false;
  // tool_choice "required" (every declared function) or a named function: the functions the
  // forced call may name, in declaration order. Empty: the model need not call a tool.
  std::vector<std::string> forced_tools;
};

struct ProtocolContext {
  std::string served_model;
  const text::Tokenizer* tokenizer = nullptr;  // null: prompts must be token ids
  const text::ChatTemplate* chat_template = nullptr;
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
  // Names the build and setup that answers ("system_fingerprint" of every response).
  std::string system_fingerprint;
  // serve --tool-call-parser / --reasoning-parser (default: what the chat template shows).
  text::ToolCallFormat tool_format = text::ToolCallFormat::kNone;
  text::ReasoningFormat reasoning_format = text::ReasoningFormat::kNone;
};

// Choices per prompt (n) and prompts per /v1/completions request at most.
inline constexpr int64_t kMaxChoices = 128;
inline constexpr size_t kMaxPrompts = 1024;

// Deepest nesting of arrays and objects a request body may have. Every later step (copies,
// dump, the template's values) recurses per level, so deeper bodies are refused at parse time.
inline constexpr int kMaxJsonDepth = 64;

// A request body as a JSON object. Throws ApiError 400: invalid JSON or nesting deeper than
// kMaxJsonDepth (code invalid_json), or a body that is not an object.
nlohmann::json parse_json_object(const std::string& body);

// Throws ApiError (400 bad parameter, 404 unknown model). A prompt longer than max_model_len
// tokens is refused (400 context_length_exceeded) before it is tokenised when its bytes alone
// prove it (see Tokenizer::max_bytes_per_token), and after otherwise.
ParsedRequest parse_request(Endpoint endpoint, const std::string& body, const ProtocolContext& ctx);

class ChatOutputs;

// One whole response (not streamed) from every choice's merged events (element i: choice i).
// `outputs` (chat with a tool-call or reasoning parser, else null) turns each choice's text into
// content, reasoning_content and tool_calls.
nlohmann::json make_response(const ParsedRequest& p, const std::string& id, int64_t created,
                             const std::vector<engine::RequestEvent>& choices,
                             const ProtocolContext& ctx, ChatOutputs* outputs = nullptr);
// One SSE chunk for an event (of choice event.index); `outputs` as above, fed each event in
// order.
nlohmann::json make_chunk(const ParsedRequest& p, const std::string& id, int64_t created,
                          const engine::RequestEvent& event, const ProtocolContext& ctx,
                          ChatOutputs* outputs = nullptr);
nlohmann::json make_usage_chunk(const ParsedRequest& p, const std::string& id, int64_t created,
                                int64_t prompt_tokens, int64_t completion_tokens);
// The chat role delta that opens choice `index` of a stream.
nlohmann::json make_role_chunk(const ParsedRequest& p, const std::string& id, int64_t created,
                               int index = 0);
nlohmann::json error_body(const ApiError& e);
// JSON text that survives invalid UTF-8 in token bytes (replaced by U+FFFD).
std::string to_text(const nlohmann::json& j);

}  // namespace handoff::serve
