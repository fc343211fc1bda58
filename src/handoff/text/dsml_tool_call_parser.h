#pragma once
// DeepSeek-V3.2's DSML tool-call format: <｜DSML｜function_calls> holding <｜DSML｜invoke name=..>
// elements whose <｜DSML｜parameter name=.. string="true|false"> values are strings or JSON.
#include <memory>

#include "handoff/text/tool_call_scan.h"

namespace handoff::text {

std::unique_ptr<ToolCallParser> make_dsml_tool_call_parser();

}  // namespace handoff::text
