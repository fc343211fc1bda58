#include "handoff/serve/chat_output.h"

namespace handoff::serve {

using nlohmann::json;

std::unique_ptr<ChatOutput> ChatOutput::make(const ParsedRequest& p) {
  if (p.endpoint != Endpoint::kChat) return nullptr;
  auto tools = text::make_tool_call_parser(p.tool_format, p.tools);
  std::unique_ptr<text::ReasoningParser> reasoning;
  if (p.reasoning_format != text::ReasoningFormat::kNone)
    reasoning = std::make_unique<text::ReasoningParser>(p.starts_in_reasoning);
  if (!tools && !reasoning) return nullptr;
  return std::unique_ptr<ChatOutput>(new ChatOutput(
      p, std::make_unique<text::ChatOutputParser>(std::move(reasoning), std::move(tools))));
}

ChatOutput::ChatOutput(const ParsedRequest& p, std::unique_ptr<text::ChatOutputParser> parser)
    : parser_(std::move(parser)),
      reasoning_(p.reasoning_format != text::ReasoningFormat::kNone),
      rng_(std::random_device{}()) {}

std::string ChatOutput::new_call_id() {
  // OpenAI's form: "call_" and 24 letters or digits, unique enough to pair results with calls.
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng_)];
  return id;
}

json ChatOutput::call_deltas(const text::ParsedOutput& out) {
  json deltas = json::array();
  for (const auto& d : out.calls) {
    if (!d.name.empty()) {
      // The call's first step: its id, type and name (arguments follow).
      calls_.push_back({{"id", new_call_id()},
                        {"type", "function"},
                        {"function", {{"name", d.name}, {"arguments", ""}}}});
      deltas.push_back({{"index", d.index},
                        {"id", calls_.back()["id"]},
                        {"type", "function"},
                        {"function", {{"name", d.name}, {"arguments", ""}}}});
    }
    if (d.index >= calls_.size()) continue;
    if (!d.arguments.empty()) {
      // Clients concatenate the pieces of function.arguments.
      calls_[d.index]["function"]["arguments"].get_ref<std::string&>() += d.arguments;
      deltas.push_back({{"index", d.index}, {"function", {{"arguments", d.arguments}}}});
    }
    if (d.end) {
      complete_.resize(calls_.size(), false);
      complete_[d.index] = true;
      any_complete_call_ = true;
    }
  }
  return deltas;
}

json ChatOutput::delta(const std::string& text, bool last) {
  text::ParsedOutput out = parser_->push(text);
  if (last) out.append(parser_->finish());
  json delta = json::object();
  if (!out.reasoning.empty()) delta["reasoning_content"] = out.reasoning;
  if (!out.content.empty()) delta["content"] = out.content;
  json calls = call_deltas(out);
  if (!calls.empty()) delta["tool_calls"] = std::move(calls);
  // Every token is a chunk, as without parsers (clients time tokens); the last may be empty.
  if (delta.empty() && !last) delta["content"] = "";
  return delta;
}

json ChatOutput::message(const std::string& text) {
  text::ParsedOutput out = parser_->push(text);
  out.append(parser_->finish());
  call_deltas(out);
  // Only complete calls (a cut-off call's text is in the content).
  json calls = json::array();
  for (size_t i = 0; i < calls_.size() && i < complete_.size(); ++i)
    if (complete_[i]) calls.push_back(calls_[i]);
  json message = {
      {"role", "assistant"},
      {"content", out.content.empty() && !calls.empty() ? json(nullptr) : json(out.content)}};
  if (reasoning_)
    message["reasoning_content"] = out.reasoning.empty() ? json(nullptr) : json(out.reasoning);
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  return message;
}

std::optional<std::string> ChatOutput::finish_reason(
    const std::optional<std::string>& engine_reason) const {
  if (engine_reason && *engine_reason == "stop" && any_complete_call_) return "tool_calls";
  return engine_reason;
}

ChatOutput* ChatOutputs::at(int index) {
  auto it = outputs_.find(index);
  if (it == outputs_.end()) it = outputs_.emplace(index, ChatOutput::make(p_)).first;
  return it->second.get();
}

}  // namespace handoff::serve
