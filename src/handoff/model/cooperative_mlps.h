#pragma once
// The decode MoE's MLPs (the shared expert and each routed expert with rows this step), run by
// all threads of one parallel region block by block. Each thread starts on its own contiguous
// share of the MLPs (split by weight bytes, so each streams whole experts as a static split
// would); a thread whose share is done helps with the others' MLPs from their last one back,
// 64-row blocks at a time, so the region ends when the work does, not when the slower thread's
// last whole expert (~140 us on the 2-core Zen 5, docs/performance.md) does. Every block is
// computed as Mlp::forward computes it, so the results are those of one MLP after another, bit
// for bit, whatever the thread count.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "handoff/model/mlp.h"

namespace handoff::model {

class CooperativeMlps {
 public:
  // Room for `capacity` MLPs a step (the jobs' atomics are never moved).
  explicit CooperativeMlps(size_t capacity);

  // Starts a step's list.
  void clear() { count_ = 0; }
  // y[m] = mlp(x[m]) for m in [0, rows); `scratch` holds rows * 3 * intermediate floats, as for
  // Mlp::forward. Needs mlp.small_m(rows).
  void add(const Mlp& mlp, const float* x, int64_t rows, float* y, float* scratch);
  // Runs every added MLP, on the calling thread's pool.
  void run() { run_after(nullptr, nullptr); }
  // As run(), but add_more() runs first, on one thread of the region, and adds the rest of the
  // step's MLPs (the routed experts, once the router has picked them); meanwhile the other
  // threads start on the MLPs added before (the shared expert, which needs no routing).
  template <typename AddMore>
  void run(const AddMore& add_more) {
    run_after(&add_more, [](const void* f) { (*static_cast<const AddMore*>(f))(); });
  }

 private:
  struct alignas(64) Job {
    const Mlp* mlp = nullptr;
    const float* x = nullptr;
    int64_t rows = 0;
    float* y = nullptr;
    float* gate_up = nullptr;                // [rows, 2 * intermediate]
    float* act = nullptr;                    // [rows, intermediate]
    int64_t gate_up_blocks = 0, blocks = 0;  // gate_up's, then down's after them
    size_t bytes = 0;
    std::atomic<int64_t> next{0};          // first unclaimed block
    std::atomic<int64_t> gate_up_done{0};  // gate_up blocks finished
    std::atomic<bool> act_ready{false};    // act written (by whoever finished gate_up)
  };
  // Claims and computes blocks of `job` until none are left.
  static void drain(Job& job);
  static void compute(Job& job, int64_t b0, int64_t b1);
  void run_after(const void* add_more, void (*call)(const void*));
  // Splits order_ into `slots` contiguous shares of about equal weight bytes (first_job_).
  void share_out(int64_t slots);
  // Thread slot `slot` of `slots`: its own share, then the others' from their last MLP back.
  void run_slot(int64_t slot, int64_t slots);

  std::vector<Job> jobs_;
  size_t count_ = 0;
  std::vector<size_t> order_;            // jobs_ indices in share order
  std::vector<size_t> first_job_;        // per slot, its share's first place in order_; then count_
  std::atomic<bool> shared_out_{false};  // add_more's MLPs added and first_job_ written
};

}  // namespace handoff::model
