#pragma once
// Runs the built `handoff` binary and captures its exit status and combined output.
#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

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

inline CommandResult run_handoff(const std::string& args) {
  return run_command(std::string(HANDOFF_BINARY) + " " + args);
}

}  // namespace handoff::testing
