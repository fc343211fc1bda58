#include "handoff/tensor/thread_pool.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace handoff::tensor {
namespace {

// Pure spinning this long keeps back-to-back decode ops free of wake-up latency; then a waiter
// yields its core for a while (a descheduled peer can run), then sleeps.
constexpr int kSpinIterations = 20000;
constexpr int kYieldIterations = 2000;
// Chunks per thread: enough that a thread running late leaves most of its share to the others.
constexpr int64_t kChunksPerThread = 8;
// ... and at most this many items per chunk, so that a long region's last chunk, which the
// other threads may wait for, stays short: lm_head's 500 row blocks went in chunks of 31
// (4 MiB, ~140 us on one thread) and the caller waited 45 us on average at its end.
constexpr int64_t kMaxItemsPerChunk = 4;

inline void cpu_relax() { __builtin_ia32_pause(); }

// Workers of one calling thread. A job's chunks are dealt out as contiguous runs, one per
// participant (the caller included), each run taken from its front by its owner; a participant
// whose run is done takes chunks from the back of the others' runs. Each thread thus streams
// one contiguous stretch of a weight, as a static split would (on the 2-core Zen 5 a matrix of
// 1-2 MiB streamed ~10 % faster so than as interleaved chunks, docs/performance.md), while a
// worker the OS has not scheduled yet (another process took its core) never holds a step up:
// the others take its chunks, and the caller waits only for chunks already claimed. OpenMP's
// pool is kept for oneDNN alone, because its fork/join barrier waits for every thread of the
// team even when the machine is oversubscribed.
class WorkerPool {
 public:
  explicit WorkerPool(int workers) : runs_(static_cast<size_t>(workers) + 1) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { worker_loop(i + 1); });
  }
  ~WorkerPool() {
    {
      std::lock_guard lock(sleep_mutex_);
      stopping_.store(true);
      generation_.fetch_add(2);
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int workers() const { return static_cast<int>(threads_.size()); }
  // Waiting workers stop spinning and sleep until the next job.
  void park() { parked_.store(true, std::memory_order_relaxed); }
  // True on a thread while it runs chunks (workers always): nested parallel_for runs inline.
  static bool& t_inside_region();

  // Runs body over [0, n) split into `chunks` even parts, the caller taking part.
  void run(int64_t n, int64_t chunks, const RangeBody& body) {
    // An odd generation closes the previous job: a worker still inside it (it found no chunk
    // left) leaves before the fields below are rewritten; newcomers back off.
    generation_.fetch_add(1);
    wait_until([&] { return inside_.load() == 0; });
    body_ = &body;
    n_ = n;
    chunks_ = chunks;
    failure_ = nullptr;
    const auto parts = static_cast<int64_t>(runs_.size());
    for (int64_t p = 0; p < parts; ++p)
      runs_[static_cast<size_t>(p)].chunks.store(pack(chunks * p / parts, chunks * (p + 1) / parts),
                                                 std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    parked_.store(false, std::memory_order_relaxed);
    generation_.fetch_add(1);  // even: published
    if (sleepers_.load() > 0) {
      std::lock_guard lock(sleep_mutex_);
      wake_.notify_all();
    }
    work(0);
    wait_until([&] { return done_.load(std::memory_order_acquire) == chunks; });
    if (failure_) std::rethrow_exception(failure_);
  }

 private:
  // A participant's run of chunks [first, end) in one word, so that its owner (from the front)
  // and others (from the back) claim with one compare-and-swap.
  struct alignas(64) Run {
    std::atomic<uint64_t> chunks{0};
  };
  static uint64_t pack(int64_t first, int64_t end) {
    return static_cast<uint64_t>(first) << 32 | static_cast<uint64_t>(end);
  }
  // The chunk claimed from run `r`'s front (or back), or -1 once the run is empty.
  int64_t claim(Run& r, bool front) {
    uint64_t s = r.chunks.load(std::memory_order_relaxed);
    while (true) {
      const auto first = static_cast<int64_t>(s >> 32), end = static_cast<int64_t>(s & 0xffffffffu);
      if (first >= end) return -1;
      const uint64_t next = front ? pack(first + 1, end) : pack(first, end - 1);
      if (r.chunks.compare_exchange_weak(s, next, std::memory_order_relaxed)) {
        return front ? first : end - 1;
      }
    }
  }

  // Runs participant `self`'s own chunks, then any left in the others' runs.
  void work(int self) {
    int64_t finished = 0;
    auto run_chunk = [&](int64_t c) {
      try {
        const int64_t begin = n_ * c / chunks_, end = n_ * (c + 1) / chunks_;
        if (begin < end) (*body_)(begin, end);
      } catch (...) {
        std::lock_guard lock(failure_mutex_);
        if (!failure_) failure_ = std::current_exception();
      }
      ++finished;
    };
    for (int64_t c; (c = claim(runs_[static_cast<size_t>(self)], true)) >= 0;) run_chunk(c);
    const auto parts = runs_.size();
    for (size_t i = 1; i < parts; ++i) {
      Run& other = runs_[(static_cast<size_t>(self) + i) % parts];
      for (int64_t c; (c = claim(other, false)) >= 0;) run_chunk(c);
    }
    if (finished > 0) done_.fetch_add(finished, std::memory_order_release);
  }

  void worker_loop(int self) {
    t_inside_region() = true;  // kernels called from a chunk run inline
    uint64_t seen = generation_.load();
    while (true) {
      const uint64_t g = wait_for_job(seen);
      if (stopping_.load()) return;
      seen = g;
      inside_.fetch_add(1);
      if (generation_.load() == g) work(self);
      inside_.fetch_sub(1);
    }
  }

  // Returns the first published (even) generation other than `seen`.
  uint64_t wait_for_job(uint64_t seen) {
    auto published = [&](uint64_t g) { return g != seen && g % 2 == 0; };
    for (int i = 0; i < kSpinIterations + kYieldIterations; ++i) {
      const uint64_t g = generation_.load();
      if (published(g) || stopping_.load()) return g;
      if (parked_.load(std::memory_order_relaxed)) break;
      relax_wait(i);
    }
    std::unique_lock lock(sleep_mutex_);
    sleepers_.fetch_add(1);
    uint64_t g = seen;
    wake_.wait(lock, [&] { return published(g = generation_.load()) || stopping_.load(); });
    sleepers_.fetch_sub(1);
    return g;
  }

  std::vector<std::thread> threads_;
  std::vector<Run> runs_;  // per participant: the caller, then each worker
  // Each counter on its own cache line: waiters poll generation_ while workers bump the others.
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> inside_{0};
  alignas(64) std::atomic<int64_t> done_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> parked_{false};
  const RangeBody* body_ = nullptr;  // the current job's; lives while run() waits
  int64_t n_ = 0;
  int64_t chunks_ = 0;
  std::exception_ptr failure_;
  std::mutex failure_mutex_;
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
};

thread_local int t_num_threads = 0;
thread_local std::unique_ptr<WorkerPool> t_pool;

bool& WorkerPool::t_inside_region() {
  thread_local bool inside = false;
  return inside;
}

// The calling thread's pool with `threads - 1` workers, made on first use.
WorkerPool& pool_for(int threads) {
  if (!t_pool || t_pool->workers() != threads - 1) {
    t_pool.reset();
    t_pool = std::make_unique<WorkerPool>(threads - 1);
  }
  return *t_pool;
}

}  // namespace

int num_threads() {
  if (t_num_threads <= 0)
    t_num_threads = std::max(1, omp_get_max_threads());  // honours OMP_NUM_THREADS
  return t_num_threads;
}

void set_num_threads(int n) {
  t_num_threads = std::max(1, n);
  omp_set_num_threads(t_num_threads);              // oneDNN's team
  if (t_num_threads > 1) pool_for(t_num_threads);  // threads made now, not in a step
}

void relax_wait(int i) { i < kSpinIterations ? cpu_relax() : static_cast<void>(sched_yield()); }

void park_workers() {
  if (t_pool) t_pool->park();
}

void parallel_for(int64_t n, int64_t grain, RangeBody body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = num_threads();
  const int64_t max_chunks = (n + grain - 1) / grain;
  bool& inside = WorkerPool::t_inside_region();
  if (threads <= 1 || max_chunks <= 1 || inside) {
    body(0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(
      max_chunks, std::max<int64_t>(threads * kChunksPerThread,
                                    (n + kMaxItemsPerChunk - 1) / kMaxItemsPerChunk));
  struct InsideRegion {
    bool& flag;
    ~InsideRegion() { flag = false; }
  } region{inside = true};
  pool_for(threads).run(n, chunks, body);
}

}  // namespace handoff::tensor
