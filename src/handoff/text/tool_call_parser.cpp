#include "handoff/text/tool_call_parser.h"

#include "handoff/error.h"
#include "handoff/text/deepseek_tool_call_parser.h"
#include "handoff/text/dsml_tool_call_parser.h"
#include "handoff/text/glm_tool_call_parser.h"

namespace handoff::text {

void ParsedOutput::append(ParsedOutput&& more) {
  content += more.content;
  reasoning += more.reasoning;
  for (auto& call : more.calls) calls.push_back(std::move(call));
}

ToolCallFormat tool_call_format_named(const std::string& name) {
  if (name == "none") return ToolCallFormat::kNone;
  if (name == "deepseek_v3") return ToolCallFormat::kDeepSeekV3;
  if (name == "deepseek_v31") return ToolCallFormat::kDeepSeekV31;
  if (name == "deepseek_v32") return ToolCallFormat::kDeepSeekV32;
  if (name == "glm45") return ToolCallFormat::kGlm45;
  fail_input(
      "unknown tool-call parser '{}' (expected deepseek_v3, deepseek_v31, deepseek_v32, "
      "glm45 or none)",
      name);
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kDeepSeekV3:
      return "deepseek_v3";
    case ToolCallFormat::kDeepSeekV31:
      return "deepseek_v31";
    case ToolCallFormat::kDeepSeekV32:
      return "deepseek_v32";
    case ToolCallFormat::kGlm45:
      return "glm45";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

ToolCallFormat detect_tool_call_format(std::string_view source) {
  const auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  if (has("｜DSML｜")) return ToolCallFormat::kDeepSeekV32;
  if (has("<｜tool▁calls▁begin｜>")) {
    // V3 writes the call's type before the separator and fences the arguments.
    return has("```json") ? ToolCallFormat::kDeepSeekV3 : ToolCallFormat::kDeepSeekV31;
  }
  if (has("<tool_call>") && has("<arg_key>")) return ToolCallFormat::kGlm45;
  return ToolCallFormat::kNone;
}

std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolCallFormat format,
                                                      const nlohmann::json& tools) {
  switch (format) {
    case ToolCallFormat::kDeepSeekV3:
      return make_deepseek_tool_call_parser(false);
    case ToolCallFormat::kDeepSeekV31:
      return make_deepseek_tool_call_parser(true);
    case ToolCallFormat::kDeepSeekV32:
      return make_dsml_tool_call_parser();
    case ToolCallFormat::kGlm45:
      return make_glm_tool_call_parser(tools);
    case ToolCallFormat::kNone:
      break;
  }
  return nullptr;
}

}  // namespace handoff::text
