#include "handoff/text/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "handoff/error.h"

namespace handoff::text {
namespace {

std::string token_text(const nlohmann::ordered_json& config, const char* key) {
  if (!config.contains(key)) return "";
  const auto& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return "";
}

// Arguments JSON text unlikely to appear in a template by accident.
constexpr const char* kProbeArguments = R"({"handoff_probe_key": "handoff_probe_value"})";

}  // namespace

std::string read_template_file(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input("{} {}: cannot read the file", flag, path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string source = ss.str();
  if (source.empty()) fail_input("{} {}: the file is empty", flag, path);
  return source;
}

std::unique_ptr<ChatTemplate> ChatTemplate::load(const std::string& model_dir,
                                                 const std::string& template_file) {
  const std::filesystem::path dir(model_dir);
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (std::filesystem::exists(dir / "tokenizer_config.json")) {
    std::ifstream in(dir / "tokenizer_config.json");
    try {
      config = nlohmann::ordered_json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail_input("{}/tokenizer_config.json: invalid JSON: {}", model_dir, e.what());
    }
  }
  std::string source;
  if (!template_file.empty()) {
    source = read_template_file(template_file, "--chat-template");
  } else if (std::filesystem::exists(dir / "chat_template.jinja")) {
    // A separate chat_template.jinja wins: newer HF exports move the template there.
    source = read_template_file((dir / "chat_template.jinja").string(), "chat template");
  } else if (config.contains("chat_template") && config["chat_template"].is_string()) {
    source = config["chat_template"].get<std::string>();
  } else if (config.contains("chat_template") && config["chat_template"].is_array()) {
    for (const auto& entry : config["chat_template"])
      if (entry.value("name", "") == "default") source = entry.value("template", "");
  }
  if (source.empty()) fail_input("{} has no chat template", model_dir);
  try {
    return std::make_unique<ChatTemplate>(source, token_text(config, "bos_token"),
                                          token_text(config, "eos_token"));
  } catch (const InputError& e) {
    fail_input("the chat template{}: {}",
               template_file.empty() ? " of " + model_dir : " " + template_file, e.what());
  }
}

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token)
    : source_(source),
      template_(source),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)) {
  object_arguments_ = probe_object_arguments();
}

bool ChatTemplate::probe_object_arguments() const {
  ChatRequest probe;
  probe.messages = nlohmann::ordered_json::array(
      {{{"role", "user"}, {"content", "probe"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         {{{"id", "call_probe"},
           {"type", "function"},
           {"function", {{"name", "probe"}, {"arguments", kProbeArguments}}}}}}}});
  // The string form is kept when the template writes the arguments text as it is.
  try {
    if (render_raw(probe).find(kProbeArguments) != std::string::npos) return false;
  } catch (const InputError&) {
  }
  probe.messages[1]["tool_calls"][0]["function"]["arguments"] =
      nlohmann::ordered_json::parse(kProbeArguments);
  try {
    return render_raw(probe).find("handoff_probe_value") != std::string::npos;
  } catch (const InputError&) {
    return false;  // a template without tool calls: nothing to convert
  }
}

std::string ChatTemplate::render_raw(const ChatRequest& request) const {
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = request.messages;
  context["add_generation_prompt"] = request.add_generation_prompt;
  context["bos_token"] = bos_token_;
  context["eos_token"] = eos_token_;
  if (!request.tools.is_null()) context["tools"] = request.tools;
  for (const auto& [key, value] : request.extra.items()) context[key] = value;
  return template_.render(context);
}

std::string ChatTemplate::render(const ChatRequest& request) const {
  if (!object_arguments_) return render_raw(request);
  ChatRequest converted = request;
  for (auto& message : converted.messages) {
    if (!message.is_object() || !message.contains("tool_calls") ||
        !message["tool_calls"].is_array())
      continue;
    for (auto& call : message["tool_calls"]) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
        continue;
      auto& arguments = call["function"]["arguments"];
      if (!arguments.is_string()) continue;
      try {
        arguments = nlohmann::ordered_json::parse(arguments.get<std::string>());
      } catch (const nlohmann::json::exception& e) {
        fail_input("tool call arguments are not valid JSON: {}", e.what());
      }
    }
  }
  return render_raw(converted);
}

}  // namespace handoff::text
