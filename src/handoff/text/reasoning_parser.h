#pragma once
// Separates a thinking model's <think>…</think> from its answer (vLLM's reasoning parsers,
// llama-server's reasoning_format). DeepSeek-R1 / V3.1+ and GLM-4.5+ share the tags; the
// generation prompt decides where the output starts: a prompt ending in "<think>" (thinking on)
// puts the output in reasoning at once, otherwise an output that opens with <think> enters it.
// Fed in pieces of any size; the result never depends on where they split.
#include <string>
#include <string_view>

#include "handoff/text/tool_call_parser.h"

namespace handoff::text {

enum class ReasoningFormat { kNone, kDeepSeekR1, kGlm45 };

// Throws InputError listing the names for an unknown one.
ReasoningFormat reasoning_format_named(const std::string& name);
const char* reasoning_format_name(ReasoningFormat format);
// kDeepSeekR1 or kGlm45 when the template writes thinking tags, kNone otherwise.
ReasoningFormat detect_reasoning_format(std::string_view template_source);
// Whether a rendered prompt leaves the model inside a thinking block.
bool prompt_opens_reasoning(std::string_view prompt);

class ReasoningParser {
 public:
  explicit ReasoningParser(bool starts_in_reasoning)
      : mode_(starts_in_reasoning ? Mode::kReasoning : Mode::kStart) {}
  // Appends the reasoning to out.reasoning and the answer's text to `content`.
  void push(std::string_view text, ParsedOutput& out, std::string& content);
  void finish(ParsedOutput& out, std::string& content);

 private:
  enum class Mode { kStart, kReasoning, kAfterReasoning, kContent };
  Mode mode_;
  std::string buffer_;
};

}  // namespace handoff::text
