#pragma once
// The process-wide logger: the one global the architecture allows. Each line on stderr reads
// "2026-11-30T15:47:15.123Z INFO message" (UTC, milliseconds); --log-level sets the threshold.
#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <string_view>

namespace handoff::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

Level level();
void set_level(Level level);
// "debug", "info", "warning" (or "warn"), "error"; nullopt for anything else.
std::optional<Level> parse_level(std::string_view name);
void write(Level level, std::string_view message);
// The line write() prints for `message` at `level` at the current time (without the newline).
std::string format_line(Level level, std::string_view message);

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::kDebug) write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::kError) write(Level::kError, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace handoff::log
