#pragma once
// A model's chat template (tokenizer_config.json "chat_template" or chat_template.jinja) and the
// variables HuggingFace passes to it: messages, add_generation_prompt, bos/eos tokens, tools.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "handoff/text/jinja.h"

namespace handoff::text {

struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  bool add_generation_prompt = false;
  nlohmann::ordered_json tools;                                     // null: no tools variable
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more template variables
};

class ChatTemplate {
 public:
  // Throws InputError "<dir> has no chat template" when neither source exists.
  static std::unique_ptr<ChatTemplate> load(const std::string& model_dir);
  ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token);

  // Throws InputError for template errors, including raise_exception() calls.
  std::string render(const ChatRequest& request) const;

 private:
  JinjaTemplate template_;
  std::string bos_token_, eos_token_;
};

}  // namespace handoff::text
