// `handoff render-chat`: one JSON object {"messages": [...], "add_generation_prompt": bool,
// "tools": [...]} on stdin -> the model's chat template rendered, with no newline added.
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "handoff/cli/commands.h"
#include "handoff/error.h"
#include "handoff/text/chat_template.h"

namespace handoff::cli {
namespace {

void run_render_chat(const std::string& model_dir) {
  const auto chat_template = text::ChatTemplate::load(model_dir);
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(input);
  } catch (const nlohmann::json::exception& e) {
    fail_input("stdin: invalid JSON: {}", e.what());
  }
  if (!request.is_object() || !request.contains("messages") || !request["messages"].is_array())
    fail_input("stdin: expected {{\"messages\": [...], \"add_generation_prompt\": bool}}");
  text::ChatRequest chat;
  chat.messages = request["messages"];
  chat.add_generation_prompt = request.value("add_generation_prompt", false);
  if (request.contains("tools")) chat.tools = request["tools"];
  // Any other key (e.g. enable_thinking) is passed to the template as a variable.
  for (const auto& [key, value] : request.items())
    if (key != "messages" && key != "add_generation_prompt" && key != "tools")
      chat.extra[key] = value;
  std::cout << chat_template->render(chat);
  std::cout.flush();
}

}  // namespace

void add_render_chat_command(CLI::App& app) {
  auto model_dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "render-chat", "Render a conversation (JSON on stdin) with the model's chat template");
  cmd->add_option("--model,--tokenizer", *model_dir,
                  "Folder with tokenizer_config.json (chat_template) or chat_template.jinja")
      ->required();
  cmd->callback([model_dir] { run_render_chat(*model_dir); });
}

}  // namespace handoff::cli
