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
  // Throws InputError "<dir> has no chat template" when neither source exists. A non-empty
  // `template_file` (serve --chat-template) replaces the folder's template; the folder still
  // gives the bos / eos tokens.
  static std::unique_ptr<ChatTemplate> load(const std::string& model_dir,
                                            const std::string& template_file = "");
  ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token);

  // Throws InputError for template errors, including raise_exception() calls.
  std::string render(const ChatRequest& request) const;

  const std::string& source() const { return source_; }
  // Whether assistant tool calls reach the template with their arguments as an object (parsed
  // from the OpenAI wire form, a JSON string): templates that iterate over the arguments
  // (GLM's `arguments.items()`) or serialise them (`arguments | tojson`) need that, while
  // DeepSeek-V3's concatenates the string. Decided once by rendering a probe conversation.
  bool object_arguments() const { return object_arguments_; }

 private:
  std::string render_raw(const ChatRequest& request) const;
  bool probe_object_arguments() const;

  std::string source_;
  JinjaTemplate template_;
  std::string bos_token_, eos_token_;
  bool object_arguments_ = false;
};

// Reads a whole template file; throws InputError naming `flag` when it cannot be read or is
// empty.
std::string read_template_file(const std::string& path, const std::string& flag);

}  // namespace handoff::text
