#pragma once
// Progress of a long weight load or write. On a terminal: one stderr line rewritten in place,
// "loading weights:  45% (1.21/2.50 GB, 210 tensors, ETA 3.8 s)". Elsewhere (a service manager, a
// container log, a pipe): the same text as a log line at the start and then every few seconds,
// so a slow load is visible without filling the log.
#include <chrono>
#include <cstddef>
#include <string>

namespace handoff::model {

class LoadProgress {
 public:
  enum class Output { kAuto, kTerminal, kLog };  // kAuto: kTerminal when stderr is a tty
  // `what`: "loading weights", "writing weights". total_tensors 0: not known in advance.
  LoadProgress(std::string what, size_t total_bytes, size_t total_tensors = 0,
               Output output = Output::kAuto,
               std::chrono::milliseconds log_interval = std::chrono::milliseconds(5000));
  ~LoadProgress();
  LoadProgress(const LoadProgress&) = delete;
  LoadProgress& operator=(const LoadProgress&) = delete;

  // One more tensor of `bytes` is done.
  void advance(size_t bytes);
  // Ends the line (also done by the destructor).
  void finish();

  size_t done_bytes() const { return done_; }
  // The progress text as shown now (without the line start / end).
  std::string text() const;

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_;
  size_t total_;
  size_t total_tensors_;
  size_t done_ = 0;
  size_t tensors_ = 0;
  bool terminal_;
  bool enabled_;
  bool finished_ = false;
  int last_percent_ = -1;
  std::chrono::milliseconds log_interval_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
};

}  // namespace handoff::model
