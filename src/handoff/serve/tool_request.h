#pragma once
// The tool-calling and reasoning parts of a chat request, checked strictly: `tools`,
// `tool_choice`, `chat_template_kwargs`, and the tool fields of messages (an assistant's
// `tool_calls`, a tool message's `tool_call_id`). Bad values are 400s naming the field.
#include <nlohmann/json.hpp>

#include "handoff/serve/openai_protocol.h"
#include "handoff/text/chat_template.h"

namespace handoff::serve {

// Checks messages[i]'s tool fields; throws ApiError.
void check_message_tool_fields(const nlohmann::json& message, size_t i);

// Sets chat.tools and chat.extra (the template kwargs, both taken from `ordered`, the same body
// parsed with its key order kept) and p's tool-call parsing from the body. Throws ApiError.
void parse_tools_and_kwargs(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                            const ProtocolContext& ctx, ParsedRequest& p, text::ChatRequest& chat);

}  // namespace handoff::serve
