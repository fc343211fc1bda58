#include "handoff/text/reasoning_parser.h"

#include "handoff/error.h"
#include "handoff/text/tool_call_scan.h"

namespace handoff::text {
namespace {

using tool_scan::Match;

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

}  // namespace

ReasoningFormat reasoning_format_named(const std::string& name) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "deepseek_r1") return ReasoningFormat::kDeepSeekR1;
  if (name == "glm45") return ReasoningFormat::kGlm45;
  fail_input("unknown reasoning parser '{}' (expected deepseek_r1, glm45 or none)", name);
}

const char* reasoning_format_name(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kDeepSeekR1:
      return "deepseek_r1";
    case ReasoningFormat::kGlm45:
      return "glm45";
    case ReasoningFormat::kNone:
      break;
  }
  return "none";
}

ReasoningFormat detect_reasoning_format(std::string_view source) {
  if (source.find(kOpen) == std::string_view::npos && source.find(kClose) == std::string_view::npos)
    return ReasoningFormat::kNone;
  return source.find("<|assistant|>") != std::string_view::npos ? ReasoningFormat::kGlm45
                                                                : ReasoningFormat::kDeepSeekR1;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  return tool_scan::trim(prompt).ends_with(kOpen) || prompt.ends_with(kOpen);
}

void ReasoningParser::push(std::string_view text, ParsedOutput& out, std::string& content) {
  buffer_ += text;
  while (true) {
    switch (mode_) {
      case Mode::kStart: {
        // Leading whitespace, then either <think> or the answer.
        size_t ws = 0;
        while (ws < buffer_.size() && tool_scan::is_space(buffer_[ws])) ++ws;
        const Match m = tool_scan::match_at(std::string_view(buffer_).substr(ws), kOpen);
        if (ws == buffer_.size() || m == Match::kPartial) return;
        if (m == Match::kYes) {
          buffer_.erase(0, ws + kOpen.size());
          mode_ = Mode::kReasoning;
        } else {
          mode_ = Mode::kContent;
        }
        continue;
      }
      case Mode::kReasoning: {
        const size_t at = buffer_.find(kClose);
        if (at == std::string::npos) {
          const size_t emit = buffer_.size() - tool_scan::partial_suffix(buffer_, kClose);
          out.reasoning.append(buffer_, 0, emit);
          buffer_.erase(0, emit);
          return;
        }
        out.reasoning.append(buffer_, 0, at);
        buffer_.erase(0, at + kClose.size());
        mode_ = Mode::kAfterReasoning;
        continue;
      }
      case Mode::kAfterReasoning: {
        // The answer starts after the whitespace that follows </think>.
        size_t ws = 0;
        while (ws < buffer_.size() && tool_scan::is_space(buffer_[ws])) ++ws;
        buffer_.erase(0, ws);
        if (buffer_.empty()) return;
        mode_ = Mode::kContent;
        continue;
      }
      case Mode::kContent:
        content += buffer_;
        buffer_.clear();
        return;
    }
  }
}

void ReasoningParser::finish(ParsedOutput& out, std::string& content) {
  if (mode_ == Mode::kReasoning)
    out.reasoning += buffer_;
  else if (mode_ != Mode::kAfterReasoning)
    content += buffer_;
  buffer_.clear();
}

}  // namespace handoff::text
