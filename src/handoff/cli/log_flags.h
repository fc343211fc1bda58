#pragma once
// --log-level for the commands that log (serve, generate, bench, make-model).
#include <CLI/CLI.hpp>

namespace handoff::cli {

// Adds --log-level debug|info|warning|error (default info); a bad name is a usage error.
void add_log_level_flag(CLI::App& cmd);

}  // namespace handoff::cli
