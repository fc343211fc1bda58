#include "handoff/serve/tool_request.h"

#include <set>

namespace handoff::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param, "invalid_value");
}

// OpenAI's rule for function names.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

const json* member(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || object[key].is_null()) return nullptr;
  return &object[key];
}

// The function names of the tools; checks each definition.
std::set<std::string> check_tools(const json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be a list of tool definitions");
  if (tools.size() > 128) bad("tools", "at most 128 tools");
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string at = fmt::format("tools[{}]", i);
    if (!t.is_object()) bad(at, "each tool must be an object");
    const json* type = member(t, "type");
    if (type == nullptr || *type != "function")
      bad(at + ".type", "only tools of type \"function\" are supported");
    const json* f = member(t, "function");
    if (f == nullptr || !f->is_object()) bad(at + ".function", "a tool needs a 'function' object");
    const json* name = member(*f, "name");
    if (name == nullptr || !name->is_string() || !valid_function_name(name->get<std::string>()))
      bad(at + ".function.name",
          "a function name must be 1 to 64 letters, digits, underscores or dashes");
    if (const json* d = member(*f, "description"); d != nullptr && !d->is_string())
      bad(at + ".function.description", "'description' must be a string");
    if (const json* params = member(*f, "parameters"); params != nullptr && !params->is_object())
      bad(at + ".function.parameters", "'parameters' must be a JSON Schema object");
    if (!names.insert(name->get<std::string>()).second)
      bad(at + ".function.name",
          fmt::format("function '{}' is defined twice", name->get<std::string>()));
  }
  return names;
}

}  // namespace

void check_message_tool_fields(const json& m, size_t i) {
  const std::string role = m["role"].get<std::string>();
  if (const json* calls = member(m, "tool_calls")) {
    const std::string at = fmt::format("messages[{}].tool_calls", i);
    if (role != "assistant") bad(at, "only assistant messages have tool_calls");
    if (!calls->is_array()) bad(at, "'tool_calls' must be a list");
    for (size_t j = 0; j < calls->size(); ++j) {
      const json& c = (*calls)[j];
      const std::string cat = fmt::format("{}[{}]", at, j);
      if (!c.is_object()) bad(cat, "each tool call must be an object");
      if (const json* id = member(c, "id"); id != nullptr && !id->is_string())
        bad(cat + ".id", "'id' must be a string");
      if (const json* type = member(c, "type"); type != nullptr && *type != "function")
        bad(cat + ".type", "only tool calls of type \"function\" are supported");
      const json* f = member(c, "function");
      if (f == nullptr || !f->is_object()) bad(cat + ".function", "a tool call needs 'function'");
      const json* name = member(*f, "name");
      if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty())
        bad(cat + ".function.name", "a tool call needs the function's name");
      const json* args = member(*f, "arguments");
      if (args == nullptr || !args->is_string())
        bad(cat + ".function.arguments", "'arguments' must be a string holding a JSON object");
      if (!json::accept(args->get<std::string>()))
        bad(cat + ".function.arguments", "'arguments' is not valid JSON");
    }
  }
  if (role == "tool") {
    const json* id = member(m, "tool_call_id");
    if (id == nullptr || !id->is_string())
      bad(fmt::format("messages[{}].tool_call_id", i), "a tool message needs 'tool_call_id'");
  }
  if (const json* r = member(m, "reasoning_content"); r != nullptr && !r->is_string())
    bad(fmt::format("messages[{}].reasoning_content", i), "'reasoning_content' must be a string");
}

void parse_tools_and_kwargs(const json& body, const nlohmann::ordered_json& ordered,
                            const ProtocolContext& ctx, ParsedRequest& p, text::ChatRequest& chat) {
  std::set<std::string> names;
  const json* tools = member(body, "tools");
  if (tools != nullptr) names = check_tools(*tools);
  const bool has_tools = !names.empty();

  // tool_choice: absent means "auto" with tools and "none" without (OpenAI's defaults).
  std::string choice = has_tools ? "auto" : "none";
  if (const json* tc = member(body, "tool_choice")) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required")
        bad("tool_choice",
            fmt::format("'tool_choice' must be \"none\", \"auto\", \"required\" or "
                        "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, got \"{}\"",
                        choice));
    } else if (tc->is_object()) {
      const json* type = member(*tc, "type");
      const json* f = member(*tc, "function");
      const json* name = f != nullptr ? member(*f, "name") : nullptr;
      if (type == nullptr || *type != "function" || name == nullptr || !name->is_string())
        bad("tool_choice",
            "a named 'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": "
            "...}}");
      if (!names.count(name->get<std::string>()))
        bad("tool_choice", fmt::format("tool_choice names function '{}', which is not in 'tools'",
                                       name->get<std::string>()));
      choice = "function";
      p.forced_tools = {name->get<std::string>()};
    } else {
      bad("tool_choice", "'tool_choice' must be a string or an object");
    }
    if (choice != "none" && !has_tools)
      bad("tool_choice", "'tool_choice' other than \"none\" needs 'tools'");
  }
  if (has_tools && choice != "none" && ctx.tool_format == text::ToolCallFormat::kNone)
    bad("tools",
        "this server has no tool-call parser for its chat template (serve --tool-call-parser)");
  if (tools != nullptr) chat.tools = ordered["tools"];
  if (has_tools && choice != "none") {
    p.tool_format = ctx.tool_format;
    p.tools = *tools;
  }
  if (choice == "required")
    for (const json& t : *tools) p.forced_tools.push_back(t["function"]["name"].get<std::string>());
  p.reasoning_format = ctx.reasoning_format;

  if (const json* kwargs = member(body, "chat_template_kwargs")) {
    if (!kwargs->is_object())
      bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (const auto& [k, v] : ordered["chat_template_kwargs"].items()) {
      if (k == "messages" || k == "tools")
        bad("chat_template_kwargs",
            fmt::format("'{}' is set by the request itself, not chat_template_kwargs", k));
      chat.extra[k] = v;
    }
  }
}

}  // namespace handoff::serve
