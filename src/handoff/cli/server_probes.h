#pragma once
// What the soak run watches besides its own requests: the server's /metrics (RSS, referenced
// cache blocks, running requests), a /health prober timing every answer, and slowloris clients
// that hold connections open by sending one header byte per second. Loopback targets only.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace handoff::cli {

// The server under test; only loopback addresses are accepted (InputError naming --url).
struct LoopbackTarget {
  std::string url;  // http://HOST:PORT
  std::string host;
  int port = 0;
};
LoopbackTarget loopback_target(const std::string& url);

// Gauges of one /metrics scrape; -1 where the server did not report one.
struct MetricsSnapshot {
  bool available = false;
  double rss_bytes = -1;
  double cache_blocks_used = -1;
  double running = -1;
  double waiting = -1;
};
MetricsSnapshot parse_metrics(std::string_view text);
MetricsSnapshot scrape_metrics(const LoopbackTarget& target);

// Stops its thread at stop() or at the deadline, whichever comes first; the destructor stops.
class BackgroundProbe {
 public:
  virtual ~BackgroundProbe();
  void stop();

 protected:
  // Runs `tick` every `interval` until stopped or `max_duration` has passed.
  void start(std::chrono::milliseconds interval, std::chrono::milliseconds max_duration);
  virtual void tick() = 0;
  virtual void finish() {}

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

class HealthProber : public BackgroundProbe {
 public:
  HealthProber(LoopbackTarget target, std::chrono::milliseconds interval,
               std::chrono::milliseconds max_duration);
  ~HealthProber() override { stop(); }
  // Valid after stop().
  const std::vector<double>& latencies() const { return latencies_; }  // seconds, answered ones
  int64_t failures() const { return failures_; }
  const std::string& first_failure() const { return first_failure_; }

 private:
  void tick() override;
  LoopbackTarget target_;
  std::vector<double> latencies_;
  int64_t failures_ = 0;
  std::string first_failure_;
};

class Slowloris : public BackgroundProbe {
 public:
  Slowloris(LoopbackTarget target, int connections, std::chrono::milliseconds max_duration);
  ~Slowloris() override { stop(); }
  int64_t opened() const { return opened_; }
  int64_t closed_by_server() const { return closed_by_server_; }
  int64_t bytes_sent() const { return bytes_sent_; }

 private:
  void tick() override;
  void finish() override;
  void close_slot(size_t i);
  LoopbackTarget target_;
  std::string header_;  // sent one byte per tick, never finished
  std::vector<int> sockets_;
  std::vector<size_t> sent_;  // header bytes sent on each socket
  int64_t opened_ = 0;
  int64_t closed_by_server_ = 0;
  int64_t bytes_sent_ = 0;
};

}  // namespace handoff::cli
