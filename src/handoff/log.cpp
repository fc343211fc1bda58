#include "handoff/log.h"

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>

namespace handoff::log {
namespace {
std::atomic<Level> g_level{Level::kInfo};
std::mutex g_mutex;
}  // namespace

Level level() { return g_level.load(std::memory_order_relaxed); }
void set_level(Level l) { g_level.store(l, std::memory_order_relaxed); }

std::optional<Level> parse_level(std::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warning" || name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  return std::nullopt;
}

std::string format_line(Level l, std::string_view message) {
  static constexpr const char* kNames[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm utc{};
  gmtime_r(&t, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z {} {}", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, ms.count(),
                     kNames[static_cast<int>(l)], message);
}

void write(Level l, std::string_view message) {
  const std::string line = format_line(l, message);
  std::lock_guard lock(g_mutex);
  fmt::print(stderr, "{}\n", line);
}

}  // namespace handoff::log
