// `handoff tokenize`: JSON lines {"text": ...} on stdin -> {"ids": [...]} lines on stdout, or the
// reverse with --decode. Text that is not valid UTF-8 cannot travel in JSON, so decoded bytes are
// written with invalid sequences replaced (U+FFFD); the C++ API keeps exact bytes.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "handoff/cli/commands.h"
#include "handoff/error.h"
#include "handoff/text/tokenizer.h"

namespace handoff::cli {
namespace {

struct TokenizeArgs {
  std::string model_dir;
  bool decode = false;
  bool no_special = false;
};

nlohmann::json parse_line(const std::string& line, size_t number) {
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    fail_input("stdin line {}: invalid JSON: {}", number, e.what());
  }
}

void run_tokenize(const TokenizeArgs& args) {
  const auto tokenizer = text::Tokenizer::load(args.model_dir);
  std::string line;
  size_t number = 0;
  while (std::getline(std::cin, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json in = parse_line(line, number);
    nlohmann::json out;
    if (args.decode) {
      if (!in.is_object() || !in.contains("ids") || !in["ids"].is_array())
        fail_input("stdin line {}: expected {{\"ids\": [...]}}", number);
      std::vector<int32_t> ids;
      for (const auto& v : in["ids"]) {
        if (!v.is_number_integer())
          fail_input("stdin line {}: id {} is not an integer", number, v.dump());
        ids.push_back(v.get<int32_t>());
      }
      out["text"] = tokenizer->decode(ids);
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    } else {
      if (!in.is_object() || !in.contains("text") || !in["text"].is_string())
        fail_input("stdin line {}: expected {{\"text\": \"...\"}}", number);
      out["ids"] = tokenizer->encode(in["text"].get<std::string>(), !args.no_special);
      std::cout << out.dump() << '\n';
    }
  }
  std::cout.flush();
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "Text <-> token ids as JSON lines on stdin/stdout ({\"text\"} / {\"ids\"})");
  cmd->add_option("--model,--tokenizer", args->model_dir,
                  "Folder with tokenizer.json (+ tokenizer_config.json)")
      ->required();
  cmd->add_flag("--decode", args->decode, "Read {\"ids\": [...]} lines, write {\"text\": ...}");
  cmd->add_flag("--no-special", args->no_special, "Do not add BOS/EOS tokens");
  cmd->callback([args] { run_tokenize(*args); });
}

}  // namespace handoff::cli
