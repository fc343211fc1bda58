#pragma once
// Runs the built `handoff` binary and captures its exit status and combined output.
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace handoff::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

inline CommandResult run_command(const std::string& command_line) {
  const std::string command = command_line + " 2>&1";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) result.output += buffer.data();
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// The largest absolute difference between two equally shaped JSON number arrays (any depth);
// infinity when the shapes differ.
inline double json_max_diff(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) return std::fabs(a.get<double>() - b.get<double>());
  if (!a.is_array() || !b.is_array() || a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, json_max_diff(a[i], b[i]));
  return worst;
}

inline CommandResult run_handoff(const std::string& args) {
  return run_command(std::string(HANDOFF_BINARY) + " " + args);
}

}  // namespace handoff::testing
