#include "handoff/cli/log_flags.h"

#include "handoff/log.h"

namespace handoff::cli {

void add_log_level_flag(CLI::App& cmd) {
  cmd.add_option_function<std::string>(
         "--log-level", [](const std::string& name) { log::set_level(*log::parse_level(name)); },
         "Least severe log lines shown: debug|info|warning|error (default info)")
      ->check(CLI::IsMember({"debug", "info", "warning", "warn", "error"}));
}

}  // namespace handoff::cli
