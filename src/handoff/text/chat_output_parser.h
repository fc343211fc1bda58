#pragma once
// A chat response's text run through the reasoning parser, then the tool-call parser (tool
// calls inside the reasoning are part of the reasoning).
#include <memory>
#include <string_view>

#include "handoff/text/reasoning_parser.h"
#include "handoff/text/tool_call_parser.h"

namespace handoff::text {

class ChatOutputParser {
 public:
  // Either may be null (that parser is off).
  ChatOutputParser(std::unique_ptr<ReasoningParser> reasoning,
                   std::unique_ptr<ToolCallParser> tools)
      : reasoning_(std::move(reasoning)), tools_(std::move(tools)) {}

  ParsedOutput push(std::string_view text);
  ParsedOutput finish();

 private:
  void to_tools(std::string_view text, ParsedOutput& out);

  std::unique_ptr<ReasoningParser> reasoning_;
  std::unique_ptr<ToolCallParser> tools_;
};

}  // namespace handoff::text
