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

}  // namespace

std::unique_ptr<ChatTemplate> ChatTemplate::load(const std::string& model_dir) {
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
  // A separate chat_template.jinja wins: newer HF exports move the template there.
  if (std::filesystem::exists(dir / "chat_template.jinja")) {
    std::ifstream in(dir / "chat_template.jinja");
    std::stringstream ss;
    ss << in.rdbuf();
    source = ss.str();
  } else if (config.contains("chat_template") && config["chat_template"].is_string()) {
    source = config["chat_template"].get<std::string>();
  } else if (config.contains("chat_template") && config["chat_template"].is_array()) {
    for (const auto& entry : config["chat_template"])
      if (entry.value("name", "") == "default") source = entry.value("template", "");
  }
  if (source.empty()) fail_input("{} has no chat template", model_dir);
  return std::make_unique<ChatTemplate>(source, token_text(config, "bos_token"),
                                        token_text(config, "eos_token"));
}

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token)
    : template_(source), bos_token_(std::move(bos_token)), eos_token_(std::move(eos_token)) {}

std::string ChatTemplate::render(const ChatRequest& request) const {
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = request.messages;
  context["add_generation_prompt"] = request.add_generation_prompt;
  context["bos_token"] = bos_token_;
  context["eos_token"] = eos_token_;
  if (!request.tools.is_null()) context["tools"] = request.tools;
  for (const auto& [key, value] : request.extra.items()) context[key] = value;
  return template_.render(context);
}

}  // namespace handoff::text
