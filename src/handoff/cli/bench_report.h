#pragma once
// What `handoff bench serve` and `bench offline` measure per request, the summary they print
// (throughput; TTFT, TPOT and inter-token latency percentiles) and the progress bar.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace handoff::cli {

struct RequestTiming {
  bool ok = false;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double ttft = 0;          // seconds from send to the first token
  double latency = 0;       // seconds from send to the last byte
  std::vector<double> itl;  // seconds between consecutive tokens
};

// "[#####.....] 12/32" on stderr, redrawn in place; thread-safe.
class ProgressBar {
 public:
  explicit ProgressBar(int64_t total) : total_(total) { draw(); }
  void tick();
  void finish();

 private:
  void draw();
  std::mutex mutex_;
  int64_t total_;
  int64_t done_ = 0;
};

// Prints the summary table to stdout.
void print_report(const std::string& title, const std::vector<RequestTiming>& timings,
                  double duration_s, int concurrency);

// The p-th percentile (0..100) of v, interpolated; 0 when v is empty.
double percentile(std::vector<double> v, double p);

// Deterministic random token ids in [lo, hi).
std::vector<int32_t> random_prompt(uint64_t seed, int64_t len, int32_t lo, int32_t hi);

}  // namespace handoff::cli
