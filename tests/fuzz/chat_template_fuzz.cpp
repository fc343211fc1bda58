// Fuzzes the chat-template renderer: the input is template text, a NUL, then the variables as
// JSON (an object with messages / tools / any other keys, or a bare messages list). Parsing,
// evaluation and rendering must end in text or an InputError, within the render limits. When
// the JSON half does not parse, the template still renders with a fixed conversation.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "handoff/error.h"
#include "handoff/text/chat_template.h"
#include "handoff/text/jinja_limits.h"

namespace {

using nlohmann::ordered_json;

// Deeper than the server accepts (64), so the renderer's own limit (128) is reached too, and
// shallow enough that nlohmann's recursive copies stay on the stack.
constexpr int kMaxFuzzJsonDepth = 1000;

handoff::text::ChatRequest request_from(std::string_view json_text) {
  handoff::text::ChatRequest request;
  request.add_generation_prompt = true;
  ordered_json vars = ordered_json::parse(
      json_text,
      [](int depth, ordered_json::parse_event_t, ordered_json&) {
        return depth <= kMaxFuzzJsonDepth;
      },
      false);
  if (vars.is_discarded() || vars.is_null())
    vars = ordered_json::parse(R"({"messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},
      {"role":"user","content":"2+2?"}]})");
  if (vars.is_array()) {
    request.messages = std::move(vars);
  } else if (vars.is_object()) {
    for (auto& [key, value] : vars.items()) {
      if (key == "messages")
        request.messages = value;
      else if (key == "tools")
        request.tools = value;
      else if (key == "add_generation_prompt" && value.is_boolean())
        request.add_generation_prompt = value.get<bool>();
      else
        request.extra[key] = value;
    }
  } else {
    request.extra["value"] = std::move(vars);
  }
  return request;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [source, json_text] = handoff::fuzz::split_at_nul(data, size);
  try {
    const handoff::text::ChatTemplate chat_template(std::string(source), "<｜begin▁of▁sentence｜>",
                                                    "<｜end▁of▁sentence｜>");
    const std::string out = chat_template.render(request_from(json_text));
    if (out.size() > handoff::text::jinja::kMaxStringBytes) std::abort();
  } catch (const handoff::InputError&) {
  }
  return 0;
}
