#include "handoff/log.h"

#include <atomic>
#include <mutex>

namespace handoff::log {
namespace {
std::atomic<Level> g_level{Level::kInfo};
std::mutex g_mutex;
}  // namespace

Level level() { return g_level.load(std::memory_order_relaxed); }
void set_level(Level l) { g_level.store(l, std::memory_order_relaxed); }

void write(Level l, std::string_view message) {
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  std::lock_guard lock(g_mutex);
  fmt::print(stderr, "[handoff {}] {}\n", kNames[static_cast<int>(l)], message);
}

}  // namespace handoff::log
