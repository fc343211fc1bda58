#pragma once
// The periodic throughput line of a busy server, as vLLM prints it: prompt and generation
// tokens/s since the last line, running and waiting requests, cache use and the prefix-cache
// hit rate. Silent while the engine is idle.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "handoff/engine/engine.h"

namespace handoff::serve {

// The line for what happened between two snapshots `seconds` apart.
std::string stats_line(const engine::EngineStats& before, const engine::EngineStats& now,
                       double seconds);
// Prefix-cache hits / queries so far; nullopt while the engine counts no queries.
std::optional<double> prefix_cache_hit_rate(const engine::EngineStats& stats);

class StatsReporter {
 public:
  // Logs stats_line every `interval` while requests run or wait, or tokens were processed since
  // the last line. `engine` must outlive the reporter.
  StatsReporter(const engine::Engine& engine, std::chrono::milliseconds interval);
  ~StatsReporter();
  StatsReporter(const StatsReporter&) = delete;
  StatsReporter& operator=(const StatsReporter&) = delete;

 private:
  void run();

  const engine::Engine& engine_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace handoff::serve
