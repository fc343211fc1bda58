// Fuzzes forced tool calls (tool_choice "required" or a named function): the grammar that
// constrains sampling, walked by the fuzzer's bytes, must only ever accept text that the
// format's own parser turns into exactly one call to an allowed function with a JSON-object
// argument string. The first byte picks the format and whether the prompt opened a thinking
// block; the bytes up to the first NUL are the function names (comma-separated, mapped onto the
// characters OpenAI allows in them, as the server checks, when they are not among them); each later
// byte is fed if the grammar takes it, else it picks one of the bytes the grammar takes. The walk
// is then completed with the grammar's shortest completion, whose announced cost must be its
// length.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../text/delta_collector.h"
#include "fuzz_support.h"
#include "handoff/error.h"
#include "handoff/text/chat_output_parser.h"
#include "handoff/text/tool_call_grammar.h"

namespace {

using namespace handoff::text;

constexpr ToolCallFormat kFormats[] = {ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
                                       ToolCallFormat::kDeepSeekV32, ToolCallFormat::kGlm45};
constexpr std::string_view kNameChars =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";

std::vector<std::string> names_of(std::string_view blob) {
  std::vector<std::string> names(1);
  for (const char c : blob) {
    if (c == ',') {
      names.emplace_back();
    } else if (names.back().size() < 64) {
      names.back() += kNameChars.find(c) != std::string_view::npos
                          ? c
                          : kNameChars[static_cast<uint8_t>(c) % kNameChars.size()];
    }
  }
  return names;
}

void expect_one_call(ToolCallFormat format, const std::string& text, bool reasoning,
                     const std::vector<std::string>& names) {
  ChatOutputParser parser(reasoning ? std::make_unique<ReasoningParser>(true) : nullptr,
                          make_tool_call_parser(format, nlohmann::json::array()));
  handoff::testing::DeltaCollector c;
  c.add(parser.push(text));
  c.add(parser.finish());
  if (!c.breach.empty() || !c.r.content.empty() || !c.r.reasoning.empty()) std::abort();
  if (c.completed().size() != 1 || c.r.calls.size() != 1) std::abort();
  const auto& [name, arguments] = c.r.calls[0];
  if (std::find(names.begin(), names.end(), name) == names.end()) std::abort();
  if (!nlohmann::json::parse(arguments, nullptr, false).is_object()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const ToolCallFormat format = kFormats[data[0] % 4];
  const bool reasoning = (data[0] / 4) % 2 == 1;
  const auto [blob, walk] = handoff::fuzz::split_at_nul(data + 1, size - 1);
  const std::vector<std::string> names = names_of(blob);
  std::shared_ptr<const ToolCallGrammar> grammar;
  try {
    grammar = ToolCallGrammar::make(format, names, reasoning ? "</think>" : "");
  } catch (const handoff::InputError&) {
    return 0;  // empty, repeated or too many names: the request is refused
  }
  ToolCallGrammarState state(*grammar);
  std::string text;
  for (const char c : walk) {
    if (state.done()) break;
    auto byte = static_cast<uint8_t>(c);
    if (!ToolCallGrammarState(state).feed(byte)) {
      std::vector<uint8_t> taken;
      for (int b = 0; b < 256; ++b)
        if (ToolCallGrammarState(state).feed(static_cast<uint8_t>(b)))
          taken.push_back(static_cast<uint8_t>(b));
      if (taken.empty()) std::abort();  // a text of the grammar can always go on
      byte = taken[byte % taken.size()];
    }
    if (!state.feed(byte)) std::abort();
    text += static_cast<char>(byte);
  }
  const std::string completion = state.completion();
  if (completion.size() != state.completion_cost()) std::abort();
  if (!state.feed(completion) || !state.done()) std::abort();
  expect_one_call(format, text + completion, reasoning, names);
  return 0;
}
