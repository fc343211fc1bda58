#include "handoff/serve/stats_reporter.h"

#include <fmt/format.h>

#include "handoff/log.h"

namespace handoff::serve {

std::optional<double> prefix_cache_hit_rate(const engine::EngineStats& s) {
  // Since the start, in tokens; none queried yet (or prefix caching off): "n/a".
  if (s.prefix_cache_queries == 0) return std::nullopt;
  return static_cast<double>(s.prefix_cache_hits) / static_cast<double>(s.prefix_cache_queries);
}

std::string stats_line(const engine::EngineStats& before, const engine::EngineStats& now,
                       double seconds) {
  const double dt = seconds > 0 ? seconds : 1.0;
  const double prompt =
      static_cast<double>(now.prompt_tokens - std::min(now.prompt_tokens, before.prompt_tokens)) /
      dt;
  const double generation =
      static_cast<double>(now.generation_tokens -
                          std::min(now.generation_tokens, before.generation_tokens)) /
      dt;
  const double cache = now.cache_blocks_total > 0
                           ? 100.0 * static_cast<double>(now.cache_blocks_used) /
                                 static_cast<double>(now.cache_blocks_total)
                           : 0.0;
  const std::optional<double> hit = prefix_cache_hit_rate(now);
  return fmt::format(
      "Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} tokens/s, "
      "Running: {} reqs, Waiting: {} reqs, KV cache usage: {:.1f}%, Prefix cache hit rate: {}",
      prompt, generation, now.running, now.waiting, cache,
      hit ? fmt::format("{:.1f}%", 100.0 * *hit) : std::string("n/a"));
}

StatsReporter::StatsReporter(const engine::Engine& engine, std::chrono::milliseconds interval)
    : engine_(engine), interval_(interval), thread_([this] { run(); }) {}

StatsReporter::~StatsReporter() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StatsReporter::run() {
  using Clock = std::chrono::steady_clock;
  engine::EngineStats last = engine_.stats();
  auto last_time = Clock::now();
  std::unique_lock lock(mutex_);
  while (!cv_.wait_for(lock, interval_, [&] { return stop_; })) {
    engine::EngineStats now = engine_.stats();
    const auto t = Clock::now();
    const bool busy = now.running > 0 || now.waiting > 0 ||
                      now.prompt_tokens != last.prompt_tokens ||
                      now.generation_tokens != last.generation_tokens;
    if (busy)
      log::info("{}", stats_line(last, now, std::chrono::duration<double>(t - last_time).count()));
    last = std::move(now);
    last_time = t;
  }
}

}  // namespace handoff::serve
