// Backoff: the deadline is kept through every phase and across restart(); the phases only
// change how a pause waits.
#include "handoff/comm/backoff.h"

#include <gtest/gtest.h>

namespace handoff::comm {
namespace {

using namespace std::chrono_literals;

TEST(Backoff, ZeroTimeoutStopsAtOnce) {
  Backoff backoff(0ms);
  EXPECT_FALSE(backoff.pause());
}

TEST(Backoff, EveryPhaseStopsAtTheDeadline) {
  // Tiny phases: the loop passes spin, yield and sleep before the 20 ms deadline.
  Backoff backoff(20ms, {.spin = 10us, .yield = 100us, .sleep = 50us});
  const auto start = Backoff::Clock::now();
  int pauses = 0;
  while (backoff.pause()) ++pauses;
  const auto waited = Backoff::Clock::now() - start;
  EXPECT_GE(waited, 20ms);
  EXPECT_LT(waited, 2s);
  EXPECT_GT(pauses, 2);
}

TEST(Backoff, RestartKeepsTheDeadline) {
  Backoff backoff(5ms);
  while (backoff.pause()) {
  }
  backoff.restart();
  EXPECT_FALSE(backoff.pause());
}

}  // namespace
}  // namespace handoff::comm
