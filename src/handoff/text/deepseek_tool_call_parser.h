#pragma once
// DeepSeek-V3 (`v31` false) and DeepSeek-V3.1 (`v31` true) tool-call formats.
#include <memory>

#include "handoff/text/tool_call_scan.h"

namespace handoff::text {

std::unique_ptr<ToolCallParser> make_deepseek_tool_call_parser(bool v31);

}  // namespace handoff::text
