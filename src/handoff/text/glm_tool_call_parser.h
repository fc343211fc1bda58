#pragma once
// GLM-4.5 and later (GLM-4.6, 4.7, GLM-5): <tool_call>NAME<arg_key>K</arg_key><arg_value>V
// </arg_value>...</tool_call>, with or without newlines between the parts.
#include <memory>
#include <nlohmann/json.hpp>

#include "handoff/text/tool_call_scan.h"

namespace handoff::text {

// `tools`: the request's tool definitions; a value is JSON when its parameter's schema type is
// not "string" and the value parses as JSON, a string otherwise.
std::unique_ptr<ToolCallParser> make_glm_tool_call_parser(const nlohmann::json& tools);

}  // namespace handoff::text
