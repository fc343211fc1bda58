#pragma once
// The process-wide logger: the one global the architecture allows.
#include <fmt/format.h>

#include <cstdio>

namespace handoff::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

Level level();
void set_level(Level level);
void write(Level level, std::string_view message);

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() <= Level::kDebug) write(Level::kDebug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace handoff::log
