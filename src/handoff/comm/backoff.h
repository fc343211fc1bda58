#pragma once
// How a rank waits between two polls of a pending operation (MPI_Test, MPI_Iprobe), and when
// it gives up. A decode step makes hundreds of small collectives that finish within
// microseconds when every rank has a core, so a fixed sleep per poll (the old 100 µs) cost
// more than the collectives; instead:
//   1. spin for `spin`: a peer that is running answers within it;
//   2. then yield the core between polls: ranks may outnumber cores (mpirun --oversubscribe),
//      and the rank being waited for may need this one's core to get there;
//   3. only after `yield` of waiting, sleep `sleep` between polls: the peer is busy with real
//      work (a pipeline stage computing), and a sleeping rank leaves its core to it.
#include <chrono>
#include <thread>

namespace handoff::comm {

// Phase lengths, measured from the first pause. Defaults: docs/performance.md, "Collectives:
// local vs MPI" (sleeping early, or at every poll as before, cost the most there).
struct BackoffPhases {
  std::chrono::microseconds spin{10};
  std::chrono::microseconds yield{2000};
  std::chrono::microseconds sleep{50};
};

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Backoff(std::chrono::milliseconds timeout, BackoffPhases phases = {})
      : phases_(phases), start_(Clock::now()), deadline_(start_ + timeout) {}

  // Back to spinning for the next step of a multi-step operation; the deadline stays.
  void restart() { start_ = Clock::now(); }

  // Waits before the next poll; false once the deadline has passed (the caller raises its
  // timeout error, which names the operation).
  bool pause() {
    const Clock::time_point now = Clock::now();
    if (now >= deadline_) return false;
    const auto waited = now - start_;
    if (waited < phases_.spin) return true;
    if (waited < phases_.yield) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(phases_.sleep);
    }
    return true;
  }

 private:
  BackoffPhases phases_;
  Clock::time_point start_;
  Clock::time_point deadline_;
};

}  // namespace handoff::comm
