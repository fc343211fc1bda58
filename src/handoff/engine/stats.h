#pragma once
// What the engine counts for /metrics: totals, gauges and latency histograms. The engine thread
// writes, any thread reads a snapshot.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace handoff::engine {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<uint64_t>& counts() const { return counts_; }  // not cumulative; last: +Inf
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct EngineStats {
  std::map<std::string, uint64_t> finished;  // by finish reason
  uint64_t prompt_tokens = 0;
  uint64_t generation_tokens = 0;
  uint64_t preemptions = 0;
  uint64_t steps = 0;
  int64_t waiting = 0;
  int64_t running = 0;
  int64_t cache_blocks_used = 0;
  int64_t cache_blocks_total = 0;
  // Prefix caching, in tokens: looked up as sequences joined, and found cached.
  uint64_t prefix_cache_queries = 0;
  uint64_t prefix_cache_hits = 0;
  Histogram ttft{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  Histogram inter_token{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
  Histogram e2e{{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}};
  // Where each finished request's time went, as vLLM splits it: arrival to its first step
  // (queue), first step to first token (prefill), first token to finish (decode).
  Histogram queue_time{{0.001, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5, 1, 2.5, 5, 10, 30, 60, 120}};
  Histogram prefill_time{{0.005, 0.01, 0.025, 0.05, 0.1, 0.3, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram decode_time{{0.01, 0.05, 0.1, 0.3, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}};
  // Tokens per finished request, and tokens (prompt + generated) fed per engine step.
  Histogram request_prompt_tokens{
      {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000}};
  Histogram request_generation_tokens{
      {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000}};
  Histogram iteration_tokens{{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}};
};

}  // namespace handoff::engine
