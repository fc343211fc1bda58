#pragma once
// Streaming parsers that turn a model's tool-call text into OpenAI tool calls, one per model
// family's format (the names are vLLM's --tool-call-parser names):
//   deepseek_v3
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   deepseek_v31
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   deepseek_v32  <｜DSML｜function_calls> <｜DSML｜invoke name="NAME"> <｜DSML｜parameter name="K"
//   string="true|false">V</｜DSML｜parameter> ... (DSML) glm45         <tool_call>NAME
//   <arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>
// Text is fed in pieces of any size; the result never depends on where the pieces split.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace handoff::text {

// One step of a streamed tool call. A call's first delta carries its name, as soon as the name
// is complete; its arguments (JSON object text) follow in pieces as the model writes them, which
// concatenated are the call's whole arguments; its last delta has `end` set.
struct ToolCallDelta {
  size_t index = 0;       // the call's position in the response, from 0
  std::string name;       // non-empty on the call's first delta only
  std::string arguments;  // the next piece of the arguments (may be empty)
  bool end = false;       // the call is complete (a call cut short never ends)
};

// What a piece of model output became: text for the user, reasoning, tool-call steps.
struct ParsedOutput {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> calls;
  bool empty() const { return content.empty() && reasoning.empty() && calls.empty(); }
  void append(ParsedOutput&& more);
};

class ToolCallParser {
 public:
  virtual ~ToolCallParser() = default;
  // Adds the next piece of output; appends to `out` what is now certain (text that could still
  // begin a call is held back).
  virtual void push(std::string_view text, ParsedOutput& out) = 0;
  // The output ended: appends what was held back (an unfinished call's text becomes content).
  virtual void finish(ParsedOutput& out) = 0;
};

enum class ToolCallFormat { kNone, kDeepSeekV3, kDeepSeekV31, kDeepSeekV32, kGlm45 };

// Throws InputError listing the names for an unknown one.
ToolCallFormat tool_call_format_named(const std::string& name);
const char* tool_call_format_name(ToolCallFormat format);
// The format a chat template's own text shows (its special tokens); kNone when it shows none.
ToolCallFormat detect_tool_call_format(std::string_view template_source);

// `tools`: the request's OpenAI tool definitions (glm45 types argument values by their schema:
// a value of a parameter that is not a string is JSON when it parses as JSON). Null for kNone.
std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolCallFormat format,
                                                      const nlohmann::json& tools);

}  // namespace handoff::text
