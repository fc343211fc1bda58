#pragma once
// One chat request's output through its reasoning and tool-call parsers, as OpenAI message
// fields: content, reasoning_content, tool_calls (each call with an id, type "function", name
// and arguments as a JSON string), streamed as delta fields; finish_reason "tool_calls" when
// the model stopped after calling tools.
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "handoff/serve/openai_protocol.h"
#include "handoff/text/chat_output_parser.h"

namespace handoff::serve {

class ChatOutput {
 public:
  // Null when the request has neither parser (its text is content as it is).
  static std::unique_ptr<ChatOutput> make(const ParsedRequest& p);

  // The delta object for one streamed event's text; `last` ends the output (what the parsers
  // held back comes out).
  nlohmann::json delta(const std::string& text, bool last);
  // The assistant message for the whole text.
  nlohmann::json message(const std::string& text);
  // "tool_calls" for a stop after at least one complete call, the engine's reason otherwise.
  std::optional<std::string> finish_reason(const std::optional<std::string>& engine_reason) const;

 private:
  ChatOutput(const ParsedRequest& p, std::unique_ptr<text::ChatOutputParser> parser);
  // Adds the parsed piece's call steps to `calls` (delta form) and remembers the calls.
  nlohmann::json call_deltas(const text::ParsedOutput& out);
  std::string new_call_id();

  std::unique_ptr<text::ChatOutputParser> parser_;
  bool reasoning_ = false;
  std::vector<nlohmann::json> calls_;  // message form, in order, arguments as far as streamed
  std::vector<bool> complete_;         // per call: its last delta came
  bool any_complete_call_ = false;
  std::mt19937_64 rng_;
};

// One ChatOutput per choice (with n > 1 each has its own parsers and call ids), made on first
// use.
class ChatOutputs {
 public:
  // `p` must outlive this.
  explicit ChatOutputs(const ParsedRequest& p) : p_(p) {}
  // Null when the request has neither parser.
  ChatOutput* at(int index);

 private:
  const ParsedRequest& p_;
  std::map<int, std::unique_ptr<ChatOutput>> outputs_;
};

}  // namespace handoff::serve
