#include "handoff/text/chat_output_parser.h"

namespace handoff::text {

void ChatOutputParser::to_tools(std::string_view text, ParsedOutput& out) {
  if (tools_)
    tools_->push(text, out);
  else
    out.content += text;
}

ParsedOutput ChatOutputParser::push(std::string_view text) {
  ParsedOutput out;
  if (!reasoning_) {
    to_tools(text, out);
    return out;
  }
  std::string content;
  reasoning_->push(text, out, content);
  to_tools(content, out);
  return out;
}

ParsedOutput ChatOutputParser::finish() {
  ParsedOutput out;
  if (reasoning_) {
    std::string content;
    reasoning_->finish(out, content);
    to_tools(content, out);
  }
  if (tools_) tools_->finish(out);
  return out;
}

}  // namespace handoff::text
