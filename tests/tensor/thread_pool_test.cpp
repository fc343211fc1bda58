// parallel_for: every index exactly once whatever the split, nesting runs inline, failures
// reach the caller, each thread's workers are its own, and sleeping workers wake up.
#include "handoff/tensor/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace handoff::tensor {
namespace {

// Runs parallel_for over [0, n) and checks each index was visited once, in chunks >= 1.
void expect_exact_cover(int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int64_t> calls{0};
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    ASSERT_LT(b, e);
    calls.fetch_add(1);
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "i=" << i;
  EXPECT_LE(calls.load(), std::max<int64_t>(1, (n + grain - 1) / grain));
}

TEST(ThreadPool, EveryIndexOnceForAnySizeGrainAndThreadCount) {
  std::thread([] {
    for (int threads : {1, 2, 3, 5}) {
      set_num_threads(threads);
      for (int64_t n : {1, 2, 7, 64, 1000, 4099})
        for (int64_t grain : {1, 3, 64, 5000}) {
          SCOPED_TRACE(testing::Message()
                       << "threads " << threads << " n " << n << " grain " << grain);
          expect_exact_cover(n, grain);
        }
    }
  }).join();
}

TEST(ThreadPool, WorkSpreadsOverTheThreads) {
  std::thread([] {
    set_num_threads(3);
    std::mutex mutex;
    std::set<std::thread::id> seen;
    for (int round = 0; round < 200 && seen.size() < 3; ++round)
      parallel_for(24, 1, [&](int64_t, int64_t) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard lock(mutex);
        seen.insert(std::this_thread::get_id());
      });
    EXPECT_EQ(seen.size(), 3u);
  }).join();
}

// A worker that stalls inside its first chunk (as one descheduled by a busy neighbour would)
// holds up only that chunk: the caller runs every other one, the rest of the worker's own
// share included, before it waits.
TEST(ThreadPool, AStalledWorkersShareIsRunByTheCaller) {
  std::thread([] {
    set_num_threads(2);
    const auto caller = std::this_thread::get_id();
    constexpr int64_t kChunks = 16;
    for (int round = 0; round < 20; ++round) {
      std::atomic<bool> stalled{false};
      std::atomic<int64_t> by_caller{0}, by_worker{0};
      parallel_for(kChunks, 1, [&](int64_t b, int64_t e) {
        if (std::this_thread::get_id() == caller) {
          by_caller.fetch_add(e - b);
          std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the worker gets going
          return;
        }
        by_worker.fetch_add(e - b);
        if (!stalled.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      });
      ASSERT_EQ(by_caller.load() + by_worker.load(), kChunks);
      // When the worker stalled in its very first chunk, the caller ran all the others.
      if (by_worker.load() == 1) {
        EXPECT_EQ(by_caller.load(), kChunks - 1);
        return;
      }
    }
    GTEST_SKIP() << "the worker never reached its first chunk before the caller was done";
  }).join();
}

TEST(ThreadPool, NestedCallsRunInlineOnTheChunksThread) {
  std::thread([] {
    set_num_threads(2);
    std::atomic<int64_t> total{0};
    parallel_for(8, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const auto outer = std::this_thread::get_id();
        parallel_for(100, 1, [&](int64_t ib, int64_t ie) {
          EXPECT_EQ(std::this_thread::get_id(), outer);
          total.fetch_add(ie - ib);
        });
      }
    });
    EXPECT_EQ(total.load(), 800);
  }).join();
}

TEST(ThreadPool, ChunkFailureReachesTheCallerAfterTheOthersFinish) {
  std::thread([] {
    set_num_threads(2);
    std::atomic<int> finished{0};
    EXPECT_THROW(parallel_for(16, 1,
                              [&](int64_t b, int64_t) {
                                if (b == 0) throw std::runtime_error("chunk failed");
                                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                finished.fetch_add(1);
                              }),
                 std::runtime_error);
    EXPECT_EQ(finished.load(), 15);
    expect_exact_cover(100, 1);  // still usable
  }).join();
}

TEST(ThreadPool, ThreadsOfRanksKeepTheirOwnWorkers) {
  std::vector<std::thread> ranks;
  std::atomic<int> failures{0};
  for (int r = 0; r < 4; ++r)
    ranks.emplace_back([&] {
      set_num_threads(2);
      for (int round = 0; round < 300; ++round) {
        std::atomic<int64_t> sum{0};
        parallel_for(37, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
        });
        if (sum.load() != 37 * 36 / 2) failures.fetch_add(1);
      }
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, SleepingWorkersWakeForTheNextJob) {
  std::thread([] {
    set_num_threads(2);
    expect_exact_cover(64, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // past spinning: asleep
    expect_exact_cover(64, 1);
    park_workers();
    expect_exact_cover(64, 1);
  }).join();
}

}  // namespace
}  // namespace handoff::tensor
